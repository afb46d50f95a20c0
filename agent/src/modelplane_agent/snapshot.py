"""What the agent reads from the API server, as typed values, read once at the edge.

Every `*_from` function takes one object as the API server serves it (a
JSON mapping) and returns the few fields the agent's rules need. None of
them raises: a field of the wrong shape reads as absent, and the rules then
decide conservatively (a node without a readable Ready condition is not
Ready; a device consuming an unreadable counter is not free).

Versions read: core/v1 Nodes and Pods, resource.k8s.io/v1 ResourceSlices,
ResourceClaims and DeviceClasses (Kubernetes 1.34+, the same floor the
replica function's claim templates need), agent.modelplane.ai/v1alpha1
PoolObservations and ReplicaObservations; DeviceTaintRules where served (in
the version discovery finds), read by `taint_rules`.

Memory is bounded by what is kept, not by what is served: nothing outside
these typed values outlives the reading of an object, and of a pod's labels,
which tenants write without bound (a pod may carry about 1.5 MB of them),
only the two a ReplicaObservation's selector names are kept (`POD_LABELS`;
design/agent.md, "Memory").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from fractions import Fraction
from functools import lru_cache
from typing import Any

from modelplane_common.cel.devices import DeviceView, device_view
from modelplane_common.cel.errors import CelValueError
from modelplane_common.cel.quantity import Quantity
from modelplane_common.inputs import condition_in, whole_number
from modelplane_common.labels import REPLICA, REPLICA_NAMESPACE
from modelplane_common.outcome import capped
from modelplane_common.timeutil import parse_duration
from modelplane_common.tolerations import Taint, Toleration

# A device is named, cluster-wide, by its driver, its resource pool and its name: the
# triple a ResourceClaim's allocation result carries.
DeviceKey = tuple[str, str, str]
# A shared counter of partitionable devices: driver, resource pool, counter set, counter.
CounterKey = tuple[str, str, str, str]


def _map(value: Any) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _labels(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in _map(value).items()}


# The pod labels the agent keeps: the keys of a ReplicaObservation's selector
# (design/api.md, `spec.selector.matchLabels`). A selector naming another key is a
# problem of that observation (`replica_spec_from`), never a silent miss.
POD_LABELS = (REPLICA, REPLICA_NAMESPACE)


def _pod_labels(value: Any) -> dict[str, str]:
    raw = _map(value)
    return {key: str(raw[key]) for key in POD_LABELS if key in raw}


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return value


def _quantity(raw: Any) -> Fraction | None:
    """A counter value ({value: "40Gi"} or a bare quantity), None when unreadable."""
    value = raw.get("value") if isinstance(raw, Mapping) else raw
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return _parsed(str(value))


@lru_cache(maxsize=4096)
def _parsed(text: str) -> Fraction | None:
    # Slices repeat a few values thousands of times (every partition's "1", "14").
    try:
        return Quantity.parse(text).value
    except CelValueError:
        return None


@dataclass(frozen=True, slots=True)
class Resources:
    """Non-device capacity as kube-scheduler's NodeResourcesFit counts it: cpu in
    millicores, memory in bytes (both rounded up, as `MilliValue`/`Value` do), pods."""

    cpu: int = 0
    memory: int = 0
    pods: int = 0

    def plus(self, other: Resources, sign: int = 1) -> Resources:
        return Resources(
            self.cpu + sign * other.cpu,
            self.memory + sign * other.memory,
            self.pods + sign * other.pods,
        )


@lru_cache(maxsize=4096)
def _scaled(text: str, scale: int) -> int | None:
    try:
        return math.ceil(Quantity.parse(text).value * scale)
    except CelValueError:
        return None


def amount(raw: Any, scale: int = 1) -> int | None:
    """A quantity (a string, or a number) times `scale`, rounded up; None if unreadable."""
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        return None
    whole = whole_number(raw)
    return _scaled(str(whole if whole is not None else raw), scale)


def resources_from(raw: Any, pods: int | None = None) -> Resources:
    """cpu, memory (and pods, unless given) of a resource list; unreadable or absent: 0."""
    raw = _map(raw)
    count = pods if pods is not None else amount(raw.get("pods")) or 0
    return Resources(amount(raw.get("cpu"), 1000) or 0, amount(raw.get("memory")) or 0, count)


def name_of(obj: Mapping) -> str:
    return _str(_map(obj.get("metadata")).get("name"))


def namespace_of(obj: Mapping) -> str:
    return _str(_map(obj.get("metadata")).get("namespace"))


def uid_of(obj: Mapping) -> str:
    return _str(_map(obj.get("metadata")).get("uid"))


def status_of(obj: Mapping) -> Mapping:
    """An observation's status as last seen (not a map: none)."""
    return _map(obj.get("status"))


