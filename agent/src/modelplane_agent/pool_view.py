"""The pool half of the agent's state: PoolObservations, their members, their tallies.

`PoolView` holds the PoolObservations and DeviceClasses, which nodes each
pool selects, and each pool's tally of its members' contributions, so that
an event recomputes only the nodes it made stale. It reads the nodes, the
devices (`devices.DeviceIndex`) and the loads (`loads.NodeLoads`) it is
given, never writes them; each update returns the pools it touched.

Invariants
    - `members[p]` is exactly the set of nodes whose labels `p`'s selector
      matches (none while `p`'s spec has a problem); `node_pools` is its
      inverse;
    - `vectors[n][p]` exists only while `n` is a member of `p`, and is what
      `n` has free under `p`'s current rules and `n`'s current devices: a
      change of either drops it (`invalidate`, `_resolve`), and so does
      leaving the pool, so a node rejoining is counted afresh;
    - `tallies[p]` is the sum of `parts[p]`, the members' contributions as
      last computed; `stale[p]` holds the members whose part may be out of
      date, recomputed at the next report, the rest kept;
    - `match_cache` holds CEL matches keyed by (kind rule, projected
      device), dropped whole when a DeviceClass changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from modelplane_common.cel.devices import DeviceView
from modelplane_common.cel.errors import SelectorError
from modelplane_common.selectors import selects

from modelplane_agent.devices import EVERY_NODE, NETWORK_ATTACHED, DeviceIndex
from modelplane_agent.loads import NodeLoads
from modelplane_agent.pools import (
    Contribution,
    CountersShared,
    Free,
    Judgement,
    KindRule,
    Limit,
    NoRoom,
    PoolReport,
    Tally,
    Unobservable,
    class_failures,
    contribution,
    counters_shared,
    free_vector,
    kind_rules,
    report_from_tally,
    room_for,
    selector_failed,
    unobservable_report,
    withheld,
)
from modelplane_agent.snapshot import (
    Device,
    DeviceClass,
    Node,
    PoolSpec,
    pool_spec_from,
    status_of,
)


class PoolView:
    def __init__(self, nodes: Mapping[str, Node], devices: DeviceIndex, loads: NodeLoads) -> None:
        self.nodes, self.devices, self.loads = nodes, devices, loads
        self.classes: dict[str, DeviceClass] = {}
        self.pools: dict[str, PoolSpec] = {}
        self.status: dict[str, Mapping] = {}
        self.rules: dict[str, tuple[KindRule, ...] | Unobservable] = {}
        self.members: dict[str, set[str]] = {}
        self.node_pools: dict[str, set[str]] = {}
        self.vectors: dict[str, dict[str, Free]] = {}
        self.tallies: dict[str, Tally] = {}
        self.parts: dict[str, dict[str, Contribution]] = {}
        self.stale: dict[str, set[str]] = {}
        self.match_cache: dict[tuple[KindRule, DeviceView], Judgement] = {}

    # ------------------------------------------------------------------ updates

    def put_node(self, name: str, node: Node | None) -> set[str]:
        """A node changed (None: gone; `nodes` already says so): its pools before and after."""
        before = self.node_pools.get(name, set())
        after = set() if node is None else {p for p, s in self.pools.items() if _selects(s, node)}
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
        return before | after

    def invalidate(self, nodes: Iterable[str]) -> set[str]:
        """The nodes' devices changed (`EVERY_NODE` among them: a network-attached device,
        which any node may see): drop their vectors; return their pools."""
        nodes = set(nodes)
        if EVERY_NODE in nodes:
            nodes = set(self.node_pools)
        touched: set[str] = set()
        for node in nodes:
            self.vectors.pop(node, None)
            for pool in self.node_pools.get(node, ()):
                self.stale.setdefault(pool, set()).add(node)
                touched.add(pool)
        return touched

    def restale(self, pool: str, node: str) -> None:
        """The node's part of the pool changed without its devices (its load did)."""
        self.stale.setdefault(pool, set()).add(node)

    def put_class(self, name: str, new: DeviceClass | None) -> set[str]:
        if self.classes.get(name) == new:
            return set()
        if new is None:
            self.classes.pop(name, None)
        else:
            self.classes[name] = new
        self.match_cache.clear()
        touched = {p for p, s in self.pools.items() if any(k.device_class == name for k in s.kinds)}
        for pool in touched:
            self._resolve(pool)
        return touched

    def put_pool(self, name: str, obj: Mapping | None) -> set[str]:
        """Store (None: delete) one PoolObservation; return {name} if its spec changed."""
        if obj is None:
            return self._drop(name)
        self.status[name] = status_of(obj)
        spec = pool_spec_from(obj)
        if self.pools.get(name) == spec:
            return set()
        self._unlink(name)
        self.pools[name] = spec
        self.members[name] = {n for n, node in self.nodes.items() if _selects(spec, node)}
        for node in self.members[name]:
            self.node_pools.setdefault(node, set()).add(name)
        self._resolve(name)
        return {name}

    def _drop(self, name: str) -> set[str]:
        spec = self.pools.pop(name, None)
        self.status.pop(name, None)
        self.rules.pop(name, None)
        for table in (self.tallies, self.parts, self.stale):
            table.pop(name, None)
        self._unlink(name)
        return set() if spec is None else {name}

    def _unlink(self, name: str) -> None:
        for node in self.members.pop(name, set()):
            self.node_pools.get(node, set()).discard(name)
            self.vectors.get(node, {}).pop(name, None)

    def _forget(self, pool: str, node: str) -> None:
        """Take a node's contribution out of a pool's tally, and its cached vector."""
        self.vectors.get(node, {}).pop(pool, None)
        part = self.parts.get(pool, {}).pop(node, None)
        if part is not None:
            self.tallies[pool].add(part, -1)
        self.stale.get(pool, set()).discard(node)

    def _resolve(self, pool: str) -> None:
        """The pool's rules changed: resolve them, forget every contribution."""
        self.rules[pool] = kind_rules(self.pools[pool], self.classes)
        for node in self.members.get(pool, ()):
            self.vectors.get(node, {}).pop(pool, None)
        self._reset(pool)

    def _reset(self, pool: str) -> None:
        self.tallies[pool] = Tally()
        self.parts[pool] = {}
        self.stale[pool] = set(self.members.get(pool, ()))

    # ------------------------------------------------------------------ reports

    def report(self, pool: str) -> PoolReport:
        """The pool's report, recomputing only the nodes whose contribution is stale.

        Equal to `pools.observe_pool` over all members (agent/tests/test_state.py).
        """
        rules = self.rules[pool]
        observed = len(self.members.get(pool, ()))
        if isinstance(rules, Unobservable):
            return unobservable_report(observed, rules)
        tally, parts, stale = self.tallies[pool], self.parts[pool], self.stale[pool]
        try:
            while stale:
                name = next(iter(stale))
                part = self._contribution(pool, self.nodes[name])
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

    def _contribution(self, pool: str, node: Node) -> Contribution:
        return contribution(
            node,
            self.pools[pool].tolerations,
            lambda n: self.free(pool, n.name),
            lambda n: self.room(pool, n.name),
        )

    def invalidate_reports(self, matches: bool = False) -> None:
        """Forget every free vector and tally (and every CEL match, if asked)."""
        self.vectors.clear()
        for pool in self.pools:
            self._reset(pool)
        if matches:
            self.match_cache.clear()

    def room(self, pool: str, name: str) -> Limit:
        """How many of the pool's smallest pods fit on node `name` (NoRoom: none)."""
        node, spec = self.nodes.get(name), self.pools[pool]
        if node is None:
            return None
        fits = room_for(spec.min_pod, node.allocatable, self.loads.of(name))
        return fits if fits.pods else NoRoom(fits.resource, len(spec.kinds))

    def free(self, pool: str, node: str) -> Free:
        """What the node has free for the pool's kinds (cached while it is a member)."""
        cached = self.vectors.setdefault(node, {})
        vector = cached.get(pool)
        if vector is not None:
            return vector
        rules = self.rules[pool]
        assert not isinstance(rules, Unobservable)
        offered = self.devices.node_devices(node)
        allocated = self.devices.is_allocated
        # Judged once per device: every device the allocator may try (no claim holds
        # it, or it allows multiple allocations), and those consuming counters whoever
        # holds them (`free_vector`).
        judged = [
            tuple([self._judge(rule, d) for rule in rules])
            if d.consumes or d.shared or not allocated(d.key)
            else ()
            for d in offered.devices
        ]
        # kube-scheduler runs the class and a claim's selectors on the network-attached
        # devices serving the node too: one failing, or lacking a declared entry, fails
        # the node's Filter as the node's own does.
        network = self.devices.network_tried(self.nodes[node])
        failures = class_failures(
            (*offered.devices, *network),
            [*judged, *(tuple(self._judge(rule, d) for rule in rules) for d in network)],
            allocated,
        )
        counted, differing = free_vector(offered, judged, len(rules), allocated)
        skipped = offered.skipped
        if self._network_serves(rules, node):
            skipped = (*skipped, NETWORK_ATTACHED)
        vector = withheld(counted, failures, differing, skipped)
        cached[pool] = vector
        return vector

    def _network_serves(self, rules: tuple[KindRule, ...], node: str) -> bool:
        """Whether a free network-attached device that some kind's class may give a claim
        (of the kind, maybe not as declared, or failing on it) serves `node`: never
        counted, so the node may get more than its vector says (`network`)."""
        return any(
            self._judge(rule, device) is not False
            for device in self.devices.network_offered(self.nodes[node])
            for rule in rules
        )

    def _judge(self, rule: KindRule, device: Device) -> Judgement:
        key = (rule, rule.view_of(device))
        cached = self.match_cache.get(key)
        if cached is None:
            cached = self.match_cache[key] = rule.judge(key[1])
        return cached


def _selects(spec: PoolSpec, node: Node) -> bool:
    return not spec.problem and selects(spec.match_labels, node.labels)
