"""A pool's observation: which nodes count, what is free on each, the histogram.

Model (design/observation.md, "What the agent counts")
    A PoolObservation names a node selector and the DRA device kinds to count,
    each kind a (driver, DeviceClass) pair. For every node the selector
    matches:

    - it is OBSERVED (counted in `observedNodes`), ready or not;
    - it is SCHEDULABLE unless cordoned, not Ready, or carrying a NoSchedule
      or NoExecute taint none of the pool's tolerations tolerates;
    - a device of the node (published by a ResourceSlice with this node's
      `nodeName`, or pinned to it by its own `nodeName` with
      `perDeviceNodeSelection`, `devices.DeviceIndex.pinned`) is of a kind
      when its driver is the kind's driver and every CEL selector of the
      kind's DeviceClass is true for it (evaluated by the shared
      `modelplane_common.cel` matcher); it COUNTS only as declared:
      holding every attribute and capacity of the kind's declaration, which
      the fleet judges request selectors on (`differs`);
    - a kind whose DeviceClass fails on some device of the node no claim
      holds, any driver's ("no such key": no driver guard), counts nothing
      there, as kube-scheduler fails the node (`class_failures`); so does a
      kind one of whose devices no claim holds lacks a declared entry, which
      a claim's selector true on the declaration may read (`lacks`);
    - a device is FREE unless some ResourceClaim's `status.allocation` holds it
      (whoever owns the claim; `adminAccess` results hold nothing), it carries
      a NoSchedule/NoExecute device taint or binding conditions
      (`Device.allocatable`), or its resource pool is incomplete or invalid
      (`devices.DeviceIndex` never lists such a pool's devices);
    - two rules count less than kube-scheduler may allocate, on every version,
      and say so in the node's uncounted causes (`declared_cause`): a device
      that allows multiple allocations counts once, and only while no claim
      holds a share of it (`SHARED_DEVICES`); a free device with binding
      conditions, which kube-scheduler gives a pod once its driver reports
      them, counts none (`BINDING_CONDITIONS`);
    - partitionable devices (shared counters) of a kind count as many as
      kube-scheduler's first fit gives to one-device claims placed one after
      another, in the slices' order (the fewest over the orders of a GPU's
      slices), beside what allocated devices left of the counters
      (`partitions`), none of a GPU where a free one differs from the
      declaration; two kinds drawing on one counter make the pool
      unobservable (`KindsShareCounters`), never a double count.

    A node's FREE VECTOR counts its free devices per kind, in declared order;
    a device matching two kinds counts in both. Schedulable nodes are grouped
    by free vector into the canonical `Histogram` of `modelplane_common`.

Invariants
    - the histogram's nodes never exceed `observedNodes`;
    - at most `MAX_BUCKETS` buckets: beyond, the rarest vectors are rounded
      DOWN onto a bucket they dominate (`coarsen`), which only under-promises;
    - a pool that cannot be observed (a DeviceClass missing or with a bad
      selector, an unreadable spec, kinds sharing counters) is reported
      `Observing=False` with the reason, and no histogram, so the scheduler
      falls back to whole-node accounting for it instead of trusting a guess.

Only ResourceSlices of the newest generation of each resource pool count,
as in the DRA allocator. Devices of network-attached slices (no `nodeName`)
belong to no node's vector, but for those pinned to one node; a node a free one
of the pool's kinds serves says so (`network`, True/`NetworkAttachedDevices`).
Those serving a node are judged for `class_failures` there like its own: the
allocator runs a claim's class and selectors on them too.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from modelplane_common.cel.celenv import compile_selector
from modelplane_common.cel.devices import ERROR, MATCH, MISSING, DeviceView, evaluate
from modelplane_common.cel.errors import CelValueError, SelectorError
from modelplane_common.cel.quantity import Quantity
from modelplane_common.cel.reads import Read, device_reads, project
from modelplane_common.observation import MAX_BUCKETS, FreeVector, Histogram
from modelplane_common.outcome import Condition

from modelplane_agent.devices import NETWORK_ATTACHED, SHARED_POOL_NAME, NodeDevices
from modelplane_agent.partitions import SLICE_ORDER, first_fit
from modelplane_agent.snapshot import (
    CounterKey,
    Device,
    DeviceClass,
    DeviceKey,
    Node,
    PoolSpec,
    Resources,
    Toleration,
)
from modelplane_agent.taint_rules import UNSELECTIVE_RULE

OBSERVING = "Observing"
CORDONED = "cordoned"
NOT_READY = "NotReady"
UNTOLERATED_TAINT = "untolerated taint"
KINDS_SHARE_COUNTERS = "KindsShareCounters"
SHARED_POOL_NAMES = "SharedPoolNames"
UNSELECTIVE_TAINT_RULES = "UnselectiveDeviceTaintRules"
NETWORK_ATTACHED_DEVICES = "NetworkAttachedDevices"
# Why a kind counts nothing on a node where a device of it lacks a declared entry (or
# holds it with another type): whether kube-scheduler fails the node for a claim
# reading it depends on the order it tries devices in (`lacks`).
LACKS_DECLARED = "a device lacks a declared entry"


@dataclass(frozen=True, slots=True)
class Fails:
    """A device on which a kind's DeviceClass fails (a CEL runtime error), or a claim's
    selector may (it lacks a declared entry): `cause` says so."""

    cause: str


@dataclass(frozen=True, slots=True)
class Differs:
    """A device of a kind that is not what the fleet was told (`cause` names the first
    declared attribute or capacity it lacks or holds another value of)."""

    cause: str


# What a kind's rule says of one device: of the kind (True) or not (False), of it but
# not as declared (Differs), or its DeviceClass fails on it (Fails).
Judgement = bool | Differs | Fails
# A device's judgements, one per kind of the pool in declared order.
Judged = tuple[Judgement, ...]


@dataclass(frozen=True, slots=True)
class KindRule:
    """A pool device kind resolved against its DeviceClass.

    `reads` are the device entries its selectors can read and its declaration
    names (None: unknown), so that devices agreeing on them share one
    judgement (`view_of`). `declared` is what the fleet was told every device of
    the kind has (`snapshot.Kind.declared`).
    """

    name: str
    driver: str
    selectors: tuple[str, ...]
    reads: frozenset[Read] | None = None
    device_class: str = ""
    declared: DeviceView = ("", (), ())

    def view_of(self, device: Device) -> DeviceView:
        """What of `device` decides whether it is of this kind."""
        return device.view if self.reads is None else project(device.view, self.reads)

    def judge(self, view: DeviceView) -> Judgement:
        """Whether a device is of this kind, and as declared, or why its class fails on it.

        The selectors run in order on the device whatever its driver, as the
        allocator runs a claim's class on every device of the node it tries: the
        first false one decides False; one reading an attribute or capacity the
        device lacks fails kube-scheduler's Filter ("no such key", a CEL runtime
        error): Fails. Of the kind only on the kind's driver; then Fails too when
        the device lacks a declared entry (`lacks`: a claim's selector reading it
        fails the same way), and Differs unless it holds every declared attribute
        and capacity with the declared value. Raises SelectorError for a type error.
        """
        for expression in self.selectors:
            outcome, reason = evaluate(expression, view)
            if outcome == ERROR:
                raise SelectorError(expression, reason)
            if outcome == MISSING:
                return Fails(
                    f"device kind {self.name}: DeviceClass {self.device_class} fails on "
                    f"a device ({reason}): kube-scheduler may fail the node"
                )
            if outcome != MATCH:
                return False
        if view[0] != self.driver:
            return False
        lacking = lacks(self.declared, view)
        if lacking is not None:
            return Fails(
                f"{LACKS_DECLARED} of device kind {self.name} ({lacking}): kube-scheduler "
                "may fail the node for a claim selecting on it"
            )
        what = differs(self.declared, view)
        if what is None:
            return True
        return Differs(f"device kind {self.name}: a device differs from the declared {what}")


def lacks(declared: DeviceView, view: DeviceView) -> str | None:
    """The first declared attribute `view` lacks or holds with another type, or declared
    capacity it lacks ("attribute driverVersion"), None when it holds every entry (with
    the declared value or not). A request selector true on the declaration may read
    any of them; on such a device it is a CEL runtime error ("no such key", "no such
    overload"), which fails kube-scheduler's Filter as a DeviceClass's does."""
    types = {_qualified(n, view[0]): k for n, k, _ in view[1]}
    for name, kind, _ in declared[1]:
        if types.get(_qualified(name, declared[0])) != kind:
            return f"attribute {name}"
    capacity = {_qualified(n, view[0]) for n, _ in view[2]}
    for name, _ in declared[2]:
        if _qualified(name, declared[0]) not in capacity:
            return f"capacity {name}"
    return None


def differs(declared: DeviceView, view: DeviceView) -> str | None:
    """The first declared attribute or capacity `view` lacks or holds another value of
    ("attribute driverVersion"), None when it holds them all. Names resolve as CEL
    resolves them: unqualified, in the driver's domain; capacities compare as
    quantities (80Gi equals 85899345920)."""
    attributes = {_qualified(n, view[0]): (k, v) for n, k, v in view[1]}
    for name, kind, value in declared[1]:
        if attributes.get(_qualified(name, declared[0])) != (kind, value):
            return f"attribute {name}"
    capacity = {_qualified(n, view[0]): v for n, v in view[2]}
    for name, value in declared[2]:
        held = capacity.get(_qualified(name, declared[0]))
        if held is None or _amount(held) != _amount(value):
            return f"capacity {name}"
    return None


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _amount(text: str) -> Fraction | None:
    try:
        return Quantity.parse(text).value
    except CelValueError:
        return None


def declared_reads(declared: DeviceView) -> frozenset[Read]:
    """The device entries a declaration names, as `reads` lists them."""
    reads: set[Read] = set()
    for what, entries in (("attributes", declared[1]), ("capacity", declared[2])):
        for entry in entries:
            domain, _, ident = _qualified(entry[0], declared[0]).partition("/")
            reads.add((what, domain, ident))
    return frozenset(reads)


@dataclass(frozen=True, slots=True)
class Unobservable:
    """Why a pool cannot be observed: the Observing=False reason and message."""

    reason: str
    message: str


def kind_rules(
    spec: PoolSpec, classes: Mapping[str, DeviceClass]
) -> tuple[KindRule, ...] | Unobservable:
    """Resolve a pool's kinds against the DeviceClasses, or say why that is impossible."""
    if spec.problem:
        return Unobservable("InvalidSpec", spec.problem)
    rules = []
    for kind in spec.kinds:
        device_class = classes.get(kind.device_class)
        if device_class is None:
            return Unobservable(
                "DeviceClassNotFound",
                f"device kind {kind.name}: DeviceClass {kind.device_class} does not exist",
            )
        if device_class.problem:
            return Unobservable(
                "InvalidDeviceClass",
                f"device kind {kind.name}: DeviceClass {kind.device_class}: {device_class.problem}",
            )
        for expression in device_class.selectors:
            try:
                compile_selector(expression)
            except SelectorError as error:
                return Unobservable(
                    "InvalidDeviceClass",
                    f"device kind {kind.name}: DeviceClass {kind.device_class}: {error}",
                )
        reads: set[Read] | None = set()
        for expression in device_class.selectors:
            found = device_reads(expression)
            reads = None if found is None or reads is None else reads | found
        rules.append(
            KindRule(
                kind.name,
                kind.driver,
                device_class.selectors,
                None if reads is None else frozenset(reads) | declared_reads(kind.declared),
                kind.device_class,
                kind.declared,
            )
        )
    return tuple(rules)


def left_out(node: Node, tolerations: Sequence[Toleration]) -> str | None:
    """Why a node of the pool is not in the histogram, or None when it is schedulable."""
    if node.unschedulable:
        return CORDONED
    if not node.ready:
        return NOT_READY
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(
            t.tolerates(taint) for t in tolerations
        ):
            return UNTOLERATED_TAINT
    return None


class CountersShared(Exception):
    """Devices of two declared kinds draw on one shared counter of a node: counted
    each alone, the kinds would promise the same capacity twice."""

    def __init__(self, first: int, second: int, counter: CounterKey) -> None:
        super().__init__(first, second, counter)
        self.first, self.second, self.counter = first, second, counter

    def message(self, kind_names: Sequence[str]) -> str:
        _, pool, counter_set, name = self.counter
        return (
            f"device kinds {kind_names[self.first]} and {kind_names[self.second]} draw on "
            f"the same shared counter {counter_set}/{name} of resource pool {pool}: "
            "their free devices cannot be counted apart"
        )


def free_vector(
    offered: NodeDevices,
    judged: Sequence[Judged],
    kind_count: int,
    allocated: Callable[[DeviceKey], bool],
) -> tuple[FreeVector, dict[int, str]]:
    """Free devices of one node per kind (`judged`: each device's judgements, per kind
    in declared order; empty for an allocated device that consumes no counter), and
    per kind why some of its devices were not counted (they differ from the
    declaration, or first fit over several slices gives more in some order of them
    than in the worst, `partitions.SLICE_ORDER`).

    `offered.elsewhere` are devices of the node's resource pools published for other
    nodes that consume the same counters: only what they take, allocated, matters here.

    A device consuming no counter counts when free and as declared; those that do
    count as many of the kind's free ones as first fit gives out one after another in
    what allocated devices left of the counters (`partitions.first_fit_count`), none
    of a GPU (a counter group) where a free one differs from the declaration: a
    claim may get it, and the count cannot tell. Raises CountersShared when two
    kinds' devices consume the same counter.
    """
    devices = offered.devices
    left = counters_left((*devices, *offered.elsewhere), allocated, offered.counters)
    free, differing = _plain_free(devices, judged, kind_count, allocated)
    partitioned = _partition_candidates(
        [
            (s, d, j)
            for s, d, j in zip(offered.slice_of, devices, judged, strict=True)
            if d.consumes
        ],
        kind_count,
        allocated,
        left,
    )
    for index, candidates in enumerate(partitioned):
        if candidates:
            count, cause = _partitions_free(candidates, left)
            free[index] += count
            if cause is not None:
                differing.setdefault(index, cause)
    return tuple(free), differing


# Why a kind counts fewer devices than kube-scheduler may allocate on a node, the same
# on every version (`declared_cause`; design/observation.md, "What the agent counts").
SHARED_DEVICES = "devices allowing multiple allocations (counted once, free while unshared)"
BINDING_CONDITIONS = "devices with binding conditions (allocated once their driver reports)"


def declared_cause(device: Device, allocated: Callable[[DeviceKey], bool]) -> str | None:
    """Why kube-scheduler may give a pod `device`, or a share more of it, where the agent
    counts nothing more (None: it may not). A free device with binding conditions
    kube-scheduler allocates (trying its pool last) and binds the pod once the driver
    reports them; one allowing multiple allocations it gives to further claims, held
    or not, while its capacity lasts. A tainted device it gives nobody."""
    if device.tainted:
        return None
    if device.binding_conditions and not allocated(device.key):
        return BINDING_CONDITIONS
    return SHARED_DEVICES if device.shared else None


def _plain_free(
    devices: Sequence[Device],
    judged: Sequence[Judged],
    kind_count: int,
    allocated: Callable[[DeviceKey], bool],
) -> tuple[list[int], dict[int, str]]:
    """Per kind, the free devices that consume no counter, and why some were not counted
    (differing from the declaration, or `declared_cause`)."""
    free = [0] * kind_count
    differing: dict[int, str] = {}
    for device, verdicts in zip(devices, judged, strict=True):
        if not verdicts or device.consumes:
            continue
        counts = device.allocatable and not allocated(device.key)
        cause = declared_cause(device, allocated)
        for index, verdict in enumerate(verdicts):
            if verdict is True:
                free[index] += int(counts)
                if cause is not None:
                    differing.setdefault(index, cause)
            elif isinstance(verdict, Differs) and counts:
                differing.setdefault(index, verdict.cause)
    return free, differing


def _partitions_free(
    candidates: Sequence[tuple[int, Device, Judgement]], left: Mapping[CounterKey, Fraction]
) -> tuple[int, str | None]:
    """How many of one kind's partition `candidates` (slice, device, verdict) first fit
    gives out, and why it may give out more (a candidate differing from the declaration,
    or an order of the slices that gives more than the worst: `partitions.SLICE_ORDER`)."""
    devices = [device for _, device, _ in candidates]
    slices = [slice_ for slice_, _, _ in candidates]
    causes = [verdict.cause for _, _, verdict in candidates if isinstance(verdict, Differs)]
    count, more = first_fit(devices, slices, left, [isinstance(v, Differs) for *_, v in candidates])
    if causes:
        return count, causes[0]
    return count, SLICE_ORDER if more else None


def class_failures(
    devices: Sequence[Device], judged: Sequence[Judged], allocated: Callable[[DeviceKey], bool]
) -> dict[int, str]:
    """Per kind index, why its DeviceClass fails on some device of the node no claim
    holds (`KindRule.judge`), any driver's, tainted or not, or a claim's selector may (a
    device of the kind lacking a declared entry): kube-scheduler's allocator runs the
    class, then the claim's selectors, on each such device it tries, in an order it
    does not fix (pools in map order), and a failure fails the node's Filter. So a
    failing kind is counted as nothing on the node (`withheld`), never as free devices
    a claim may not get."""
    failures: dict[int, str] = {}
    for device, verdicts in zip(devices, judged, strict=True):
        if verdicts and not (device.consumes and allocated(device.key)):
            for index, verdict in enumerate(verdicts):
                if isinstance(verdict, Fails):
                    failures.setdefault(index, verdict.cause)
    return failures


def withheld(
    vector: FreeVector,
    failures: Mapping[int, str],
    differing: Mapping[int, str],
    skipped: tuple[str, ...],
) -> Free:
    """The node's free vector with the kinds in `failures` counted as none, and why
    devices were not counted (`skipped` pools, failures, devices differing from the
    declaration), if any were not."""
    if failures:
        vector = tuple(0 if i in failures else n for i, n in enumerate(vector))
    causes = (*skipped, *sorted({*failures.values(), *differing.values()}))
    return Uncounted(vector, causes) if causes else vector


def _free_at_all(device: Device, allocated: Callable[[DeviceKey], bool]) -> bool:
    return device.allocatable and not allocated(device.key)


def _partition_candidates(
    devices: Sequence[tuple[int, Device, Judged]],
    kind_count: int,
    allocated: Callable[[DeviceKey], bool],
    left: Mapping[CounterKey, Fraction],
) -> list[list[tuple[int, Device, Judgement]]]:
    """Per kind, its free counter-consuming devices that could fit, with their slices and
    judgements (True or Differs), in order; raises CountersShared when devices of two
    kinds (free or not) consume the same counter."""
    partitioned: list[list[tuple[int, Device, Judgement]]] = [[] for _ in range(kind_count)]
    drawn: dict[CounterKey, int] = {}
    for slice_, device, verdicts in devices:
        kinds = [i for i, j in enumerate(verdicts) if j is True or isinstance(j, Differs)]
        _draw(device, kinds, drawn)
        if _free_at_all(device, allocated) and _may_fit(device, left):
            for index in kinds:
                partitioned[index].append((slice_, device, verdicts[index]))
    return partitioned


def _may_fit(device: Device, left: Mapping[CounterKey, Fraction]) -> bool:
    """Whether every amount it consumes is readable, of a counter that is."""
    return all(amount is not None and key in left for key, amount in device.consumes)


def _draw(device: Device, kinds: Sequence[int], drawn: dict[CounterKey, int]) -> None:
    """Record which kind draws on each counter `device` consumes; refuse a second kind."""
    for counter, _ in device.consumes:
        for index in kinds:
            owner = drawn.setdefault(counter, index)
            if owner != index:
                raise CountersShared(min(owner, index), max(owner, index), counter)


def counters_left(
    devices: Sequence[Device],
    allocated: Callable[[DeviceKey], bool],
    counters: Mapping[CounterKey, Fraction | None],
) -> dict[CounterKey, Fraction]:
    """Each readable counter less what allocated devices consume of it (an unreadable
    amount consumed uses the counter up; an unreadable counter is not listed, so no
    device consuming it is ever free: under-promise)."""
    left = {key: value for key, value in counters.items() if value is not None}
    for device in devices:
        if device.consumes and allocated(device.key):
            for counter, amount in device.consumes:
                if counter in left:
                    left[counter] = Fraction(0) if amount is None else left[counter] - amount
    return left


def coarsen(histogram: Histogram, max_buckets: int = MAX_BUCKETS) -> Histogram:
    """At most `max_buckets` buckets, by rounding the rarest vectors down.

    The `max_buckets` most common vectors are kept as they are (among equally
    common ones, the least free are kept: more vectors lie above them). Every
    other vector moves onto the kept vector it dominates (every count lower or
    equal) that loses the fewest devices, the lexicographically greatest among
    equals, else onto the all-zero vector; if that adds a bucket, only the
    `max_buckets - 1` most common are kept. A node is then reported with at
    most what it has free: never an over-promise.

    Cost: a sort, then for each moved vector a scan of the kept ones from the
    first that is no richer, each dominance test one integer operation
    (`_Packed`): O(n log n + n x max_buckets) for n vectors, 0.1 s for 5,000
    (design/agent.md).
    """
    counts = dict(histogram.buckets)
    if len(counts) <= max_buckets:
        return histogram
    zero = (0,) * len(next(iter(counts)))
    by_commonness = sorted(counts, key=lambda v: (-counts[v], sum(v), v))
    coarsened = _round_down(counts, by_commonness[:max_buckets], zero)
    if len(coarsened) > max_buckets:  # the all-zero vector took a bucket of its own
        kept = [v for v in by_commonness[: max_buckets - 1] if v != zero]
        coarsened = _round_down(counts, [*kept, zero], zero)
    return Histogram.of(coarsened.items())


def _round_down(
    counts: Mapping[FreeVector, int], kept: Sequence[FreeVector], zero: FreeVector
) -> dict[FreeVector, int]:
    """Every vector's nodes onto itself if kept, else onto its best dominated kept vector."""
    packed = _Packed(counts)
    # Richest first (most devices, then lexicographically greatest): the first kept vector
    # a vector dominates, scanning from those no richer than it, is the best target.
    targets = sorted(kept, key=lambda u: (sum(u), u), reverse=True)
    poorer = [-sum(u) for u in targets]  # ascending, for bisect
    codes = [packed.code(u) for u in targets]
    guards = packed.guards
    is_kept = set(kept)
    result: dict[FreeVector, int] = {}
    for vector, nodes in counts.items():
        target = vector if vector in is_kept else zero
        if vector not in is_kept:
            above = packed.code(vector) | guards
            first = bisect.bisect_left(poorer, -sum(vector))
            # The hot loop: one subtraction and one mask per kept vector (see _Packed).
            for i, code in enumerate(codes[first:], first):
                if (above - code) & guards == guards:
                    target = targets[i]
                    break
        result[target] = result.get(target, 0) + nodes
    return result


class _Packed:
    """Free vectors packed into one integer, a field per kind with a guard bit on top, so
    that "u <= v in every kind" is one subtraction: the guard bits of (v | guards) - u all
    stay set exactly when no field of u exceeds v's (fields never borrow from each other,
    since each holds less than its guard bit)."""

    def __init__(self, counts: Iterable[FreeVector]) -> None:
        vectors = list(counts)
        self.width = max((c for v in vectors for c in v), default=0).bit_length() + 1
        self.guards = sum(1 << (i * self.width + self.width - 1) for i in range(len(vectors[0])))

    def code(self, vector: FreeVector) -> int:
        return sum(c << (i * self.width) for i, c in enumerate(vector))


@dataclass(frozen=True, slots=True)
class PoolReport:
    """What the agent says about one pool; `histogram` is None when it cannot observe it."""

    observed_nodes: int
    histogram: Histogram | None
    condition: Condition


@dataclass(frozen=True, slots=True)
class NoRoom:
    """A schedulable node where the pool's smallest pod would not fit: it counts with
    no free devices (`kinds` zeros), for want of `resource`."""

    resource: str
    kinds: int

    @property
    def vector(self) -> FreeVector:
        return (0,) * self.kinds


@dataclass(frozen=True, slots=True)
class Room:
    """How many pods of the pool's smallest shape fit on a node beside the pods bound
    there (`pods`), and the resource that allows no more (`pods`, `cpu` or `memory`)."""

    pods: int
    resource: str


@dataclass(frozen=True, slots=True)
class Capped:
    """A schedulable node with room for fewer pods of the pool's smallest shape than it
    has free devices of some kind: each kind counts at most that many, for want of
    `resource` (`capped`). `uncapped` is what it has free (the devices alone), and
    `causes` why some devices it publishes were not counted at all (`Uncounted`)."""

    vector: FreeVector
    resource: str
    uncapped: FreeVector
    causes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Uncounted:
    """A node's free vector, and why some devices it publishes were not counted at all
    (`causes`: "incomplete resource pool", "invalid resource pool", a DeviceClass that
    fails on some device, `class_failures`), for the message."""

    vector: FreeVector
    causes: tuple[str, ...]


# What a node has free: its vector, with the causes of devices left uncounted if any.
Free = FreeVector | Uncounted

# What one node of a pool adds to its report: what it has free when schedulable and a
# pod fits (Capped when fewer pods fit than it has free devices of a kind), NoRoom when
# none does, else why it is left out.
Contribution = Free | str | NoRoom | Capped

# What a node's non-device capacity allows the pool: no pod (NoRoom), a number of pods
# (Room), or nothing known to bound it (None: a node the state does not hold).
Limit = NoRoom | Room | None


def room_for(shape: Resources, allocatable: Resources, used: Resources) -> Room:
    """How many pods of `shape` fit on a node beside the requests `used` of the pods
    bound to it, as NodeResourcesFit judges each of them: a pod slot always, cpu and
    memory only when the shape asks for them. Ties name the first of pods, cpu, memory."""
    limits = [(_times(allocatable.pods - used.pods, shape.pods), "pods")]
    if shape.cpu:
        limits.append((_times(allocatable.cpu - used.cpu, shape.cpu), "cpu"))
    if shape.memory:
        limits.append((_times(allocatable.memory - used.memory, shape.memory), "memory"))
    pods, resource = min(limits, key=lambda limit: limit[0])
    return Room(pods, resource)


def _times(left: int, each: int) -> int:
    return max(0, left // each) if each > 0 else 0


def capped(free: Free, limit: Room) -> Free | Capped:
    """`free` with each kind counting at most `limit.pods` devices.

    Every pod modelplane places takes at least one device of each kind it asks for,
    so a node with room for n pods of the pool's smallest shape takes at most n pods,
    and the fleet (which places `free // demand` pods per node) never more than that.
    Devices of incomplete or invalid resource pools keep saying so (`Capped.causes`)."""
    vector, causes = (free.vector, free.causes) if isinstance(free, Uncounted) else (free, ())
    cut = tuple(min(count, limit.pods) for count in vector)
    if cut == vector:
        return free
    return Capped(cut, limit.resource, vector, causes)


def contribution(
    node: Node,
    tolerations: Sequence[Toleration],
    free_of: Callable[[Node], Free],
    room_of: Callable[[Node], Limit] = lambda _: None,
) -> Contribution:
    """One node's part of the report; `free_of` is only asked about schedulable nodes
    with room for a pod."""
    reason = left_out(node, tolerations)
    if reason is not None:
        return reason
    limit = room_of(node)
    if isinstance(limit, NoRoom):
        return limit
    free = free_of(node)
    return free if limit is None else capped(free, limit)


@dataclass
class Tally:
    """The sum of a pool's contributions, kept up to date one node at a time."""

    vectors: Counter[FreeVector] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    no_room: Counter[str] = field(default_factory=Counter)
    capped: Counter[str] = field(default_factory=Counter)
    uncounted: Counter[str] = field(default_factory=Counter)

    def add(self, part: Contribution, sign: int = 1) -> None:
        if isinstance(part, NoRoom):
            _count(self.no_room, part.resource, sign)
            _count(self.vectors, part.vector, sign)
        elif isinstance(part, Capped):
            _count(self.capped, part.resource, sign)
            for cause in part.causes:
                _count(self.uncounted, cause, sign)
            _count(self.vectors, part.vector, sign)
        elif isinstance(part, Uncounted):
            for cause in part.causes:
                _count(self.uncounted, cause, sign)
            _count(self.vectors, part.vector, sign)
        elif isinstance(part, str):
            _count(self.reasons, part, sign)
        else:
            _count(self.vectors, part, sign)


def _count(counter: Counter, key: object, sign: int) -> None:
    counter[key] += sign
    if counter[key] <= 0:
        del counter[key]


def unobservable_report(observed: int, why: Unobservable) -> PoolReport:
    return PoolReport(observed, None, Condition(OBSERVING, "False", why.reason, why.message))


def report_from_tally(observed: int, tally: Tally, max_buckets: int = MAX_BUCKETS) -> PoolReport:
    """The report of an observable pool of `observed` nodes, from its tally."""
    exact = Histogram.of(tally.vectors.items())
    histogram = coarsen(exact, max_buckets)
    message = _explain(observed, tally)
    reason = "Observed"
    if histogram is not exact:
        message += (
            f"; {len(exact.buckets)} distinct free vectors exceed the bound of {max_buckets}: "
            "the rarest are reported with fewer free devices than they have"
        )
        reason = "HistogramCoarsened"
    if SHARED_POOL_NAME in tally.uncounted:
        # The operator's to fix (rename a driver's pools, or upgrade kube-scheduler):
        # named over the coarsening, and a Warning event (status.PROBLEMS).
        message += (
            "; two DRA drivers publish shared counters in resource pools of one name, "
            "which kube-scheduler v1.35 and v1.36 mix up (kubernetes/kubernetes#140434): "
            "their devices on those nodes are not counted"
        )
        reason = SHARED_POOL_NAMES
    if any(cause.startswith(UNSELECTIVE_RULE) for cause in tally.uncounted):
        # Counted as taken whatever the scheduler's version: said, and a Warning event
        # (status.PROBLEMS), so an operator can give the rule a selector or delete it.
        message += (
            "; a DeviceTaintRule without deviceSelector taints every device for "
            "kube-scheduler v1.35 and v1.36 and none for v1.37, and the agent cannot tell "
            "which version schedules: those devices are not counted"
        )
        reason = reason if reason == SHARED_POOL_NAMES else UNSELECTIVE_TAINT_RULES
    if NETWORK_ATTACHED in tally.uncounted:
        # Not a fault to fix, a limit of per-node counting: said, with no Warning event.
        message += (
            "; free network-attached devices (ResourceSlices without nodeName) serve "
            "some nodes, which the agent counts on none: a claim there may get more"
        )
        if reason not in (SHARED_POOL_NAMES, UNSELECTIVE_TAINT_RULES):
            reason = NETWORK_ATTACHED_DEVICES
    return PoolReport(observed, histogram, Condition(OBSERVING, "True", reason, message))


def counters_shared(observed: int, error: CountersShared, kind_names: Sequence[str]) -> PoolReport:
    """Two kinds drawing on one counter make the pool unobservable: the fleet then
    counts it whole-node rather than trust either kind's count."""
    why = Unobservable(KINDS_SHARE_COUNTERS, error.message(kind_names))
    return unobservable_report(observed, why)


def selector_failed(observed: int, error: SelectorError) -> PoolReport:
    """A DeviceClass selector failing with a type error on some device makes the pool
    unobservable, as it makes the DRA allocator fail the claim."""
    return unobservable_report(observed, Unobservable("InvalidDeviceClass", str(error)))


def observe_pool(
    spec: PoolSpec,
    rules: tuple[KindRule, ...] | Unobservable,
    members: Iterable[Node],
    free_of: Callable[[Node], Free],
    room_of: Callable[[Node], Limit] = lambda _: None,
    max_buckets: int = MAX_BUCKETS,
) -> PoolReport:
    """The report on one pool, given the nodes its selector matches, computed afresh."""
    members = tuple(members)
    if isinstance(rules, Unobservable):
        return unobservable_report(len(members), rules)
    tally = Tally()
    try:
        for node in members:
            tally.add(contribution(node, spec.tolerations, free_of, room_of))
    except SelectorError as error:
        return selector_failed(len(members), error)
    except CountersShared as error:
        return counters_shared(len(members), error, spec.kind_names)
    return report_from_tally(len(members), tally, max_buckets)


def _explain(observed: int, tally: Tally) -> str:
    """One line, kube-scheduler style: counted per cause, most frequent first."""
    schedulable = observed - sum(tally.reasons.values())
    text = f"{schedulable}/{observed} nodes schedulable"
    if tally.reasons:
        text += ": " + _causes(tally.reasons)
    if tally.no_room:
        text += f"; {sum(tally.no_room.values())} without room for a pod: "
        text += _causes(tally.no_room)
    if tally.capped:
        text += f"; {sum(tally.capped.values())} with room for fewer pods than free devices: "
        text += _causes(tally.capped)
    if tally.uncounted:
        text += "; devices not counted: " + _causes(tally.uncounted)
    return text


def _causes(counts: Counter[str]) -> str:
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{n} {cause}" for cause, n in ordered)