# --------------------------------------------------------------------------- nodes


@dataclass(frozen=True, slots=True)
class Node:
    """A node; `allocatable` is its `status.allocatable` (absent: none, so nothing fits,
    as kube-scheduler sees a node that has not reported it)."""

    name: str
    labels: Mapping[str, str]
    unschedulable: bool
    ready: bool
    taints: tuple[Taint, ...] = ()
    allocatable: Resources = Resources()


def node_from(obj: Mapping) -> Node:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    ready = condition_in(status.get("conditions"), "Ready").get("status") == "True"
    taints = tuple(
        Taint(_str(_map(t).get("key")), _str(_map(t).get("value")), _str(_map(t).get("effect")))
        for t in _list(spec.get("taints"))
    )
    return Node(
        name=name_of(obj),
        labels=_labels(_map(obj.get("metadata")).get("labels")),
        unschedulable=spec.get("unschedulable") is True,
        ready=ready,
        taints=taints,
        allocatable=resources_from(status.get("allocatable")),
    )


def toleration_from(raw: Any) -> Toleration:
    raw = _map(raw)
    return Toleration(
        key=_str(raw.get("key")),
        operator=_str(raw.get("operator")) or "Equal",
        value=_str(raw.get("value")),
        effect=_str(raw.get("effect")),
    )


# --------------------------------------------------------------------------- DRA

