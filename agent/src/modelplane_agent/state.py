"""Everything the agent has seen of its cluster, indexed so an event costs what it touches.

`ClusterState` is fed objects as the API server serves them (`apply` for a
watch event; `replace`, or `apply` then `delete_missing`, for a full list)
and answers, for each, which PoolObservations and ReplicaObservations the
change can affect. Reports are computed on demand from the indexes by the
pure rules of `pools`, `partitions` and `replicas`; nothing here does I/O or
reads a clock.

It is split by concept, each part with its invariants in its docstring:
    `devices.DeviceIndex`     slices and claims: each node's devices (complete,
                              valid resource pools of the newest generation),
                              device -> node, which devices and claims are
                              allocated
    `loads.NodeLoads`         node -> requests of the pods bound to it
    `replica_view.ReplicaView` pods and ReplicaObservations: who selects whom,
                              which pods reference which claims
and the pool view, here:
    node -> pools whose selector it matches   node labels, pool specs
    (kind rule, projected device) -> matches   DeviceClasses (all dropped)
    node -> pool -> free vector                the node's slices, claims on its
                                               devices, the pool's rules; held
                                               only while the node is a member
    pool -> tally of its nodes' contributions  a stale node is recomputed on the
                                               next report, the rest is kept

An event on a node, a slice or a claim touches the pools of the nodes it
concerns; a DeviceClass touches the pools that count it; a pod touches the
replicas that select it (before or after the change) and the pools of its
node when it makes their smallest pod start or stop fitting there; a claim
turning allocated or not touches the replicas of the pods referencing it. A
change that alters nothing the rules read (a node's heartbeat, a pod's
container status) touches nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from modelplane_common.cel.devices import DeviceView
from modelplane_common.cel.errors import SelectorError

from modelplane_agent.devices import DeviceIndex
from modelplane_agent.loads import NodeLoads
from modelplane_agent.pools import (
    Contribution,
    CountersShared,
    Free,
    KindRule,
    NoRoom,
    PoolReport,
    Tally,
    Uncounted,
    Unobservable,
    contribution,
    counters_shared,
    kind_rules,
    lacking,
    report_from_tally,
    selector_failed,
    unobservable_report,
)
from modelplane_agent.pools import free_vector as compute_free_vector
from modelplane_agent.replica_view import ReplicaKey, ReplicaView
from modelplane_agent.replicas import ReplicaReport
from modelplane_agent.snapshot import (
    Device,
    DeviceClass,
    DeviceKey,
    Node,
    Pod,
    PoolSpec,
    ReplicaSpec,
    Slice,
    allocated_devices,
    device_class_from,
    is_allocated,
    name_of,
    namespace_of,
    node_from,
    pod_from,
    pool_spec_from,
    selects,
    slice_from,
    status_of,
    uid_of,
)

NODES = "nodes"
PODS = "pods"
SLICES = "resourceslices"
CLAIMS = "resourceclaims"
CLASSES = "deviceclasses"
POOLS = "poolobservations"
REPLICAS = "replicaobservations"
KINDS = (NODES, PODS, SLICES, CLAIMS, CLASSES, POOLS, REPLICAS)


@dataclass
class Touched:
    """The observations an event may have changed."""

    pools: set[str] = field(default_factory=set)
    replicas: set[ReplicaKey] = field(default_factory=set)

    def __ior__(self, other: Touched) -> Touched:
        self.pools |= other.pools
        self.replicas |= other.replicas
        return self

    def __bool__(self) -> bool:
        return bool(self.pools or self.replicas)


class ClusterState:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.devices = DeviceIndex()
        self.loads = NodeLoads()
        self.classes: dict[str, DeviceClass] = {}
        self.pools: dict[str, PoolSpec] = {}
        self.pool_status: dict[str, Mapping] = {}
        self.rules: dict[str, tuple[KindRule, ...] | Unobservable] = {}
        self.members: dict[str, set[str]] = {}
        self.node_pools: dict[str, set[str]] = {}
        self.vectors: dict[str, dict[str, Free]] = {}
        self.tallies: dict[str, Tally] = {}
        self.parts: dict[str, dict[str, Contribution]] = {}  # pool -> node -> contribution
        self.stale: dict[str, set[str]] = {}  # pool -> nodes whose contribution is unknown
        self.match_cache: dict[tuple[KindRule, DeviceView], bool] = {}
        self.replica_view = ReplicaView()
        self.uids: dict[tuple[str, str, str], str] = {}  # (kind, namespace, name) -> uid
        self._readers: dict[str, Callable[[Mapping, bool], Touched]] = {
            NODES: self._on_node,
            SLICES: self._on_slice,
            CLAIMS: self._on_claim,
            CLASSES: self._on_class,
            POOLS: self._on_pool,
            PODS: self._on_pod,
            REPLICAS: self._on_replica,
        }

    # What the shell reads: the ReplicaObservations' specs and last statuses seen.
    @property
    def replicas(self) -> dict[ReplicaKey, ReplicaSpec]:
        return self.replica_view.replicas

    @property
    def replica_status(self) -> dict[ReplicaKey, Mapping]:
        return self.replica_view.status

    # ------------------------------------------------------------------ events

    def apply(self, kind: str, event: str, obj: Mapping) -> Touched:
        """One watch event (ADDED, MODIFIED or DELETED) on one object of `kind`."""
        read = self._readers.get(kind)
        if read is None:
            raise ValueError(f"unknown kind {kind!r}")
        return read(obj, event == "DELETED")

    # Each reads one object at the edge (None when deleted) and hands it to its index.

    def _on_node(self, obj: Mapping, deleted: bool) -> Touched:
        return self._node(name_of(obj), None if deleted else node_from(obj))

    def _on_slice(self, obj: Mapping, deleted: bool) -> Touched:
        return self._slice(name_of(obj), None if deleted else slice_from(obj))

    def _on_claim(self, obj: Mapping, deleted: bool) -> Touched:
        key = f"{namespace_of(obj)}/{name_of(obj)}"
        if deleted:
            return self._claim(key, frozenset(), False)
        return self._claim(key, allocated_devices(obj), is_allocated(obj))

    def _on_class(self, obj: Mapping, deleted: bool) -> Touched:
        return self._class(name_of(obj), None if deleted else device_class_from(obj))

    def _on_pool(self, obj: Mapping, deleted: bool) -> Touched:
        return self._pool(name_of(obj), None if deleted else obj)

    def _on_pod(self, obj: Mapping, deleted: bool) -> Touched:
        return self._pod(namespace_of(obj), name_of(obj), None if deleted else pod_from(obj))

    def _on_replica(self, obj: Mapping, deleted: bool) -> Touched:
        return self._replica((namespace_of(obj), name_of(obj)), None if deleted else obj)

    def replace(self, kind: str, objs: Iterable[Mapping]) -> Touched:
        """A full list of `kind` (after a relist): upsert all, delete what is gone."""
        touched = Touched()
        seen: set[object] = set()
        for obj in objs:
            seen.add(self.key_of(kind, obj))
            touched |= self.apply(kind, "MODIFIED", obj)
        return touched.__ior__(self.delete_missing(kind, seen))

    def delete_missing(self, kind: str, seen: set[object]) -> Touched:
        """End of a list folded object by object: delete every `kind` it did not hold."""
        touched = Touched()
        for key in self._keys(kind) - seen:
            touched |= self.apply(kind, "DELETED", self._stub(kind, key))
        return touched

    @staticmethod
    def key_of(kind: str, obj: Mapping) -> object:
        if kind in (CLAIMS, PODS, REPLICAS):
            return (namespace_of(obj), name_of(obj))
        return name_of(obj)

    def _keys(self, kind: str) -> set[object]:
        if kind == NODES:
            return set(self.nodes)
        if kind == SLICES:
            return set(self.devices.slices)
        if kind == CLAIMS:
            keys = self.devices.claims.keys() | self.devices.allocated_claims
            return {tuple(k.split("/", 1)) for k in keys}
        if kind == CLASSES:
            return set(self.classes)
        if kind == POOLS:
            return set(self.pools)
        if kind == PODS:
            pods = self.replica_view.pods
            return {(ns, name) for ns, in_namespace in pods.items() for name in in_namespace}
        return set(self.replicas)

    @staticmethod
    def _stub(kind: str, key: object) -> Mapping:
        if isinstance(key, tuple):
            return {"metadata": {"namespace": key[0], "name": key[1]}}
        return {"metadata": {"name": key}}

    # ------------------------------------------------------------------ nodes and devices

    def _node(self, name: str, node: Node | None) -> Touched:
        old = self.nodes.get(name)
        if old == node:
            return Touched()
        before = self.node_pools.get(name, set())
        if node is None:
            self.nodes.pop(name, None)
            after: set[str] = set()
        else:
            self.nodes[name] = node
            after = {p for p, spec in self.pools.items() if self._selects(spec, node)}
        for pool in before - after:
            self.members[pool].discard(name)
            self._forget(pool, name)
        for pool in after - before:
            self.members.setdefault(pool, set()).add(name)
        for pool in after:
            self.stale.setdefault(pool, set()).add(name)
        if after:
            self.node_pools[name] = after
        else:
            self.node_pools.pop(name, None)
        return Touched(pools=before | after)

    def _forget(self, pool: str, node: str) -> None:
        """Take a node's contribution out of a pool's tally, and its cached vector.

        Invariant: only a member of a pool has a cached vector for it, so a change
        of the pool's rules (which drops its members' vectors) reaches every vector
        computed under the old rules, and a node rejoining is counted afresh.
        """
        self.vectors.get(node, {}).pop(pool, None)
        part = self.parts.get(pool, {}).pop(node, None)
        if part is not None:
            self.tallies[pool].add(part, -1)
        self.stale.get(pool, set()).discard(node)

    def _reset(self, pool: str) -> None:
        """Forget every contribution to a pool (its rules or members changed)."""
        self.tallies[pool] = Tally()
        self.parts[pool] = {}
        self.stale[pool] = set(self.members.get(pool, ()))

    @staticmethod
    def _selects(spec: PoolSpec, node: Node) -> bool:
        return not spec.problem and selects(spec.match_labels, node.labels)

    def _slice(self, name: str, new: Slice | None) -> Touched:
        return self._invalidate(self.devices.put_slice(name, new))

    def _claim(self, key: str, devices: frozenset[DeviceKey], allocated: bool) -> Touched:
        was = key in self.devices.allocated_claims
        touched = self._invalidate(self.devices.put_claim(key, devices, allocated))
        if was != allocated:
            touched.replicas |= self.replica_view.replicas_of_claim(key)
        return touched

    def _load_changed(self, old: Pod | None, new: Pod | None) -> Touched:
        """Fold a pod's requests into its node's load; touch the pools of a node where
        their smallest pod stopped or started fitting (only those: pods are many)."""
        nodes = self.loads.affected(old, new)
        before = {
            (pool, node): self._room(pool, node) is None
            for node in nodes
            for pool in self.node_pools.get(node, ())
        }
        self.loads.put(old, new)
        touched = Touched()
        for (pool, node), fitted in before.items():
            if (self._room(pool, node) is None) != fitted:
                self.stale.setdefault(pool, set()).add(node)
                touched.pools.add(pool)
        return touched

    def _room(self, pool: str, name: str) -> NoRoom | None:
        """Why the pool's smallest pod would not fit on node `name`, or None if it does."""
        node, spec = self.nodes.get(name), self.pools[pool]
        if node is None:
            return None
        what = lacking(spec.min_pod, node.allocatable, self.loads.of(name))
        return None if what is None else NoRoom(what, len(spec.kinds))

    def _invalidate(self, nodes: Iterable[str]) -> Touched:
        touched = Touched()
        for node in nodes:
            self.vectors.pop(node, None)
            for pool in self.node_pools.get(node, ()):
                self.stale.setdefault(pool, set()).add(node)
                touched.pools.add(pool)
        return touched

    def _class(self, name: str, new: DeviceClass | None) -> Touched:
        if self.classes.get(name) == new:
            return Touched()
        if new is None:
            self.classes.pop(name, None)
        else:
            self.classes[name] = new
        self.match_cache.clear()
        touched = Touched()
        for pool, spec in self.pools.items():
            if any(k.device_class == name for k in spec.kinds):
                self._resolve(pool)
                touched.pools.add(pool)
        return touched

    def _resolve(self, pool: str) -> None:
        self.rules[pool] = kind_rules(self.pools[pool], self.classes)
        for node in self.members.get(pool, ()):
            self.vectors.get(node, {}).pop(pool, None)
        self._reset(pool)

    # ------------------------------------------------------------------ observations

    def _pool(self, name: str, obj: Mapping | None) -> Touched:
        if obj is None:
            spec = self.pools.pop(name, None)
            self.pool_status.pop(name, None)
            self.uids.pop((POOLS, "", name), None)
            self.rules.pop(name, None)
            for table in (self.tallies, self.parts, self.stale):
                table.pop(name, None)
            for node in self.members.pop(name, set()):
                self.node_pools.get(node, set()).discard(name)
                self.vectors.get(node, {}).pop(name, None)
            return Touched() if spec is None else Touched(pools={name})
        self.pool_status[name] = status_of(obj)
        self.uids[(POOLS, "", name)] = uid_of(obj)
        spec = pool_spec_from(obj)
        if self.pools.get(name) == spec:
            return Touched()
        for node in self.members.pop(name, set()):
            self.node_pools.get(node, set()).discard(name)
            self.vectors.get(node, {}).pop(name, None)
        self.pools[name] = spec
        members = {n for n, node in self.nodes.items() if self._selects(spec, node)}
        self.members[name] = members
        for node in members:
            self.node_pools.setdefault(node, set()).add(name)
        self._resolve(name)
        return Touched(pools={name})

    def _pod(self, namespace: str, name: str, pod: Pod | None) -> Touched:
        old = self.replica_view.pod(namespace, name)
        if old == pod:
            return Touched()
        touched = self._load_changed(old, pod)
        touched.replicas |= self.replica_view.put_pod(namespace, name, pod)
        return touched

    def _replica(self, key: ReplicaKey, obj: Mapping | None) -> Touched:
        if obj is None:
            self.uids.pop((REPLICAS, *key), None)
        else:
            self.uids[(REPLICAS, *key)] = uid_of(obj)
        return Touched(replicas=self.replica_view.put_replica(key, obj))

    # ------------------------------------------------------------------ reports

    def pool_report(self, pool: str) -> PoolReport:
        """The pool's report, recomputing only the nodes whose contribution is stale.

        Equal to `observe_pool` over all members (agent/tests/test_state.py checks it).
        """
        rules = self.rules[pool]
        observed = len(self.members.get(pool, ()))
        if isinstance(rules, Unobservable):
            return unobservable_report(observed, rules)
        tolerations = self.pools[pool].tolerations
        tally, parts, stale = self.tallies[pool], self.parts[pool], self.stale[pool]
        try:
            while stale:
                name = next(iter(stale))
                part = contribution(
                    self.nodes[name],
                    tolerations,
                    lambda node: self._free(pool, node.name),
                    lambda node: self._room(pool, node.name),
                )
                old = parts.get(name)
                if old is not None:
                    tally.add(old, -1)
                parts[name] = part
                tally.add(part)
                stale.discard(name)
        except SelectorError as error:
            return selector_failed(observed, error)
        except CountersShared as error:
            return counters_shared(observed, error, self.pools[pool].kind_names)
        return report_from_tally(observed, tally)

    def invalidate_reports(self, matches: bool = False) -> None:
        """Forget every free vector and tally (and every CEL match, if asked).

        The next reports are computed from the indexed objects alone: what a
        full recompute costs. For benchmarks; events never need it.
        """
        self.vectors.clear()
        for pool in self.pools:
            self._reset(pool)
        if matches:
            self.match_cache.clear()

    def replica_report(self, key: ReplicaKey) -> ReplicaReport:
        return self.replica_view.report(key, self._claim_allocated)

    def _claim_allocated(self, namespace: str, name: str) -> bool:
        return f"{namespace}/{name}" in self.devices.allocated_claims

    def pools_of_replica(self, key: ReplicaKey) -> set[str]:
        """The pools of the nodes the replica's pods are bound to."""
        found: set[str] = set()
        for node in self.replica_view.bound_nodes(key):
            found |= self.node_pools.get(node, set())
        return found

    def _free(self, pool: str, node: str) -> Free:
        cached = self.vectors.setdefault(node, {})
        vector = cached.get(pool)
        if vector is not None:
            return vector
        rules = self.rules[pool]
        assert not isinstance(rules, Unobservable)
        offered = self.devices.node_devices(node)
        vector = compute_free_vector(
            offered.devices,
            lambda device: [i for i, rule in enumerate(rules) if self._matches(rule, device)],
            len(rules),
            self.devices.is_allocated,
            offered.counters,
            offered.elsewhere,
        )
        if offered.skipped:
            vector = Uncounted(vector, offered.skipped)
        cached[pool] = vector
        return vector

    def _matches(self, rule: KindRule, device: Device) -> bool:
        key = (rule, rule.view_of(device))
        cached = self.match_cache.get(key)
        if cached is None:
            cached = self.match_cache[key] = rule.matches(key[1])
        return cached
