"""Everything the agent has seen of its cluster, indexed so an event costs what it touches.

`ClusterState` is fed objects as the API server serves them (`apply` for a
watch event; `replace`, or `apply` then `delete_missing`, for a full list)
and answers, for each, which PoolObservations and ReplicaObservations the
change can affect. Reports are computed on demand from the indexes by the
pure rules of `pools`, `partitions` and `replicas`; nothing here does I/O or
reads a clock.

It holds the nodes and routes each event to the part it concerns; the
parts are split by concept, each with its invariants in its docstring:
    `devices.DeviceIndex`      slices and claims: each node's devices (complete,
                               valid resource pools of the newest generation),
                               device -> node, which devices and claims are
                               allocated
    `loads.NodeLoads`          node -> requests of the pods bound to it
    `pool_view.PoolView`       PoolObservations and DeviceClasses: each pool's
                               members, cached free vectors, tally, CEL matches
    `replica_view.ReplicaView` pods and ReplicaObservations: who selects whom,
                               which pods reference which claims
DeviceTaintRules go to the DeviceIndex too (`taint_rules`: which devices a
rule withholds).

An event on a node, a slice or a claim touches the pools of the nodes it
concerns, and one on a DeviceTaintRule the pools of the nodes whose devices
it selects (before or after the change); a DeviceClass touches the pools
that count it; a pod touches the replicas that select it (before or after
the change) and the pools of its node when it changes how many of their
smallest pods fit there, while that number is below the devices the node
publishes (`pools.capped`); a claim turning allocated or not touches the replicas
of the pods referencing it. A change that alters nothing the rules read (a
node's heartbeat, a pod's container status) touches nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from modelplane_agent.devices import DeviceIndex
from modelplane_agent.loads import NodeLoads
from modelplane_agent.pool_view import PoolView
from modelplane_agent.pools import PoolReport, Room
from modelplane_agent.replica_view import ReplicaKey, ReplicaView
from modelplane_agent.replicas import ReplicaReport
from modelplane_agent.snapshot import (
    DeviceKey,
    Node,
    Pod,
    PoolSpec,
    ReplicaObservationSpec,
    allocated_devices,
    device_class_from,
    is_allocated,
    name_of,
    namespace_of,
    node_from,
    pod_from,
    slice_from,
    uid_of,
)
from modelplane_agent.taint_rules import taint_rule_from

NODES = "nodes"
PODS = "pods"
SLICES = "resourceslices"
CLAIMS = "resourceclaims"
CLASSES = "deviceclasses"
POOLS = "poolobservations"
REPLICAS = "replicaobservations"
RULES = "devicetaintrules"
KINDS = (NODES, PODS, SLICES, CLAIMS, CLASSES, POOLS, REPLICAS, RULES)


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
        self.pool_view = PoolView(self.nodes, self.devices, self.loads)
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
            RULES: self._on_taint_rule,
        }

    # What the shell reads: the observations' specs and the last statuses seen.
    @property
    def pools(self) -> dict[str, PoolSpec]:
        return self.pool_view.pools

    @property
    def pool_status(self) -> dict[str, Mapping]:
        return self.pool_view.status

    @property
    def replicas(self) -> dict[ReplicaKey, ReplicaObservationSpec]:
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
            return set(self.pool_view.classes)
        if kind == POOLS:
            return set(self.pools)
        if kind == RULES:
            return set(self.devices.taint_rules.rules)
        if kind == PODS:
            pods = self.replica_view.pods
            return {(ns, name) for ns, in_namespace in pods.items() for name in in_namespace}
        return set(self.replicas)

    @staticmethod
    def _stub(kind: str, key: object) -> Mapping:
        if isinstance(key, tuple):
            return {"metadata": {"namespace": key[0], "name": key[1]}}
        return {"metadata": {"name": key}}

    # Each reads one object at the edge (None when deleted) and hands it to its part.

    def _on_node(self, obj: Mapping, deleted: bool) -> Touched:
        name, node = name_of(obj), None if deleted else node_from(obj)
        if self.nodes.get(name) == node:
            return Touched()
        if node is None:
            self.nodes.pop(name, None)
        else:
            self.nodes[name] = node
        touched = Touched(pools=self.pool_view.put_node(name, node))
        if self.devices.network:  # its labels may change which network devices serve it
            touched.pools |= self.pool_view.invalidate({name})
        return touched

    def _on_slice(self, obj: Mapping, deleted: bool) -> Touched:
        nodes = self.devices.put_slice(name_of(obj), None if deleted else slice_from(obj))
        return Touched(pools=self.pool_view.invalidate(nodes))

    def _on_taint_rule(self, obj: Mapping, deleted: bool) -> Touched:
        rule = None if deleted else taint_rule_from(obj)
        nodes = self.devices.put_taint_rule(name_of(obj), rule)
        return Touched(pools=self.pool_view.invalidate(nodes))

    def _on_claim(self, obj: Mapping, deleted: bool) -> Touched:
        key = f"{namespace_of(obj)}/{name_of(obj)}"
        devices = frozenset() if deleted else allocated_devices(obj)
        return self._claim(key, devices, not deleted and is_allocated(obj))

    def _claim(self, key: str, devices: frozenset[DeviceKey], allocated: bool) -> Touched:
        was = key in self.devices.allocated_claims
        touched = Touched(
            pools=self.pool_view.invalidate(self.devices.put_claim(key, devices, allocated))
        )
        if was != allocated:
            touched.replicas |= self.replica_view.replicas_of_claim(key)
        return touched

    def _on_class(self, obj: Mapping, deleted: bool) -> Touched:
        new = None if deleted else device_class_from(obj)
        return Touched(pools=self.pool_view.put_class(name_of(obj), new))

    def _on_pool(self, obj: Mapping, deleted: bool) -> Touched:
        name = name_of(obj)
        if deleted:
            self.uids.pop((POOLS, "", name), None)
        else:
            self.uids[(POOLS, "", name)] = uid_of(obj)
        return Touched(pools=self.pool_view.put_pool(name, None if deleted else obj))

    def _on_pod(self, obj: Mapping, deleted: bool) -> Touched:
        namespace, name = namespace_of(obj), name_of(obj)
        pod = None if deleted else pod_from(obj)
        old = self.replica_view.pod(namespace, name)
        if old == pod:
            return Touched()
        touched = self._load_changed(old, pod)
        touched.replicas |= self.replica_view.put_pod(namespace, name, pod)
        return touched

    def _load_changed(self, old: Pod | None, new: Pod | None) -> Touched:
        """Fold a pod's requests into its node's load; touch the pools of a node where
        what their smallest pods' room can change of its vector changed (only those:
        pods are many)."""
        view = self.pool_view
        nodes = self.loads.affected(old, new)
        before = {
            (pool, node): self._room_effect(pool, node)
            for node in nodes
            for pool in view.node_pools.get(node, ())
        }
        self.loads.put(old, new)
        touched = Touched()
        for (pool, node), effect in before.items():
            if self._room_effect(pool, node) != effect:
                view.restale(pool, node)
                touched.pools.add(pool)
        return touched

    def _room_effect(self, pool: str, node: str) -> object:
        """What the room for the pool's smallest pods does to the node's vector: none
        (NoRoom), a cap on each kind's count, or nothing. A cap at or above the number
        of devices the node publishes cuts nothing, so it reads as that number."""
        limit = self.pool_view.room(pool, node)
        if isinstance(limit, Room):
            return min(limit.pods, self._published_on(node))
        return limit

    def _published_on(self, node: str) -> int:
        """How many devices the node's slices publish: at least any count it can have free."""
        slices = self.devices.slices
        own = sum(len(slices[name].devices) for name in self.devices.by_node.get(node, ()))
        return own + sum(len(devices) for _, devices in self.devices.pinned(node))

    def _on_replica(self, obj: Mapping, deleted: bool) -> Touched:
        key = (namespace_of(obj), name_of(obj))
        if deleted:
            self.uids.pop((REPLICAS, *key), None)
        else:
            self.uids[(REPLICAS, *key)] = uid_of(obj)
        return Touched(replicas=self.replica_view.put_replica(key, None if deleted else obj))

    # ------------------------------------------------------------------ reports

    def pool_report(self, pool: str) -> PoolReport:
        """The pool's report, recomputing only the nodes whose contribution is stale."""
        return self.pool_view.report(pool)

    def invalidate_reports(self, matches: bool = False) -> None:
        """Forget every free vector and tally (and every CEL match, if asked).

        The next reports are computed from the indexed objects alone: what a
        full recompute costs. For benchmarks; events never need it.
        """
        self.pool_view.invalidate_reports(matches)

    def replica_report(self, key: ReplicaKey) -> ReplicaReport:
        return self.replica_view.report(key, self._claim_allocated)

    def _claim_allocated(self, namespace: str, name: str) -> bool:
        return f"{namespace}/{name}" in self.devices.allocated_claims

    def pools_of_replica(self, key: ReplicaKey) -> set[str]:
        """The pools of the nodes the replica's pods are bound to."""
        found: set[str] = set()
        for node in self.replica_view.bound_nodes(key):
            found |= self.pool_view.node_pools.get(node, set())
        return found