# One requirement of a node selector term: (key, operator, values).
Requirement = tuple[str, str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Term:
    """One core/v1 NodeSelectorTerm: requirements on the node's labels
    (`matchExpressions`) and on its fields (`matchFields`), all of which must hold."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()


@dataclass(frozen=True, slots=True)
class Reach:
    """Which nodes a network-attached slice, or one device of a slice with
    `perDeviceNodeSelection`, serves: the node named (`node`), every node (`all_nodes`),
    or those its node selector's terms match (`terms`, any of them). `unreadable`: a
    selector of a shape the agent cannot read (it is taken to reach every node)."""

    node: str = ""
    all_nodes: bool = False
    terms: tuple[Term, ...] = ()
    unreadable: bool = False


def _requirements(raw: Any) -> tuple[tuple[Requirement, ...], bool]:
    """A term's requirements, and whether one of them was unreadable."""
    out = []
    unreadable = not isinstance(raw, list | type(None))
    for entry in _list(raw):
        entry = _map(entry)
        values = _list(entry.get("values"))
        key, operator = entry.get("key"), entry.get("operator")
        if not isinstance(key, str) or not isinstance(operator, str):
            unreadable = True
            continue
        out.append((key, operator, tuple(str(v) for v in values)))
    return tuple(out), unreadable


def reach_from(raw: Mapping) -> Reach | None:
    """The nodes `raw` (a slice's or a device's spec) serves by `nodeName`, `allNodes`
    or `nodeSelector`; None when it names none of them."""
    if _str(raw.get("nodeName")):
        return Reach(node=_str(raw.get("nodeName")))
    if raw.get("allNodes") is True:
        return Reach(all_nodes=True)
    selector = raw.get("nodeSelector")
    if selector is None:
        return None
    terms, unreadable = [], not isinstance(selector, Mapping)
    for term in _list(_map(selector).get("nodeSelectorTerms")):
        expressions, bad_expressions = _requirements(_map(term).get("matchExpressions"))
        fields, bad_fields = _requirements(_map(term).get("matchFields"))
        terms.append(Term(expressions, fields))
        unreadable = unreadable or bad_expressions or bad_fields
    return Reach(terms=tuple(terms), unreadable=unreadable)


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a ResourceSlice.

    `tainted`: it carries a NoSchedule or NoExecute device taint (effect None,
    or any other, does not count: the allocator ignores it), in its slice or,
    once `devices.DeviceIndex` has applied them, from a DeviceTaintRule
    (`taint_rules`). `binding_conditions`:
    its allocation waits on conditions a controller must report (KEP-5007).
    `shared`: it allows multiple allocations (`allowMultipleAllocations`, KEP-5075),
    so the allocator may give it to further claims while its capacity lasts.
    """

    key: DeviceKey
    view: DeviceView  # what a CEL selector sees: driver, attributes, capacity
    consumes: tuple[tuple[CounterKey, Fraction | None], ...] = ()
    tainted: bool = False
    binding_conditions: bool = False
    # The nodes it serves, in a slice with `perDeviceNodeSelection` (else None).
    reach: Reach | None = None
    shared: bool = False

    @property
    def allocatable(self) -> bool:
        """Whether a claim of modelplane's may get it at all, free or not.

        A tainted device only goes to a request that tolerates the taint, and
        modelplane's claims carry no device tolerations; a device with binding
        conditions is left out, conservatively, since its binding may fail.
        """
        return not (self.tainted or self.binding_conditions)


@dataclass(frozen=True, slots=True)
class Slice:
    """One ResourceSlice. `node` is its `nodeName`: empty for network-attached slices
    (`network`; `reach` says which nodes they serve, or each device's does) and for
    slices that only publish counter sets (which serve every node of their pool).

    `slice_count` is the pool's `resourceSliceCount` as this slice states it;
    `counter_sets` names its `sharedCounters` entries in order (a repeated name
    makes the pool invalid).
    """

    name: str
    node: str
    driver: str
    pool: str
    generation: int
    devices: tuple[Device, ...] = ()
    counters: tuple[tuple[CounterKey, Fraction | None], ...] = ()
    slice_count: int = 1
    counter_sets: tuple[str, ...] = ()
    reach: Reach | None = None  # `allNodes` or `nodeSelector` (None: per device, or nodeName)

    @property
    def network(self) -> bool:
        """Devices published for no single node (`allNodes`, a node selector, per device)."""
        return not self.node and bool(self.devices)


def slice_from(obj: Mapping) -> Slice:
    spec = _map(obj.get("spec"))
    driver = _str(spec.get("driver"))
    pool = _map(spec.get("pool"))
    pool_name = _str(pool.get("name"))
    per_device = spec.get("perDeviceNodeSelection") is True
    devices = []
    for raw in _list(spec.get("devices")):
        raw = _map(raw)
        consumes = tuple(
            ((driver, pool_name, _str(_map(c).get("counterSet")), str(name)), _quantity(value))
            for c in _list(raw.get("consumesCounters"))
            for name, value in _map(_map(c).get("counters")).items()
        )
        view = device_view(
            {
                "driver": driver,
                "attributes": _map(raw.get("attributes")),
                "capacity": _map(raw.get("capacity")),
            }
        )
        tainted = any(
            _map(taint).get("effect") in ("NoSchedule", "NoExecute")
            for taint in _list(raw.get("taints"))
        )
        devices.append(
            Device(
                (driver, pool_name, _str(raw.get("name"))),
                view,
                consumes,
                tainted=tainted,
                binding_conditions=bool(_list(raw.get("bindingConditions"))),
                reach=reach_from(raw) if per_device else None,
                shared=raw.get("allowMultipleAllocations") is True,
            )
        )
    counters = tuple(
        ((driver, pool_name, _str(_map(s).get("name")), str(name)), _quantity(value))
        for s in _list(spec.get("sharedCounters"))
        for name, value in _map(_map(s).get("counters")).items()
    )
    return Slice(
        name=name_of(obj),
        node=_str(spec.get("nodeName")),
        driver=driver,
        pool=pool_name,
        generation=_int(pool.get("generation")),
        devices=tuple(devices),
        counters=counters,
        slice_count=_int(pool.get("resourceSliceCount")),
        counter_sets=tuple(_str(_map(s).get("name")) for s in _list(spec.get("sharedCounters"))),
        reach=None if per_device or _str(spec.get("nodeName")) else reach_from(spec),
    )


def allocated_devices(claim: Mapping) -> frozenset[DeviceKey]:
    """The devices a ResourceClaim's status.allocation takes (none once deallocated).

    A result with `adminAccess: true` takes nothing: kube-scheduler does not count
    it as allocated (a monitoring claim shares the device with whoever holds it).
    """
    allocation = _map(_map(claim.get("status")).get("allocation"))
    return frozenset(
        (_str(_map(r).get("driver")), _str(_map(r).get("pool")), _str(_map(r).get("device")))
        for r in _list(_map(allocation.get("devices")).get("results"))
        if _map(r).get("adminAccess") is not True
    )


def is_allocated(claim: Mapping) -> bool:
    """Whether a ResourceClaim has an allocation (even one that takes no device)."""
    return isinstance(_map(claim.get("status")).get("allocation"), Mapping)


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]
    problem: str = ""  # a selector without a CEL expression


def device_class_from(obj: Mapping) -> DeviceClass:
    selectors: list[str] = []
    problem = ""
    for position, raw in enumerate(_list(_map(obj.get("spec")).get("selectors"))):
        expression = _map(_map(raw).get("cel")).get("expression")
        if isinstance(expression, str):
            selectors.append(expression)
        else:
            problem = f"spec.selectors[{position}] has no cel.expression"
    return DeviceClass(name_of(obj), tuple(selectors), problem)


# --------------------------------------------------------------------------- the agent's kinds


@dataclass(frozen=True, slots=True)
class Kind:
    """One DRA device kind a PoolObservation asks to count, and what the fleet was told
    every device of it has (`declared`: the attributes and capacity of the
    InferenceCluster's kind, which request selectors are judged on; empty when the
    PoolObservation carries none)."""

    name: str
    driver: str
    device_class: str
    declared: DeviceView = ("", (), ())


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """A PoolObservation's spec. `problem` names the first unusable field, if any."""

    name: str  # the PoolObservation's name
    generation: int
    match_labels: Mapping[str, str]
    kinds: tuple[Kind, ...]
    tolerations: tuple[Toleration, ...] = ()
    problem: str = ""
    # What the smallest pod placed on the pool needs of a node: `spec.minPodRequests`
    # (cpu, memory; 0 when not declared) and always one pod slot.
    min_pod: Resources = Resources(pods=1)
    # `spec.maxAge`, the InferenceCluster's observation.maxAge (None: not declared):
    # the agent's heartbeats follow the smallest of its pools' (controller.heartbeat_age).
    max_age: timedelta | None = None

    @property
    def kind_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.kinds)


def pool_spec_from(obj: Mapping) -> PoolSpec:
    spec = _map(obj.get("spec"))
    selector = spec.get("nodeSelector")
    match_labels = _map(selector).get("matchLabels")
    problem = ""
    if not isinstance(match_labels, Mapping):
        problem = f"spec.nodeSelector.matchLabels must be a map, got {match_labels!r}"
    kinds = []
    for position, raw in enumerate(_list(spec.get("devices"))):
        raw = _map(raw)
        driver = _str(raw.get("driver"))
        declared = device_view({**raw, "driver": driver})
        kind = Kind(_str(raw.get("name")), driver, _str(raw.get("deviceClassName")), declared)
        if not (kind.name and kind.driver and kind.device_class):
            problem = problem or (
                f"spec.devices[{position}] needs name, driver and deviceClassName, "
                f"got {dict(raw)!r}"
            )
        problem = problem or _undeclarable(position, declared)
        kinds.append(kind)
    min_pod, unreadable = _min_pod(spec.get("minPodRequests"))
    max_age, unreadable_age = _max_age(spec.get("maxAge"))
    return PoolSpec(
        name=name_of(obj),
        generation=_int(_map(obj.get("metadata")).get("generation")),
        match_labels=_labels(match_labels),
        kinds=tuple(kinds),
        tolerations=tuple(toleration_from(t) for t in _list(spec.get("tolerations"))),
        problem=problem or unreadable or unreadable_age,
        min_pod=min_pod,
        max_age=max_age,
    )


def _undeclarable(position: int, declared: DeviceView) -> str:
    """Why a kind's declared attributes or capacity are unreadable ("" when they are)."""
    for name, kind, _ in declared[1]:
        if kind == "invalid":
            return f"spec.devices[{position}].attributes.{name}: one of string, int, bool, version"
    for name, value in declared[2]:
        if value.startswith("invalid:") or _parsed(value) is None:
            return f"spec.devices[{position}].capacity.{name}: not a quantity, got {value}"
    return ""


def _max_age(raw: Any) -> tuple[timedelta | None, str]:
    """`spec.maxAge` (None when absent), and why it is unreadable, if it is."""
    if raw is None:
        return None, ""
    try:
        return parse_duration(raw), ""
    except ValueError as error:
        return None, f"spec.maxAge: {error}, got {raw!r}"


def _min_pod(raw: Any) -> tuple[Resources, str]:
    """The pool's smallest pod (one pod slot, plus the declared cpu and memory), and the
    first unreadable field of `spec.minPodRequests`, if any."""
    if raw is None:
        return Resources(pods=1), ""
    if not isinstance(raw, Mapping):
        return Resources(pods=1), f"spec.minPodRequests must be a map, got {raw!r}"
    values = {}
    for name, scale in (("cpu", 1000), ("memory", 1)):
        value = raw.get(name)
        values[name] = 0 if value is None else amount(value, scale)
        if values[name] is None:
            return Resources(pods=1), (
                f"spec.minPodRequests.{name} must be a Kubernetes quantity, got {value!r}"
            )
    return Resources(values["cpu"] or 0, values["memory"] or 0, 1), ""


# --------------------------------------------------------------------------- replicas


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod. `claims` names the ResourceClaims (in its namespace) it references;
    `claims_unresolved` names the `spec.resourceClaims` entries made from a template
    whose claim the pod's status does not name yet."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    node_name: str
    terminal: bool  # Succeeded or Failed: will never run again
    unschedulable: str = ""  # the scheduler's message while PodScheduled=False/Unschedulable
    claims: tuple[str, ...] = ()
    claims_unresolved: tuple[str, ...] = ()
    requests: Resources = Resources(pods=1)  # what it takes of its node (`pod_requests`)
    # `status.nominatedNodeName` of a pod not bound yet: the node preemption is making
    # room on for it, where kube-scheduler already counts its requests.
    nominated_node: str = ""

    @property
    def load_node(self) -> str:
        """The node whose room this pod takes: its own, else the one it is nominated to."""
        return self.node_name or self.nominated_node


def pod_requests(spec: Mapping, status: Mapping | None = None) -> Resources:
    """The cpu and memory a pod requests, as kube-scheduler's NodeResourcesFit reckons
    them (`resource.PodRequests`), and its one pod slot.

    The pod-level `spec.resources.requests`, for each of cpu and memory it sets
    (PodLevelResources, on by default since v1.34); otherwise the containers'
    sum, raised to what any init container needs while it runs (a regular one
    beside the sidecars started before it; a sidecar, `restartPolicy: Always`,
    runs on beside everything after it). Plus `spec.overhead`. A container or
    sidecar resized in place counts what `_resized` says (InPlacePodVerticalScaling,
    on by default since v1.33); pod-level requests are read from the spec (their
    in-place resize is alpha in v1.35).
    """
    statuses = _container_statuses(status or {})
    infeasible = _resize_infeasible(status or {})
    total = Resources()
    for container in _list(spec.get("containers")):
        total = total.plus(_resized(container, statuses, infeasible))
    sidecars = Resources()
    peak = Resources()
    for container in _list(spec.get("initContainers")):
        own = _container_requests(container)
        if _map(container).get("restartPolicy") == "Always":
            own = _resized(container, statuses, infeasible)
            total = total.plus(own)
            sidecars = sidecars.plus(own)
            running = sidecars
        else:
            running = sidecars.plus(own)
        peak = Resources(max(peak.cpu, running.cpu), max(peak.memory, running.memory))
    total = Resources(max(total.cpu, peak.cpu), max(total.memory, peak.memory))
    pod_level = _map(_map(spec.get("resources")).get("requests"))
    level = resources_from(pod_level, pods=0)
    total = Resources(
        level.cpu if "cpu" in pod_level else total.cpu,
        level.memory if "memory" in pod_level else total.memory,
    )
    return total.plus(resources_from(spec.get("overhead"), pods=0)).plus(Resources(pods=1))


def _container_requests(container: Any) -> Resources:
    return resources_from(_map(_map(_map(container).get("resources")).get("requests")), pods=0)


def _resized(container: Any, statuses: Mapping[str, Mapping], infeasible: bool) -> Resources:
    """A container's requests as kube-scheduler counts them once its status reports
    `resources` (`determineEffectiveRequests`): per resource, the largest of the spec,
    what runs (`resources.requests`) and what the kubelet allocated
    (`allocatedResources`); the spec left out while the resize is infeasible
    (`PodResizePending` with reason `Infeasible`: it will not happen)."""
    spec = _container_requests(container)
    status = statuses.get(_str(_map(container).get("name")))
    if status is None or not isinstance(status.get("resources"), Mapping):
        return spec
    running = resources_from(_map(status["resources"]).get("requests"), pods=0)
    allocated = resources_from(status.get("allocatedResources"), pods=0)
    states = (running, allocated) if infeasible else (spec, running, allocated)
    return Resources(max(s.cpu for s in states), max(s.memory for s in states))


def _container_statuses(status: Mapping) -> dict[str, Mapping]:
    """Container and init container statuses by name (an init container's wins a tie,
    as in kube-scheduler's map)."""
    named: dict[str, Mapping] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for entry in _list(status.get(key)):
            if isinstance(entry, Mapping):
                named[_str(entry.get("name"))] = entry
    return named


def _resize_infeasible(status: Mapping) -> bool:
    pending = condition_in(status.get("conditions"), "PodResizePending")
    return pending.get("reason") == "Infeasible"


def pod_claims(spec: Mapping, status: Mapping) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(claim names, unresolved entries) of a pod.

    An entry naming `resourceClaimName` is that claim; one naming a template is
    the claim `status.resourceClaimStatuses` gives for it (an entry there without
    a claim name means none was needed), unresolved until the status has it. The
    claim of extended resources (`status.extendedResourceClaimStatus`) counts too.
    """
    resolved = {
        _str(_map(entry).get("name")): _map(entry).get("resourceClaimName")
        for entry in _list(status.get("resourceClaimStatuses"))
    }
    claims: list[str] = []
    unresolved: list[str] = []
    for entry in _list(spec.get("resourceClaims")):
        entry = _map(entry)
        name = _str(entry.get("name"))
        direct = _str(entry.get("resourceClaimName"))
        if direct:
            claims.append(direct)
        elif name not in resolved:
            unresolved.append(name)
        elif _str(resolved[name]):
            claims.append(_str(resolved[name]))
    extended = _str(_map(status.get("extendedResourceClaimStatus")).get("resourceClaimName"))
    if extended:
        claims.append(extended)
    return tuple(claims), tuple(unresolved)


def pod_from(obj: Mapping) -> Pod:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    scheduled = condition_in(status.get("conditions"), "PodScheduled")
    unschedulable = ""
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        unschedulable = _str(scheduled.get("message")) or "the pod is unschedulable"
    claims, unresolved = pod_claims(spec, status)
    return Pod(
        namespace=namespace_of(obj),
        name=name_of(obj),
        labels=_pod_labels(_map(obj.get("metadata")).get("labels")),
        node_name=_str(spec.get("nodeName")),
        terminal=status.get("phase") in ("Succeeded", "Failed"),
        unschedulable=unschedulable,
        claims=claims,
        claims_unresolved=unresolved,
        requests=pod_requests(spec, status),
        nominated_node="" if spec.get("nodeName") else _str(status.get("nominatedNodeName")),
    )


@dataclass(frozen=True, slots=True)
class ReplicaObservationSpec:
    namespace: str
    name: str
    generation: int
    match_labels: Mapping[str, str] = field(default_factory=dict)
    problem: str = ""


def replica_spec_from(obj: Mapping) -> ReplicaObservationSpec:
    match_labels = _map(_map(obj.get("spec")).get("selector")).get("matchLabels")
    problem = ""
    if not isinstance(match_labels, Mapping) or not match_labels:
        problem = f"spec.selector.matchLabels must be a non-empty map, got {match_labels!r}"
    elif unread := sorted(str(k) for k in match_labels if k not in POD_LABELS):
        problem = capped(
            f"spec.selector.matchLabels may name only {' and '.join(POD_LABELS)} (the pod "
            f"labels the agent keeps), got {', '.join(unread)}"
        )
    return ReplicaObservationSpec(
        namespace=namespace_of(obj),
        name=name_of(obj),
        generation=_int(_map(obj.get("metadata")).get("generation")),
        match_labels=_labels(match_labels),
        problem=problem,
    )
