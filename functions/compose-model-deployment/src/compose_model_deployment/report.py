"""What compose-model-deployment tells the user, as values: conditions, events, readiness.

Pure like the other functions' `decide`: a `Report` is built from the plan
(or, when nothing could be planned, from why) and the little
`readers.read_reported` read from the composite's own status;
`decision.plan` puts it in its outcome and `fn.py` only writes it onto the response
(`modelplane_common.respond.emit`, plus `desired.composite.ready`).

Conditions
    ReplicasScheduled  True/AllReplicasScheduled, False/WaitingForAdmission (placed
                       replicas their cluster has not admitted yet), False/InsufficientCapacity
                       (the no-fit diagnosis, modelplane_common.capacity.diagnosis), False/
                       QuotaExceeded (the same, when the namespace's device quota refused a
                       pool: the message adds the quota, the used and the requested), False/
                       ClusterUnavailable (replicas held, absence.py), or the
                       reason a pass kept everything as it is.
    ReplicasReady      readiness.py's judgement; the same judgement is `ready`.
    InputsValid        False/DegradedInputs listing the input problems.
    PodsCreated        True/PodsCreated; False/Creating while a replica's workload
                       cluster has not created its pods yet, with that cluster's
                       reason; False/NotCreated while a replica was given up on for
                       it (released, or re-placed: a failed placement remembered
                       for avoidFor), with the reason (modelplane_common.pods_created).
Events
    One per placed, moved, updated, held, stranded and removed replica and per
    healing; an InsufficientCapacity (or QuotaExceeded) warning only when the
    scheduled count changed; one warning per replica kept on a cluster that no
    longer takes the deployment (access, a reserved namespace, an unapproved
    priority class: usable.py); at most MAX_NOTE_EVENTS input problems.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from modelplane_common import pods_created
from modelplane_common.capacity.diagnosis import NOTHING_CHECKED
from modelplane_common.capacity.quota import QUOTA_EXCEEDED
from modelplane_common.outcome import MAX_MESSAGE, Condition, Event, capped

from compose_model_deployment import readiness
from compose_model_deployment.placement import PODS_NOT_CREATED, Change, Plan, PlannedReplica

SCHEDULED = "ReplicasScheduled"
READY = "ReplicasReady"
INPUTS = "InputsValid"
CREATED = pods_created.TYPE
MAX_NOTE_EVENTS = 5
# Room left in InputsValid's message for its "N problem(s): " prefix.
_NOTES_ROOM = MAX_MESSAGE - 34


@dataclass(frozen=True, slots=True)
class Report:
    conditions: tuple[Condition, ...]
    events: tuple[Event, ...]
    ready: bool  # the deployment's own Ready, the same judgement as ReplicasReady


def _ready(judged: readiness.Readiness) -> Condition:
    return Condition(
        type=READY,
        status="True" if judged.ready else "False",
        reason=judged.reason,
        message=judged.message,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class NothingPlanned:
    """Why a pass planned nothing, as `ReplicasScheduled` says it."""

    desired: int | None  # spec.replicas when readable
    status: str  # ReplicasScheduled's status
    reason: str
    message: str
    needs_action: bool  # whether a person has to act (a Warning event)


def kept_as_is(why: NothingPlanned, *, kept: int, kept_ready: int, was_ready: bool) -> Report:
    """Nothing was planned: every observed replica is kept; say why."""
    if why.desired is None:
        judged = readiness.carried(was_ready, kept, kept_ready)
    else:
        judged = readiness.of_replicas(why.desired, kept_ready)
    events = (Event("Warning", f"{why.reason}: {why.message}"),) if why.needs_action else ()
    return Report(
        (
            Condition(type=SCHEDULED, status=why.status, reason=why.reason, message=why.message),
            _ready(judged),
        ),
        events,
        judged.ready,
    )


def _why_unplaced(plan: Plan) -> str:
    """The plan's no-fit diagnosis as text, formatted here and nowhere else."""
    return (plan.diagnosis or NOTHING_CHECKED).summary()


def _unplaced_reason(plan: Plan) -> str:
    """QuotaExceeded when the namespace's quota refused a pool, else InsufficientCapacity."""
    if plan.diagnosis is not None and plan.diagnosis.quota is not None:
        return QUOTA_EXCEEDED
    return "InsufficientCapacity"


def _shortfall(plan: Plan) -> str:
    """`ReplicasScheduled`'s message and its event when capacity is short."""
    return capped(f"{plan.scheduled} of {plan.desired} replicas placed: {_why_unplaced(plan)}")


def _judge_readiness(plan: Plan, was_ready: bool) -> readiness.Readiness:
    if not plan.held:
        return readiness.of_replicas(plan.desired, plan.ready)
    held_ready = sum(1 for r in plan.held if r.previous is not None and r.previous.ready)
    return readiness.while_held(was_ready, plan.desired, plan.ready, len(plan.held), held_ready)


