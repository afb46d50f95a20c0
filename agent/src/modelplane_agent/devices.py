"""The DRA half of the agent's state: which devices each node has, and which are taken.

`DeviceIndex` is fed ResourceSlices, ResourceClaims and DeviceTaintRules and
answers, for a node, the devices kube-scheduler's allocator would consider
there (their slices' devices with the rules' taints applied) and what the
claims already hold. Each update returns the nodes whose answer may have
changed; nothing here knows about pools or observations.

Invariants
    - `device_node[d]` is the node of the newest-generation slice that
      publishes `d` (`EVERY_NODE` for a network-attached slice's: `network`),
      and exists exactly while some slice publishes `d`. It is
      a function of the slices of `d`'s resource pool (a device is named by
      driver, pool and name, so only they can publish it) and is rebuilt
      from them whenever one of them changes: a device republished under a
      new slice name before the old one is deleted, or moved between two
      slices, keeps its node whatever order the events come in.
    - a resource pool counts only at its newest generation, and only while
      that generation is complete (as many slices seen as each says the pool
      has: `resourceSliceCount`) and valid (`pool_problem`); otherwise its
      devices are on no node's list, as kube-scheduler v1.35's allocator
      skips incomplete and invalid pools. `unusable` holds why, per pool.
    - `counters[p]` holds the shared counters of every slice of pool `p`'s
      newest generation, node-local or not (v1.35 publishes counter sets in
      slices of their own); `counter_drivers[name]` the drivers of the pools
      named `name` that have some. Two drivers there and kube-scheduler
      (v1.35, v1.36) mixes their counters up (it keys them by pool name alone,
      kubernetes/kubernetes#140434): neither pool is offered
      (`SHARED_POOL_NAME`).
    - `network` names the slices that publish devices for no single node; an update
      touching one (or a claim of one of their devices, or a rule selecting one)
      returns `EVERY_NODE` among its nodes.
    - `allocated_claims` holds the key (namespace/name) of every claim with an
      allocation, whether or not it takes a device (adminAccess results take
      none); `claims` only those that take some.
    - `allocated[d]` counts the claims whose allocation holds `d` (never 0:
      a device no claim holds is absent). Claims are indexed whether or not
      their devices' slices have been seen.
    - `node_devices` marks `tainted` every device a NoSchedule or NoExecute
      DeviceTaintRule selects (`taint_rules`), as the allocator appends the
      rules' taints to the slices it reads; rules are indexed whether or not
      the devices they select have been seen. A free device (or one allowing
      multiple allocations, held or not) that only rules without
      `deviceSelector` withhold adds their cause to the node's `skipped`
      (`taint_rules`, Versions).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from fractions import Fraction

from modelplane_agent.network import serves
from modelplane_agent.snapshot import CounterKey, Device, DeviceKey, Node, Slice
from modelplane_agent.taint_rules import UNSELECTIVE_RULE, TaintRule, TaintRules

ResourcePoolKey = tuple[str, str]  # driver, pool name

# Why a node's devices of a partitionable resource pool whose name another driver's
# partitionable pool also has are not offered.
SHARED_POOL_NAME = "shared pool name"
# Why a node may be offered more than its vector counts: free network-attached devices
# of a pool's kind serve it (`network`).
NETWORK_ATTACHED = "network-attached devices"
# The node of a network-attached device (`device_node`), and what an update returns when
# one changed: every node may see it (no node is named "*").
EVERY_NODE = "*"


class DeviceIndex:
    def __init__(self) -> None:
        self.slices: dict[str, Slice] = {}
        self.network: set[str] = set()  # the names of network-attached slices
        self.by_node: dict[str, set[str]] = {}
        self.by_pool: dict[ResourcePoolKey, set[str]] = {}
        self.newest: dict[ResourcePoolKey, int] = {}
        self.unusable: dict[ResourcePoolKey, str] = {}
        self.counters: dict[ResourcePoolKey, dict[CounterKey, Fraction | None]] = {}
        self.counter_drivers: dict[str, set[str]] = {}
        self.device_node: dict[DeviceKey, str] = {}
        self.claims: dict[str, frozenset[DeviceKey]] = {}
        self.allocated_claims: set[str] = set()
        self.allocated: Counter[DeviceKey] = Counter()
        self.taint_rules = TaintRules()

    # ------------------------------------------------------------------ updates

    def put_slice(self, name: str, new: Slice | None) -> set[str]:
        """Store (or, with None, delete) one slice; return the nodes it may change."""
        old = self.slices.get(name)
        if old == new:
            return set()
        pools = {(s.driver, s.pool) for s in (old, new) if s is not None}
        nodes = set().union(*(self._pool_nodes(p) for p in pools))
        names = {pool[1] for pool in pools}
        sharing = self._sharing(names)
        if old is not None:
            del self.slices[name]
            self.network.discard(name)
            _discard(self.by_node, old.node, name)
            self.by_pool.get((old.driver, old.pool), set()).discard(name)
        if new is not None:
            self.slices[name] = new
            if new.network:
                self.network.add(name)
            self.by_node.setdefault(new.node, set()).add(name)
            self.by_pool.setdefault((new.driver, new.pool), set()).add(name)
        for pool in pools:
            self._reindex(pool, old)
            nodes |= self._pool_nodes(pool)
        for pool in sharing ^ self._sharing(names):  # another driver's pool of that name
            nodes |= self._pool_nodes(pool)
        if any(s is not None and s.network for s in (old, new)):
            nodes.add(EVERY_NODE)
        return nodes

    def _sharing(self, names: set[str]) -> set[ResourcePoolKey]:
        """The pools with counters, among those of `names`, whose name another driver's
        pool with counters has too."""
        drivers = {name: self.counter_drivers.get(name, set()) for name in names}
        return {(d, name) for name, of in drivers.items() if len(of) > 1 for d in of}

    def _reindex(self, pool: ResourcePoolKey, old: Slice | None) -> None:
        """Rebuild the pool's newest generation and its devices' nodes from its slices."""
        held = sorted(
            (self.slices[s] for s in self.by_pool.get(pool, ())), key=lambda s: s.generation
        )
        if old is not None:
            for device in old.devices:
                self.device_node.pop(device.key, None)
        for each in held:  # oldest first: the newest generation's node wins
            for device in each.devices:
                self.device_node[device.key] = each.node or EVERY_NODE
        self.unusable.pop(pool, None)
        self.counters.pop(pool, None)
        _discard(self.counter_drivers, pool[1], pool[0])
        if not held:
            self.newest.pop(pool, None)
            self.by_pool.pop(pool, None)
            return
        self.newest[pool] = held[-1].generation
        current = [s for s in held if s.generation == held[-1].generation]
        problem = pool_problem(current)
        if problem:
            self.unusable[pool] = problem
        counters = {key: value for s in current for key, value in s.counters}
        if counters:
            self.counters[pool] = counters
            self.counter_drivers.setdefault(pool[1], set()).add(pool[0])

    def _pool_nodes(self, pool: ResourcePoolKey) -> set[str]:
        return {self.slices[s].node for s in self.by_pool.get(pool, ())}

    def put_claim(self, key: str, devices: frozenset[DeviceKey], allocated: bool) -> set[str]:
        """Store whether a claim is allocated and the devices it takes (none: deallocated
        or deleted); return the nodes of the devices that changed hands."""
        if allocated:
            self.allocated_claims.add(key)
        else:
            self.allocated_claims.discard(key)
        old = self.claims.get(key, frozenset())
        if old == devices:
            return set()
        if devices:
            self.claims[key] = devices
        else:
            self.claims.pop(key, None)
        for device in old - devices:
            self.allocated[device] -= 1
            if self.allocated[device] <= 0:
                del self.allocated[device]
        for device in devices - old:
            self.allocated[device] += 1
        nodes = {self.device_node[d] for d in old ^ devices if d in self.device_node}
        for pool in {d[:2] for d in old ^ devices} & self.counters.keys():
            # What it consumes of its pool's counters is gone for the pool's other nodes too.
            nodes |= self._pool_nodes(pool)
        return nodes

    def put_taint_rule(self, name: str, new: TaintRule | None) -> set[str]:
        """Store (or, with None, delete) one DeviceTaintRule; return the nodes of the
        slices publishing a device it withholds or withheld.

        Costs the slices of the resource pools it names (a rule naming a driver and a
        pool: that pool's), else a scan of the pools' names too: rules change rarely."""
        old = self.taint_rules.put(name, new)
        if old == new:
            return set()
        changed = [rule for rule in (old, new) if rule is not None and rule.withholds]
        nodes: set[str] = set()
        for pool in self._pools_named(changed):
            for slice_name in self.by_pool[pool]:
                current = self.slices[slice_name]
                if any(rule.selects(d.key) for d in current.devices for rule in changed):
                    nodes.add(current.node or EVERY_NODE)
        return nodes

    def _pools_named(self, rules: list[TaintRule]) -> set[ResourcePoolKey]:
        """The resource pools holding slices whose devices `rules` may select."""
        if all(rule.driver is not None and rule.pool is not None for rule in rules):
            named = {(rule.driver, rule.pool) for rule in rules}
            return {pool for pool in named if pool in self.by_pool}
        return {
            pool
            for pool in self.by_pool
            if any(
                rule.driver in (None, pool[0]) and rule.pool in (None, pool[1]) for rule in rules
            )
        }

    # ------------------------------------------------------------------ queries

    def is_allocated(self, device: DeviceKey) -> bool:
        return device in self.allocated

    def node_devices(self, node: str) -> NodeDevices:
        """A node's devices the allocator would consider, and their pools' shared counters:
        its slices of the newest generation of each complete, valid resource pool, and
        the devices pinned to it in slices with `perDeviceNodeSelection` (`pinned`)."""
        devices: list[Device] = []
        slice_of: list[int] = []
        pools: set[ResourcePoolKey] = set()
        skipped: set[str] = set()
        own = [self.slices[name] for name in sorted(self.by_node.get(node, ()))]
        sources = [(s, s.devices) for s in own if s.node] + self.pinned(node)
        for position, (current, published) in enumerate(sources):
            pool = (current.driver, current.pool)
            if current.generation < self.newest.get(pool, 0):
                continue
            if pool in self.unusable:
                skipped.add(f"{self.unusable[pool].split(':', 1)[0]} resource pool")
                continue
            if pool in self._sharing({current.pool}):
                skipped.add(SHARED_POOL_NAME)
                continue
            seen, disputed = self._as_allocator_sees(published)
            devices.extend(seen)
            skipped |= disputed
            slice_of.extend([position] * len(published))
            pools.add(pool)
        counters: dict[CounterKey, Fraction | None] = {}
        elsewhere: list[Device] = []
        for pool in pools & self.counters.keys():
            counters.update(self.counters[pool])
            elsewhere.extend(self._consumers_elsewhere(pool, node))
        return NodeDevices(devices, slice_of, counters, elsewhere, tuple(sorted(skipped)))

    def pinned(self, node: str) -> list[tuple[Slice, tuple[Device, ...]]]:
        """Per slice with `perDeviceNodeSelection`, its devices whose own `nodeName` is
        `node` and that consume no counter: they serve that node alone, so they count
        there like its own (`network`). A pinned device drawing on counters shares them
        with the pool's other devices, wherever those serve: it stays network-attached."""
        pinned = []
        for name in sorted(self.network):
            current = self.slices[name]
            devices = tuple(d for d in current.devices if _pinned_to(d, node))
            if devices:
                pinned.append((current, devices))
        return pinned

    def network_offered(self, node: Node) -> list[Device]:
        """The network-attached devices kube-scheduler may give a claim on `node` now
        (`network`): of those serving the node (`network_serving`), no claim holding
        them and no taint or binding condition withholding them (a DeviceTaintRule
        without `deviceSelector` withholds them on some versions only: they are offered)."""
        return [
            seen for published, seen in self.network_serving(node) if self._free(published, seen)
        ]

    def network_tried(self, node: Node) -> list[Device]:
        """The network-attached devices serving `node` (`network_serving`) on which
        kube-scheduler's allocator runs a claim's class and selectors there, as on the
        node's own (`pools.class_failures`): those no claim holds, tainted or not, and
        those allowing multiple allocations that consume no counter, held or not."""
        return [
            seen
            for _, seen in self.network_serving(node)
            if not self.is_allocated(seen.key) or (seen.shared and not seen.consumes)
        ]

    def network_serving(self, node: Node) -> list[tuple[Device, Device]]:
        """The network-attached devices serving `node` (`network`), each as its slice
        publishes it and with the rules' taints: published by a slice without `nodeName`
        of its resource pool's newest generation, the pool complete and valid, serving
        the node (the slice's reach, or the device's with `perDeviceNodeSelection`),
        not pinned to it (counted as its own: `pinned`)."""
        serving = []
        for name in sorted(self.network):
            current = self.slices[name]
            pool = (current.driver, current.pool)
            if current.generation < self.newest.get(pool, 0) or pool in self.unusable:
                continue
            seen, _ = self._as_allocator_sees(current.devices)
            for published, device in zip(current.devices, seen, strict=True):
                reach = device.reach if device.reach is not None else current.reach
                if _pinned_to(device, node.name):
                    continue  # counted as the node's own (`pinned`)
                if reach is not None and serves(reach, node):
                    serving.append((published, device))
        return serving

    def _free(self, published: Device, seen: Device) -> bool:
        """Whether a device (as its slice publishes it, and with the rules' taints) may be
        free on some kube-scheduler version: no claim holds it, no taint in its slice
        and no rule with a `deviceSelector` withholds it, no binding conditions."""
        by_rule = seen.tainted and not published.tainted
        disputed = by_rule and self.taint_rules.disputed(seen.key) is not None
        unheld = not self.is_allocated(seen.key)
        return published.allocatable and (not by_rule or disputed) and unheld

    def _as_allocator_sees(
        self, devices: tuple[Device, ...]
    ) -> tuple[tuple[Device, ...], set[str]]:
        """The slice's devices, those a DeviceTaintRule withholds marked tainted; and
        why free ones only rules without `deviceSelector` withhold are not counted
        (`taint_rules.UNSELECTIVE_RULE`: kube-scheduler versions differ on them)."""
        rules = self.taint_rules
        if not rules.active:
            return devices, set()
        seen = tuple(
            replace(d, tainted=True) if not d.tainted and rules.withholds(d.key) else d
            for d in devices
        )
        # A held device allowing multiple allocations may still take shares where the
        # rule applies to nothing (v1.37): disputed like a free one.
        disputed = {
            f"{UNSELECTIVE_RULE} ({name})"
            for before, after in zip(devices, seen, strict=True)
            if after.tainted and not before.tainted
            if before.shared or not self.is_allocated(before.key)
            if (name := rules.disputed(before.key)) is not None
        }
        return seen, disputed

    def _consumers_elsewhere(self, pool: ResourcePoolKey, node: str) -> list[Device]:
        """Devices of the pool's newest generation published for other nodes that consume
        its counters: allocated, they use them up for this node's devices too."""
        return [
            device
            for name in self.by_pool.get(pool, ())
            if (current := self.slices[name]).node != node
            and current.generation == self.newest[pool]
            for device in current.devices
            if device.consumes
        ]


def _pinned_to(device: Device, node: str) -> bool:
    """Whether `device` (of a slice with `perDeviceNodeSelection`) serves `node` alone
    and consumes no counter (`DeviceIndex.pinned`)."""
    return device.reach is not None and device.reach.node == node and not device.consumes


def _discard(index: dict[str, set[str]], key: str, name: str) -> None:
    """Take `name` out of `index[key]`, and the key out once its set is empty."""
    names = index.get(key)
    if names is not None:
        names.discard(name)
        if not names:
            del index[key]


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """What `free_vector` needs of a node: its devices, each slice's in its published
    order, its pools' counters, and the counter-consuming devices of those pools on
    other nodes; why devices of its other pools are not offered (`skipped`); and which
    slice publishes each device (`slice_of`, parallel to `devices`: the allocator's
    order of one pool's slices is not fixed, `partitions`)."""

    devices: list[Device]
    slice_of: list[int]  # as many as `devices`
    counters: dict[CounterKey, Fraction | None]
    elsewhere: list[Device]
    # "incomplete resource pool", "invalid resource pool", SHARED_POOL_NAME, and
    # "<taint_rules.UNSELECTIVE_RULE> (<rule>)" for devices only such a rule withholds
    skipped: tuple[str, ...] = ()


def pool_problem(current: list[Slice]) -> str:
    """Why the allocator would skip a resource pool, given its newest generation's slices
    ("" when it would not): incomplete, or invalid (a device name or counter set name
    twice, a device consuming a counter no counter set of the pool declares)."""
    if any(s.slice_count != len(current) for s in current):
        stated = sorted({s.slice_count for s in current})
        return f"incomplete: {len(current)} of {stated[-1]} slices seen"
    names: set[str] = set()
    sets: set[str] = set()
    declared = {key for s in current for key, _ in s.counters}
    for s in current:
        for counter_set in s.counter_sets:
            if counter_set in sets:
                return f"invalid: counter set {counter_set} declared twice"
            sets.add(counter_set)
        for device in s.devices:
            name = device.key[2]
            if name in names:
                return f"invalid: device {name} published twice"
            names.add(name)
            missing = next((key for key, _ in device.consumes if key not in declared), None)
            if missing is not None:
                return f"invalid: device {name} consumes {missing[2]}/{missing[3]}, not declared"
    return ""
