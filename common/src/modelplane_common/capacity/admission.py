"""Admission as the wire records it: what the scheduler and the replica both read.

compose-model-replica decides whether its replica may start (design/admission.md);
this module is the shared vocabulary of that verdict, so the scheduler reads
it exactly as the replica wrote it.

The record
    `status.admission` of a ModelReplica: `{placedAt, verdict, decidedAt,
    message, charged, grownAt}`.
    `placedAt` is the `modelplane.ai/placed-at` annotation the verdict is for,
    verbatim; `verdict` is `Admitted` or `Overcommitted`; `decidedAt` is when
    it was decided (control-plane clock). A verdict binds only the placement
    it names: when the scheduler moves the replica it stamps a new placed-at,
    and the recorded verdict no longer applies.
    `charged` is the shape an Admitted verdict charged (`charged.engines`,
    in the wire form of `spec.engines`, reduced to what capacity and quota
    count), and an Admitted verdict binds only a shape it covers (`covers`):
    every engine of the spec is one the verdict charged, with no more
    copies, the same members on the same pools, no more pods per copy and no
    more devices per request. A shrink is still bound (the record is
    lowered to the new shape on the replica's next pass); a growth is not:
    the replica is judged again for it, and until then it keeps running,
    and is charged, as its verdict charged (`Queued.held`). `grownAt` is
    when the replica first saw its growth: its queue time for the growth.
    A record without `charged` was written before shapes were recorded: it
    binds the shape the replica has (it was judged under the old rule, and
    running work is never revoked), and the replica records that shape on
    its next pass.

A queued replica
    `Queued` is one ModelReplica of a cluster as admission sees it: its
    charge, when it was placed (the annotation, else its creationTimestamp)
    and the verdict recorded for its current placement, if any. The queue
    order is (placed-at, namespace, name): every replica of a cluster that
    reads the same replicas computes the same order.
    A replica whose spec grew past its Admitted verdict is two things at
    once: its `held` shape (what the verdict charged) is charged as
    Admitted, and its growth (`growth`) is in flight, queued at its
    `grownAt` (ordered last until that is recorded). So no replay ever
    charges it less than it runs, and its growth never jumps the queue: it
    is behind every replica placed before the growth was seen.
    A released replica (PodsCreated False/Orphaned, or False/NotCreated
    past its grace: `modelplane_common.pods_created.released`) holds
    nothing in any replay, neither as Admitted nor in flight, whatever its
    verdict, its growth or its `modelplane.ai/charge` label: an orphan
    keeps the label its deployment last wrote, and either way it is not
    charged (`counted`: not read; `pending`: read, and released). A
    NotCreated condition left from a previous placement is rewritten
    (NotObserved) on the replica's first pass after it moved, well inside
    the commit delay every replica placed after it waits (compose-model-
    replica's `admission.COMMIT_DELAY`).

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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from google.protobuf import struct_pb2

from modelplane_common import labels
from modelplane_common.capacity.fleet import Charge, PlacedEngine, PlacedMember, Role
from modelplane_common.capacity.readers import (
    get_str,
    get_struct,
    read_charge,
    read_engines,
)
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


# --- the shape a verdict charged ---------------------------------------------------------------


def _per_copy_covers(held: PlacedEngine, engine: PlacedEngine) -> bool:
    """Whether one copy of `engine` claims no more than one copy of `held`: the same
    members on the same pools, no more pods each, every request one `held` makes
    with no larger count."""
    for member in engine.members:
        was = next((m for m in held.members if m.role == member.role), None)
        if was is None or was.pool != member.pool or member.pods_per_copy > was.pods_per_copy:
            return False
        counts = {(r.name, r.device_class): r.count for r in was.requests}
        for request in member.requests:
            if request.count > counts.get((request.name, request.device_class), 0):
                return False
    return True


def covers(held: Sequence[PlacedEngine], engines: Iterable[PlacedEngine]) -> bool:
    """Whether a verdict that charged `held` covers the shape `engines`: every engine
    is one it charged, with no more copies and no larger copy (a shrink is covered)."""
    by_name = {e.name: e for e in held}
    for engine in engines:
        was = by_name.get(engine.name)
        if was is None or engine.copies > was.copies or not _per_copy_covers(was, engine):
            return False
    return True


def growth(
    held: Sequence[PlacedEngine], engines: Iterable[PlacedEngine]
) -> tuple[PlacedEngine, ...]:
    """What `engines` claims beyond `held`, engine by engine, as capacity places it.

    An engine whose copies are no larger adds only its extra copies (the
    running ones stay where they are); an engine that is new, or whose copy
    grew (more pods per copy, more devices, another pool), is claimed whole:
    its pods are replaced, and the new ones need room beside the old ones
    while they roll out.
    """
    by_name = {e.name: e for e in held}
    grown: list[PlacedEngine] = []
    for engine in engines:
        was = by_name.get(engine.name)
        if was is not None and _per_copy_covers(was, engine):
            if engine.copies > was.copies:
                grown.append(replace(engine, copies=engine.copies - was.copies))
        else:
            grown.append(engine)
    return tuple(grown)


def shape_to_wire(engines: Iterable[PlacedEngine]) -> dict:
    """`status.admission.charged`: the engines in the wire form of `spec.engines`,
    reduced to what capacity and quota count (read back by `read_engines`)."""

    def member(m: PlacedMember) -> dict:
        wire: dict = {
            "role": str(m.role),
            "nodePoolName": m.pool,
            "deviceRequests": [
                {"name": r.name, "deviceClassName": r.device_class, "count": r.count}
                for r in m.requests
            ],
        }
        if m.role == Role.WORKER:
            wire["worker"] = {"nodes": m.pods_per_copy}
        return wire

    return {
        "engines": [
            {"name": e.name, "copies": e.copies, "members": [member(m) for m in e.members]}
            for e in engines
        ]
    }


def _shape_from_wire(raw: object) -> tuple[PlacedEngine, ...] | None:
    """A recorded `charged`; None when absent or not an object (read as a record from
    before shapes were recorded: the replica records its shape on its next pass)."""
    if not isinstance(raw, Mapping):
        return None
    struct = struct_pb2.Struct()
    try:
        struct.update(raw)
    except (TypeError, ValueError):
        return None
    return read_engines(struct)


# --- the record ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """A decided verdict, for the placement it names (and, if Admitted, the shape it charged)."""

    placed_at: str
    verdict: str
    decided_at: datetime | None = None
    message: str = ""  # why, for an Overcommitted verdict: the pool and the shortfall
    # What an Admitted verdict charged; None: recorded before shapes were (binds any shape).
    charged: tuple[PlacedEngine, ...] | None = None
    # When a growth past `charged` was first seen: the growth's queue time. None: none seen.
    grown_at: datetime | None = None

    def names(self, placement: str) -> bool:
        """Whether it is the verdict for this placement (whatever the shape)."""
        return bool(placement) and self.placed_at == placement

    def binds(self, placement: str, engines: Iterable[PlacedEngine]) -> bool:
        """Whether it is the verdict for this placement and this shape: an Overcommitted
        verdict binds its placement; an Admitted one only a shape it covers."""
        if not self.names(placement):
            return False
        return self.verdict != ADMITTED or self.charged is None or covers(self.charged, engines)

    def grew(self, placement: str, engines: Iterable[PlacedEngine]) -> bool:
        """Admitted for this placement, but for a smaller shape than `engines`."""
        return (
            self.verdict == ADMITTED
            and self.names(placement)
            and not self.binds(placement, engines)
        )

    def to_wire(self) -> dict:
        wire: dict = {"placedAt": self.placed_at, "verdict": self.verdict}
        if self.decided_at is not None:
            wire["decidedAt"] = format_time(self.decided_at)
        if self.message:
            wire["message"] = capped(self.message)
        if self.charged is not None:
            wire["charged"] = shape_to_wire(self.charged)
        if self.grown_at is not None:
            wire["grownAt"] = format_time(self.grown_at)
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
        charged=_shape_from_wire(raw.get("charged")),
        grown_at=parse_time_or_none(raw.get("grownAt")),
    )


def placement_annotation(metadata: Mapping) -> str:
    """The raw `modelplane.ai/placed-at` annotation, "" when there is none."""
    annotations = metadata.get("annotations")
    value = annotations.get(labels.PLACED_AT) if isinstance(annotations, Mapping) else None
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class Queued:
    """One ModelReplica of a cluster, as admission orders and charges it."""

    charge: Charge  # its spec's shape
    placed_at: datetime | None  # None: no readable placement time; ordered last
    verdict: str | None = None  # recorded for its current placement (and shape)
    # Grown past its Admitted verdict: the shape that verdict charged (verdict is None:
    # the growth is in flight, and `placed_at` is when the growth was seen).
    held: tuple[PlacedEngine, ...] | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.charge.namespace, self.charge.name)

    @property
    def released(self) -> bool:
        """It holds nothing, whatever its verdict says: orphaned, or its pods refused past
        the grace (`Charge.released`, read by `modelplane_common.pods_created.released`)."""
        return self.charge.released

    @property
    def in_flight(self) -> bool:
        """No verdict binds its placement and shape, and it is not released: it (or its
        growth) waits for one. A released replica waits for nothing: an orphan is never
        judged again, and a refused one is re-placed by its deployment."""
        return self.verdict is None and not self.released

    def admitted_charge(self) -> Charge | None:
        """What it holds by a verdict: all of it when Admitted, its held shape while its
        growth is in flight, nothing otherwise (nor when it is released)."""
        if self.released:
            return None
        if self.held is not None:
            return replace(self.charge, engines=self.held)
        return self.charge if self.verdict == ADMITTED else None

    def claim(self) -> Charge:
        """What it asks a verdict for: its growth past its held shape (no pod of which
        runs yet, so no histogram contains it), else all of it."""
        if self.held is not None:
            grown = growth(self.held, self.charge.engines)
            return replace(self.charge, engines=grown, pods_scheduled=False, scheduled_at=None)
        return self.charge


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
    record = _struct_record(resource, placement)
    if record is None:
        return Queued(charge, placed_at)
    if not record.grew(placement, charge.engines):
        charged = record.charged if record.verdict == ADMITTED else None
        # A shrink not yet recorded is charged what its verdict charged, until it is.
        held_charge = replace(charge, engines=charged) if charged is not None else charge
        return Queued(held_charge, placed_at, record.verdict)
    assert record.charged is not None  # grew() needs a recorded shape
    # The growth is queued when it was seen, never before its placement; unseen yet: last.
    grown_at = record.grown_at
    if grown_at is not None and placed_at is not None:
        grown_at = max(grown_at, placed_at)
    return Queued(charge, grown_at, None, record.charged)


def _struct_record(resource: struct_pb2.Struct, placement: str) -> Record | None:
    """The verdict a ModelReplica Struct records for `placement`, with the shape it
    charged; None when there is none for it."""
    found = _admission_for(resource, placement)
    if found is None:
        return None
    admission, verdict = found
    charged = get_struct(admission, "charged")
    return Record(
        placed_at=placement,
        verdict=verdict,
        charged=read_engines(charged) if charged is not None else None,
        grown_at=parse_time_or_none(get_str(admission, "grownAt")),
    )


def recorded_verdict(resource: struct_pb2.Struct, placement: str | None = None) -> str | None:
    """The verdict a ModelReplica Struct records for its current placement, if any."""
    if placement is None:
        meta = get_struct(resource, "metadata")
        annotations = _struct_to_plain(
            get_struct(meta, "annotations") if meta is not None else None
        )
        placement = annotations.get(labels.PLACED_AT, "")
    found = _admission_for(resource, placement)
    return found[1] if found is not None else None


def _admission_for(
    resource: struct_pb2.Struct, placement: str
) -> tuple[struct_pb2.Struct, str] | None:
    """A ModelReplica Struct's `status.admission` and its verdict, when it is a verdict
    for `placement`; None otherwise."""
    status = get_struct(resource, "status")
    admission = get_struct(status, STATUS_FIELD) if status is not None else None
    if admission is None:
        return None
    verdict = get_str(admission, "verdict")
    if verdict not in VERDICTS or not placement or get_str(admission, "placedAt") != placement:
        return None
    return admission, verdict
