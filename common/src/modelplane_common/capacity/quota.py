"""Device quotas per namespace: the claimed devices of a namespace never exceed its quota.

The quota (design/tenancy.md, "Access and quotas")
    A Kubernetes ResourceQuota in the tenant's control-plane namespace, with
    the key Kubernetes itself uses to limit DRA devices per DeviceClass
    (k8s.io/api core/v1 `ResourceClaimsPerClass`):

        spec.hard["<deviceclass>.deviceclass.resource.k8s.io/devices"]: <count>

    Several ResourceQuotas in one namespace each constrain it, as the API
    server enforces them: the limit of a class is the smallest of them. A
    class no quota names is not limited. A value that is not a quantity is
    skipped with a note (the API server validates quantities, so it only
    reaches a function through a bug); a fractional one counts whole devices
    under it (2 devices exceed "1500m", as the API server compares them).

What a replica claims
    Per DeviceClass, over its engines: copies x the member's pods per copy x
    the request's count, for every claimed request (`devices_of`). A
    replica whose verdict is Overcommitted holds nothing (it is re-placed),
    nor does a released one (`Charge.released`: orphaned, or its pods
    refused past the grace; `Queued.admitted_charge` and `Queued.in_flight`).

Who counts what (one order every admission agrees on)
    The scheduler counts every replica of the namespace, fleet-wide, that is
    neither Overcommitted nor released, and charges each replica it places before trying the
    next. Admission (`replay`) is the commit point: it counts the namespace's
    Admitted replicas, then replays the in-flight ones ahead of the applicant
    in admission's queue order (`capacity.admission.queue_order`: placed-at,
    namespace, name), each taking its devices if they fit under the quota,
    and admits the applicant only if its devices still fit. Two deployments
    of one namespace that place at once therefore never exceed it together.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from modelplane_common.capacity.admission import Queued, queue_order
from modelplane_common.capacity.fleet import PlacedEngine
from modelplane_common.cel.errors import CelValueError
from modelplane_common.cel.quantity import Quantity
from modelplane_common.inputs import problem

# k8s.io/api core/v1 ResourceClaimsPerClass: "<class>" + this is a quota key.
DEVICE_CLASS_SUFFIX = ".deviceclass.resource.k8s.io/devices"
QUOTA_EXCEEDED = "QuotaExceeded"


def quota_key(device_class: str) -> str:
    return device_class + DEVICE_CLASS_SUFFIX


@dataclass(frozen=True, slots=True)
class Limit:
    hard: int
    source: str  # the ResourceQuota that sets it (the smallest, ties by name)


@dataclass(frozen=True, slots=True)
class DeviceQuota:
    """The most devices of each DeviceClass a namespace may claim; an absent class is free."""

    namespace: str
    limits: Mapping[str, Limit] = field(default_factory=dict)

    @property
    def limited(self) -> bool:
        return bool(self.limits)


def _hard(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return math.floor(Quantity.parse(str(value)).value)
    except CelValueError:
        return None


def read_device_quota(namespace: str, quotas: Iterable[Mapping]) -> tuple[DeviceQuota, list[str]]:
    """The namespace's device quota from its ResourceQuotas, and what reading them noted."""
    limits: dict[str, Limit] = {}
    notes: list[str] = []
    named = sorted(quotas, key=lambda q: str((q.get("metadata") or {}).get("name", "")))
    for quota in named:
        name = str((quota.get("metadata") or {}).get("name", ""))
        hard = (quota.get("spec") or {}).get("hard")
        for key, raw in sorted(hard.items() if isinstance(hard, Mapping) else ()):
            device_class = (
                key[: -len(DEVICE_CLASS_SUFFIX)] if key.endswith(DEVICE_CLASS_SUFFIX) else ""
            )
            if not device_class:
                continue  # not a device quota: not ours to enforce
            count = _hard(raw)
            if count is None:
                notes.append(
                    problem(f"ResourceQuota {name} spec.hard[{key}]", "must be a quantity", raw)
                )
                continue
            if device_class not in limits or count < limits[device_class].hard:
                limits[device_class] = Limit(count, name)
    return DeviceQuota(namespace, limits), notes


def devices_of(engines: Iterable[PlacedEngine]) -> Counter[str]:
    """What a replica claims, per DeviceClass."""
    claimed: Counter[str] = Counter()
    for engine in engines:
        for member in engine.members:
            for request in member.requests:
                claimed[request.device_class] += (
                    engine.copies * member.pods_per_copy * request.count
                )
    return claimed


@dataclass(frozen=True, slots=True)
class QuotaShortfall:
    """Why a replica does not fit under its namespace's quota."""

    namespace: str
    device_class: str
    limit: Limit
    used: int
    requested: int

    def message(self) -> str:
        return (
            f"namespace {self.namespace} quota {self.limit.source} allows "
            f"{self.limit.hard} {self.device_class} device(s): {self.used} used, "
            f"a replica requests {self.requested}"
        )


class QuotaLedger:
    """A namespace's claimed devices against its quota; the only state is what is charged."""

    def __init__(self, quota: DeviceQuota, used: Counter[str] | None = None) -> None:
        self.quota = quota
        self.used: Counter[str] = Counter(used or {})

    def shortfall(self, requested: Mapping[str, int]) -> QuotaShortfall | None:
        """The first class (by name) the request would take over its limit, or None."""
        for device_class in sorted(requested):
            limit = self.quota.limits.get(device_class)
            count = requested[device_class]
            if limit is not None and count and self.used[device_class] + count > limit.hard:
                return QuotaShortfall(
                    self.quota.namespace, device_class, limit, self.used[device_class], count
                )
        return None

    def charge(self, requested: Mapping[str, int]) -> None:
        self.used.update(requested)

    def release(self, requested: Mapping[str, int]) -> None:
        self.used.subtract(requested)


def claimed_devices(queued: Queued) -> Counter[str]:
    """What a queued replica asks a verdict for, per DeviceClass: all of it; while its
    growth is judged, only what its spec claims beyond the shape its verdict charged
    (the quota counts devices, not where they run)."""
    wanted = devices_of(queued.charge.engines)
    if queued.held is not None:
        wanted.subtract(devices_of(queued.held))
    return Counter({c: n for c, n in wanted.items() if n > 0})


def held_devices(queued: Queued) -> Counter[str]:
    """What a queued replica holds by a verdict, per DeviceClass (`Queued.admitted_charge`)."""
    held = queued.admitted_charge()
    return devices_of(held.engines) if held is not None else Counter()


def replay(
    mine: Queued, namespace_replicas: Sequence[Queued], quota: DeviceQuota
) -> QuotaShortfall | None:
    """Admission's quota check: None when `mine` fits under the quota behind the
    namespace's Admitted replicas and its in-flight ones placed before it.

    A replica whose spec grew past its verdict holds what that verdict charged
    and claims its growth in flight, at its growth's queue time; `mine`'s own
    held shape is charged before its growth is judged."""
    if not quota.limited:
        return None
    others = [q for q in namespace_replicas if q.key != mine.key]
    ledger = QuotaLedger(quota)
    for queued in others:
        ledger.charge(held_devices(queued))
    if mine.held is not None:
        ledger.charge(devices_of(mine.held))
    me = queue_order(mine)
    for queued in sorted(others, key=queue_order):
        if not queued.in_flight or queue_order(queued) >= me:
            continue
        wanted = claimed_devices(queued)
        if ledger.shortfall(wanted) is None:
            ledger.charge(wanted)
    return ledger.shortfall(claimed_devices(mine))
