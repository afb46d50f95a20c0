"""Admission as the wire records it: what the scheduler and the replica both read.

compose-model-replica decides whether its replica may start (design/admission.md);
this module is the shared vocabulary of that verdict, so the scheduler reads
it exactly as the replica wrote it.

The record
    `status.admission` of a ModelReplica: `{placedAt, verdict, decidedAt,
    message}`.
    `placedAt` is the `modelplane.ai/placed-at` annotation the verdict is for,
    verbatim; `verdict` is `Admitted` or `Overcommitted`; `decidedAt` is when
    it was decided (control-plane clock). A verdict binds only the placement
    it names: when the scheduler moves the replica it stamps a new placed-at,
    and the recorded verdict no longer applies.

A queued replica
    `Queued` is one ModelReplica of a cluster as admission sees it: its
    charge, when it was placed (the annotation, else its creationTimestamp)
    and the verdict recorded for its current placement, if any. The queue
    order is (placed-at, namespace, name): every replica of a cluster that
    reads the same replicas computes the same order.

The placement time
    The scheduler stamps `placed-at` to the microsecond
    (`timeutil.format_placement_time`); a stamp to the second, as written
    before, reads the same. A stamp is believed only inside
    [creationTimestamp - PLACEMENT_SKEW, now + PLACEMENT_SKEW]: the
    scheduler stamps it just before Crossplane creates the replica, so a
    stamp far older than the object (or from the future) is forged or from
    a skewed clock, and would let the replica jump its cluster's queue. Such
    a replica is queued at its creationTimestamp instead, and the replica
    itself reports the value (`PlacementTime.replaced`). The annotation stays
    the key a verdict binds to (`Record.binds`): only the queue time changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from google.protobuf import struct_pb2

from modelplane_common import labels
from modelplane_common.capacity.fleet import Charge
from modelplane_common.capacity.readers import get_str, get_struct, read_charge
from modelplane_common.inputs import problem
from modelplane_common.outcome import capped
from modelplane_common.timeutil import format_time, parse_time_or_none

CONDITION = "Admitted"
ADMITTED = "Admitted"
WAITING = "WaitingForAdmission"
OVERCOMMITTED = "Overcommitted"
VERDICTS = (ADMITTED, OVERCOMMITTED)

STATUS_FIELD = "admission"

# How far a placed-at may lie before its replica's creationTimestamp, or after
# `now`, and still be believed: Crossplane's apply latency after the stamp (11 s
# measured in the e2e burst on a loaded machine) plus clock skew between the
# function that stamped it, the API server and the function reading it
# (design/admission.md, "The placement time").
PLACEMENT_SKEW = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class Record:
    """A decided verdict, for the placement it names."""

    placed_at: str
    verdict: str
    decided_at: datetime | None = None
    message: str = ""  # why, for an Overcommitted verdict: the pool and the shortfall

    def binds(self, placement: str) -> bool:
        return bool(placement) and self.placed_at == placement

    def to_wire(self) -> dict:
        wire: dict = {"placedAt": self.placed_at, "verdict": self.verdict}
        if self.decided_at is not None:
            wire["decidedAt"] = format_time(self.decided_at)
        if self.message:
            wire["message"] = capped(self.message)
        return wire


def record_from_status(status: Mapping) -> Record | None:
    """The recorded verdict in a status dict; None when absent or malformed."""
    raw = status.get(STATUS_FIELD)
    if not isinstance(raw, Mapping):
        return None
    placed_at, verdict = raw.get("placedAt"), raw.get("verdict")
    if not isinstance(placed_at, str) or verdict not in VERDICTS:
        return None
    message = raw.get("message")
    return Record(
        placed_at=placed_at,
        verdict=str(verdict),
        decided_at=parse_time_or_none(raw.get("decidedAt")),
        message=message if isinstance(message, str) else "",
    )


def placement_annotation(metadata: Mapping) -> str:
    """The raw `modelplane.ai/placed-at` annotation, "" when there is none."""
    annotations = metadata.get("annotations")
    value = annotations.get(labels.PLACED_AT) if isinstance(annotations, Mapping) else None
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class Queued:
    """One ModelReplica of a cluster, as admission orders and charges it."""

    charge: Charge
    placed_at: datetime | None  # None: no readable placement time; ordered last
    verdict: str | None = None  # recorded for its current placement

    @property
    def key(self) -> tuple[str, str]:
        return (self.charge.namespace, self.charge.name)


_NEVER = datetime.max.replace(tzinfo=UTC)


def queue_order(queued: Queued) -> tuple[datetime, str, str]:
    """Placed earlier first, then namespace, then name; unreadable placements last."""
    return (queued.placed_at or _NEVER, *queued.key)


@dataclass(frozen=True, slots=True)
class PlacementTime:
    """When a replica is queued, and why its placed-at was not believed, if it was not."""

    at: datetime | None  # None: no readable time; ordered last
    replaced: str | None = None  # the one-line report naming the stamp that was replaced


def placement_time(placement: str, created: datetime | None, now: datetime) -> PlacementTime:
    """The queue time of a replica: its placed-at when plausible, else its creationTimestamp.

    A malformed placed-at has no time (reported by the replica as malformed);
    no annotation at all is the creationTimestamp, as before placed-at existed.
    """
    if not placement:
        return PlacementTime(created)
    stamped = parse_time_or_none(placement)
    if stamped is None:
        return PlacementTime(None)
    too_early = created is not None and stamped < created - PLACEMENT_SKEW
    if not too_early and stamped <= now + PLACEMENT_SKEW:
        return PlacementTime(stamped)
    skew = int(PLACEMENT_SKEW.total_seconds())
    instead = f"at its creationTimestamp {format_time(created)}" if created else "last"
    reason = f"outside [creationTimestamp - {skew}s, now + {skew}s]: queued {instead} instead"
    return PlacementTime(
        created, problem(f'metadata.annotations["{labels.PLACED_AT}"]', reason, placement)
    )


def _struct_to_plain(struct: struct_pb2.Struct | None) -> dict:
    if struct is None:
        return {}
    return {key: value.string_value for key, value in struct.fields.items()}


def read_placement_time(resource: struct_pb2.Struct, now: datetime) -> PlacementTime:
    """`placement_time` of a ModelReplica Struct."""
    meta = get_struct(resource, "metadata")
    annotations = _struct_to_plain(get_struct(meta, "annotations") if meta is not None else None)
    created = parse_time_or_none(get_str(meta, "creationTimestamp"))
    return placement_time(annotations.get(labels.PLACED_AT, ""), created, now)


def read_queued(resource: struct_pb2.Struct, cluster: str, now: datetime) -> Queued:
    """A ModelReplica Struct as admission sees it (straight from the Struct, as the
    scheduler reads the fleet: thousands of replicas are never converted to dicts)."""
    meta = get_struct(resource, "metadata")
    identity = (get_str(meta, "namespace"), get_str(meta, "name"))
    charge = read_charge(resource, identity, cluster)
    annotations = _struct_to_plain(get_struct(meta, "annotations") if meta is not None else None)
    placement = annotations.get(labels.PLACED_AT, "")
    created = parse_time_or_none(get_str(meta, "creationTimestamp"))
    placed_at = placement_time(placement, created, now).at
    return Queued(charge, placed_at, recorded_verdict(resource, placement))


def recorded_verdict(resource: struct_pb2.Struct, placement: str | None = None) -> str | None:
    """The verdict a ModelReplica Struct records for its current placement, if any."""
    if placement is None:
        meta = get_struct(resource, "metadata")
        annotations = _struct_to_plain(
            get_struct(meta, "annotations") if meta is not None else None
        )
        placement = annotations.get(labels.PLACED_AT, "")
    status = get_struct(resource, "status")
    admission = get_struct(status, STATUS_FIELD) if status is not None else None
    if admission is None:
        return None
    verdict = get_str(admission, "verdict")
    if verdict not in VERDICTS or not placement or get_str(admission, "placedAt") != placement:
        return None
    return verdict
