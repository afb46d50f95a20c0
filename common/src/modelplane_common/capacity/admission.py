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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from google.protobuf import struct_pb2

from modelplane_common import labels
from modelplane_common.capacity.fleet import Charge
from modelplane_common.capacity.readers import get_str, get_struct, read_charge
from modelplane_common.outcome import capped
from modelplane_common.timeutil import format_time, parse_time_or_none

CONDITION = "Admitted"
ADMITTED = "Admitted"
WAITING = "WaitingForAdmission"
OVERCOMMITTED = "Overcommitted"
VERDICTS = (ADMITTED, OVERCOMMITTED)

STATUS_FIELD = "admission"


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


def _struct_to_plain(struct: struct_pb2.Struct | None) -> dict:
    if struct is None:
        return {}
    return {key: value.string_value for key, value in struct.fields.items()}


def read_queued(resource: struct_pb2.Struct, cluster: str) -> Queued:
    """A ModelReplica Struct as admission sees it (straight from the Struct, as the
    scheduler reads the fleet: thousands of replicas are never converted to dicts)."""
    meta = get_struct(resource, "metadata")
    identity = (get_str(meta, "namespace"), get_str(meta, "name"))
    charge = read_charge(resource, identity, cluster)
    annotations = _struct_to_plain(get_struct(meta, "annotations") if meta is not None else None)
    placement = annotations.get(labels.PLACED_AT, "")
    placed_at = (
        parse_time_or_none(placement)
        if placement
        else parse_time_or_none(get_str(meta, "creationTimestamp"))
    )
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