def _scheduled(plan: Plan) -> Condition:
    if plan.held:
        whys = sorted({r.why for r in plan.held})
        unplaced = plan.missing - len(plan.held)
        unplaced_text = (
            f"; {unplaced} more could not be placed: {_why_unplaced(plan)}" if unplaced > 0 else ""
        )
        return Condition(
            type=SCHEDULED,
            status="False",
            reason="ClusterUnavailable",
            message=capped(
                f"{len(plan.held)} replica(s) kept where they are, not counted as scheduled: "
                f"{'; '.join(whys)}; {plan.scheduled} of {plan.desired} placed{unplaced_text}"
            ),
        )
    if plan.missing and plan.missing == len(plan.waiting):
        return Condition(
            type=SCHEDULED,
            status="False",
            reason="WaitingForAdmission",
            message=f"{len(plan.waiting)} replica(s) placed and waiting for their cluster to admit "
            f"them; {plan.scheduled} of {plan.desired} scheduled",
        )
    if plan.missing:
        return Condition(
            type=SCHEDULED, status="False", reason=_unplaced_reason(plan), message=_shortfall(plan)
        )
    return Condition(
        type=SCHEDULED,
        status="True",
        reason="AllReplicasScheduled",
        message=f"{plan.scheduled} of {plan.desired} replicas placed{_kept_on_refusing(plan)}",
    )


def _kept_on_refusing(plan: Plan) -> str:
    """`; <k> on a cluster that ...` per reason, for replicas kept on clusters that no
    longer take the deployment (usable.py), in the order of the first replica of each."""
    kept = Counter(plan.refusals[r.cluster].kept_on for r in plan.unadmitted)
    return "".join(f"; {count} {where}" for where, count in kept.items())


def _created(plan: Plan) -> Condition:
    """Whether any replica lacks pods its workload cluster refused, and that cluster's reason."""
    # One line per replica and cluster, not per pool it was remembered for.
    given_up = list(
        dict.fromkeys(
            f"replica {f.replica} on {f.cluster}: {f.reason}"
            for f in plan.failed_placements
            if f.reason.startswith(PODS_NOT_CREATED)
        )
    )
    if given_up:
        return Condition(CREATED, "False", pods_created.NOT_CREATED, capped("; ".join(given_up)))
    creating = [
        f"replica {r.name}: {r.previous.pods_created.message}"
        for r in plan.replicas
        if r.previous is not None and r.previous.pods_created.reason == pods_created.CREATING
    ]
    if creating:
        return Condition(CREATED, "False", pods_created.CREATING, capped("; ".join(creating)))
    return Condition(
        CREATED, "True", pods_created.CREATED, "no replica lacks pods its cluster refused"
    )


def _inputs(notes: Sequence[str]) -> Condition:
    if notes:
        return Condition(
            type=INPUTS,
            status="False",
            reason="DegradedInputs",
            message=f"{len(notes)} problem(s): " + "; ".join(notes)[:_NOTES_ROOM],
        )
    return Condition(type=INPUTS, status="True", reason="InputsValid", message="")


def _where(cluster: str, pools: tuple[str, ...]) -> str:
    return f"{cluster}/{','.join(pools)}"


def _replica_event(r: PlannedReplica) -> Event | None:
    """What one planned replica's change says; None for a replica kept as it was."""
    if r.change is Change.PLACED:
        return Event("Normal", f"placed replica {r.name} on {_where(r.cluster, r.pools)}")
    if r.change is Change.MOVED and r.previous is not None:
        return Event(
            "Normal",
            f"moved replica {r.name} from {_where(r.previous.cluster, r.previous.pools)} to "
            f"{_where(r.cluster, r.pools)}: {r.why}",
        )
    if r.change is Change.RESHAPED and r.previous is not None:
        return Event(
            "Normal",
            f"updated replica {r.name} on {_where(r.cluster, r.pools)} for the edited engine shape",
        )
    if r.change is Change.HELD:
        return Event("Warning", f"replica {r.name} is kept on {r.cluster}: {r.why}")
    if r.change is Change.STRANDED:
        return Event(
            "Warning",
            f"replica {r.name} must move ({r.why}) but no other cluster "
            "fits it; it is left where it is",
        )
    return None


def _note_events(notes: Sequence[str]) -> list[Event]:
    events = [Event("Warning", note) for note in notes[:MAX_NOTE_EVENTS]]
    if len(notes) > MAX_NOTE_EVENTS:
        events.append(Event("Warning", f"and {len(notes) - MAX_NOTE_EVENTS} more input problem(s)"))
    return events


def _events(plan: Plan, previous_scheduled: object, notes: Sequence[str]) -> list[Event]:
    events = [
        Event(
            "Warning",
            f"replica {healed.replica} {healed.why}; avoiding "
            f"{_where(healed.cluster, healed.pools)} and re-placing it",
        )
        for healed in plan.healed
    ]
    events.extend(e for e in map(_replica_event, plan.replicas) if e is not None)
    events.extend(
        Event("Normal", f"removed replica {gone.name} from {gone.cluster} (scale down)")
        for gone in plan.removed
    )
    events.extend(
        Event(
            "Warning",
            f"replica {r.name} runs on {r.cluster}, {plan.refusals[r.cluster].runs_on}: it "
            "keeps running there, no new replica goes there, and scale-down removes it first",
        )
        for r in plan.unadmitted
    )
    if plan.missing > len(plan.held) + len(plan.waiting) and previous_scheduled != plan.scheduled:
        events.append(Event("Warning", f"{_unplaced_reason(plan)}: {_shortfall(plan)}"))
    events.extend(_note_events(notes))
    return events


def of_plan(
    plan: Plan, *, previous_scheduled: object, was_ready: bool, notes: Sequence[str]
) -> Report:
    """The conditions and events of a pass that planned.

    `previous_scheduled` is the composite's last `status.replicas.scheduled`
    (any value: it is only compared), `was_ready` its last `Ready`.
    """
    judged = _judge_readiness(plan, was_ready)
    return Report(
        (_scheduled(plan), _ready(judged), _inputs(notes), _created(plan)),
        tuple(_events(plan, previous_scheduled, notes)),
        judged.ready,
    )
