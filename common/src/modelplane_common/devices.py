"""Devices as the API declares them: a pool's device kinds and a pod's device requests.

Read once at the edge, used by every function that reasons about devices:

    DeviceKind     one entry of an InferenceCluster's `nodePools[].devices[]`
                   (`{name, claim, deviceClassName, count, driver,
                   attributes, capacity}`), read by `read_device_kinds`.
    DeviceRequest  what ONE pod of a member claims: `count` devices matching
                   every CEL selector. A ModelDeployment's member names no
                   class (`nodeSelector.devices[]`, the scheduler resolves it
                   to a pool's kind); a ModelReplica's names it
                   (`deviceRequests[].deviceClassName`).
    DeviceView     the part of a device CEL can see (driver, attributes,
                   capacity), frozen and hashable, so identical devices
                   share one selector evaluation (`modelplane_common.cel`).

The matcher (`modelplane_common.cel.devices.match_requests`) takes these
types; nothing past the readers sees a device as a dict from the wire.

A pod's device requests are written as the requests of ONE ResourceClaim, and
kube-scheduler allocates a claim of at most `MAX_DEVICES_PER_CLAIM` devices:
both XRDs refuse a member whose counts sum past it, and both readers refuse
it again (`claim_limit_problem`) for a resource written before that rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from modelplane_common.inputs import problem, whole_number

DRA = "DRA"
SYNTHETIC = "Synthetic"

# A hashable, order-independent view of what a selector can see of a device: the
# driver, (name, type, value) attribute triples and (name, value) capacity pairs.
# A kind's name, count and claim mode are not visible to CEL and are not part of it,
# so identical device kinds in different pools or clusters share cache entries.
Attributes = tuple[tuple[str, str, Any], ...]
CapacityPairs = tuple[tuple[str, str], ...]
DeviceView = tuple[str, Attributes, CapacityPairs]

_ATTRIBUTE_TYPES = ("string", "int", "bool", "version")

# k8s.io/api resource/v1 `AllocationResultsMaxSize`: kube-scheduler refuses a
# ResourceClaim whose requests allocate more devices than this in total.
MAX_DEVICES_PER_CLAIM = 32
CLAIM_LIMIT_RULE = (
    f"the counts sum to at most {MAX_DEVICES_PER_CLAIM}: a pod's one ResourceClaim "
    f"allocates at most {MAX_DEVICES_PER_CLAIM} devices, and kube-scheduler refuses more"
)


@dataclass(frozen=True, slots=True)
class DeviceKind:
    """One kind of device a pool's nodes carry, `count` of it per node."""

    name: str
    claim: str  # DRA: claimed through a ResourceClaim and observed; Synthetic: never
    device_class: str  # deviceClassName; "" for a Synthetic kind
    count: int  # per node
    driver: str = ""
    # Normalised for CEL (sorted, each entry typed or marked invalid): see device_view.
    attributes: Attributes = ()
    capacity: CapacityPairs = ()

    @property
    def claimed(self) -> bool:
        """Whether a pod claims it (Synthetic kinds are matched for placement only)."""
        return self.claim != SYNTHETIC

    @property
    def view(self) -> DeviceView:
        return (self.driver, self.attributes, self.capacity)


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """What ONE pod claims: `count` devices matching every selector (CEL expressions).

    `device_class` is the ModelReplica's deviceClassName; a ModelDeployment's
    request has none until placement resolves it to a pool's kind.
    """

    name: str
    count: int
    selectors: tuple[str, ...] = ()
    device_class: str = ""


def claim_limit_problem(requests: Iterable[DeviceRequest], field: str) -> str | None:
    """The one-line problem when one pod's requests (`field`, its list) sum past
    MAX_DEVICES_PER_CLAIM devices: such a pod is never bound on any cluster."""
    counts = [r.count for r in requests]
    if sum(counts) <= MAX_DEVICES_PER_CLAIM:
        return None
    return problem(field, CLAIM_LIMIT_RULE, counts)


def _attribute_entry(name: str, raw: Any) -> tuple[str, str, Any]:
    if isinstance(raw, Mapping):
        present = [t for t in _ATTRIBUTE_TYPES if raw.get(t) is not None]
        if len(present) != 1 or len(raw) != 1:
            return (name, "invalid", repr(sorted(raw)))
        kind = present[0]
        value = raw[kind]
    elif isinstance(raw, bool):  # lenient: a bare scalar carries its own type
        kind, value = "bool", raw
    elif isinstance(raw, int):
        kind, value = "int", raw
    elif isinstance(raw, str):
        kind, value = "string", raw
    else:
        return (name, "invalid", repr(raw))
    expected = {"string": str, "version": str, "bool": bool, "int": int}[kind]
    if not isinstance(value, expected) or (kind == "int" and isinstance(value, bool)):
        return (name, "invalid", repr(value))
    return (name, kind, value)


def _capacity_entry(name: str, raw: Any) -> tuple[str, str]:
    value = raw.get("value") if isinstance(raw, Mapping) else raw  # lenient: bare quantity
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return (name, f"invalid:{value!r}")
    return (name, str(value) if not isinstance(value, float) else repr(value))


def device_view(device: Mapping) -> DeviceView:
    """What a selector can see of a device (`{driver, attributes, capacity}` on the wire:
    a pool's declared kind or a ResourceSlice's device), frozen and hashable.

    Malformed entries are kept, marked invalid: a selector that reads one
    does not match, one that does not read it is unaffected.
    """
    attributes = device.get("attributes")
    capacity = device.get("capacity")
    return (
        str(device.get("driver") or ""),
        tuple(
            sorted(
                _attribute_entry(str(n), v)
                for n, v in (attributes.items() if isinstance(attributes, Mapping) else ())
            )
        ),
        tuple(
            sorted(
                _capacity_entry(str(n), v)
                for n, v in (capacity.items() if isinstance(capacity, Mapping) else ())
            )
        ),
    )


def _count(value: object) -> int:
    """A kind's per-node count; anything but a whole number reads as 0 (nothing fits)."""
    whole = whole_number(value)
    return whole if whole is not None else 0


def read_device_kind(raw: Mapping) -> DeviceKind:
    """One declared device kind (`nodePools[].devices[]`); never raises."""
    driver, attributes, capacity = device_view(raw)
    return DeviceKind(
        name=str(raw.get("name", "")),
        # Verbatim: the schema allows DRA or Synthetic; anything else is claimed yet
        # never observed, exactly as the readers before this one treated it.
        claim=str(raw.get("claim", DRA)),
        device_class=str(raw.get("deviceClassName") or ""),
        count=_count(raw.get("count")),
        driver=driver,
        attributes=attributes,
        capacity=capacity,
    )


def read_device_kinds(devices: Iterable[object]) -> tuple[DeviceKind, ...]:
    """A pool's declared device kinds, in declared order; entries that are not objects
    are skipped (the InferenceCluster's schema forbids them)."""
    return tuple(read_device_kind(d) for d in devices if isinstance(d, Mapping))
