"""Admission: may this replica start, behind every replica of its cluster placed before it?

The scheduler is stateless and reads the fleet from a cache, so two
deployments that reconcile at once can both place a replica on the last
free nodes. Admission is the commit point (design/admission.md): before a
replica composes any workload, it replays its cluster's queue with the
scheduler's own capacity rules (`modelplane_common.capacity`) and starts
only if it still fits.

Model
    The pools' capacity is built exactly as the scheduler builds it (rules
    1-2 of design/api.md section 6), minus every ADMITTED replica of the
    cluster (charged as the scheduler charges them: not at all once the
    histogram contains them). Then the IN-FLIGHT replicas (no verdict for
    their current placement) are replayed in queue order (placed-at, then
    namespace, then name): each takes its engines all or nothing if they
    fit, and is skipped if not (it will find itself Overcommitted by the
    same replay). The replica being judged is admitted when its engines fit
    after every in-flight replica ahead of it.

Invariants
    - Every replica of a cluster that reads the same replicas replays the
      same queue in the same order, so of two replicas competing for the
      last node exactly the one ahead is admitted. The verdict does not
      depend on the order the inputs arrive in (tests/property).
    - Nothing is admitted on a guess: a replica younger than `COMMIT_DELAY`, or
      whose cluster, spec or fellow replicas cannot be read, waits.
    - A verdict binds its placement and is sticky: once Admitted (or
      Overcommitted) for a placed-at, it stays so until the scheduler
      places the replica anew.
    - A replica whose workloads already exist is admitted: admission never
      takes running work away (a replica composed before admission existed,
      or one whose status was lost).

The replay runs on the scheduler's own per-pass cache of pool ledgers
(`modelplane_common.capacity.pools.PoolLedgers`), charged with the cluster's
admitted replicas.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from modelplane_common.capacity.admission import (
    ADMITTED,
    OVERCOMMITTED,
    WAITING,
    Queued,
    Record,
    queue_order,
)
from modelplane_common.capacity.diagnosis import Cause
from modelplane_common.capacity.fit import PoolLedger
from modelplane_common.capacity.fleet import Charge, Cluster, PlacedEngine, Pool, PoolKey
from modelplane_common.capacity.pools import PoolLedgers, engine_pods, place_engine, shortage

# Longer than the time from the scheduler stamping placed-at to the replica
# being in every other replica's required resources (Crossplane applies it
# within the same reconcile, its cache sees it under a second; the issue's
# simulation assumed up to 5 s), with room for clock skew between function
# replicas. design/admission.md, "Commit delay".
COMMIT_DELAY = timedelta(seconds=10)

# A replica that runs at the shape its verdict charged while its growth is not admitted.
GROWTH_NOT_ADMITTED = "GrowthNotAdmitted"
# How soon a growth that did not fit is judged again (its queue place is kept).
GROWTH_RETRY = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class Applicant:
    """The replica being judged, as admission reads it."""

    queued: Queued  # this replica, as its fellow replicas read it
    placement: str  # the raw modelplane.ai/placed-at annotation
    previous: Record | None  # the verdict its status records, if any
    has_workloads: bool  # an engine Object of it already exists
    problem: str | None = None  # why it cannot be judged yet (its spec, its placement time)
    shape: tuple[PlacedEngine, ...] = ()  # its spec's engines, as capacity and quota count them

    @property
    def growing(self) -> bool:
        """Admitted for its placement, but its spec claims more than that verdict charged."""
        return self.previous is not None and self.previous.grew(self.placement, self.shape)

    @property
    def decided(self) -> bool:
        """Whether a verdict needs no replay: the recorded one binds its placement and
        shape, or its workloads exist and no verdict for this placement says otherwise."""
        previous = self.previous
        if previous is not None and previous.binds(self.placement, self.shape):
            return True
        return self.has_workloads and not self.growing


@dataclass(frozen=True, slots=True)
class AdmissionVerdict:
    reason: str  # ADMITTED, WAITING, OVERCOMMITTED or GROWTH_NOT_ADMITTED
    message: str
    record: Record | None = None  # what status.admission says; None while waiting
    retry_after: timedelta | None = None  # in its commit delay: when to look again
    refused: bool = False  # a growth judged and found short: a person may have to act

    @property
    def status(self) -> str:
        return "True" if self.reason in (ADMITTED, GROWTH_NOT_ADMITTED) else "False"

    @property
    def holding(self) -> bool:
        """Admitted at the shape its verdict charged, its growth not: its workloads are
        kept as they run."""
        return self.reason == GROWTH_NOT_ADMITTED

    @property
    def admitted(self) -> bool:
        return self.reason == ADMITTED


@dataclass(frozen=True, slots=True)
class Shortfall:
    engine: str
    pool: str
    cause: Cause
    detail: str
    ahead: int

    def message(self) -> str:
        behind = (
            f"behind the {self.ahead} replica(s) of the cluster placed before it"
            if self.ahead
            else "on the cluster's admitted replicas"
        )
        return (
            f"engine {self.engine} does not fit pool {self.pool} {behind}: "
            f"{self.detail} ({self.cause})"
        )


def waiting(message: str, retry_after: timedelta | None = None) -> AdmissionVerdict:
    return AdmissionVerdict(reason=WAITING, message=message, record=None, retry_after=retry_after)


def ahead_of(mine: Queued, others: Sequence[Queued]) -> list[Queued]:
    """The in-flight replicas (or growths) ahead of `mine` in queue order, in that order."""
    me = queue_order(mine)
    return sorted(
        (
            q
            for q in others
            if q.in_flight
            and q.key != mine.key
            and q.charge.cluster == mine.charge.cluster
            and queue_order(q) < me
        ),
        key=queue_order,
    )


def _admitted_charges(cluster: Cluster, mine: Queued, others: Sequence[Queued]) -> list[Charge]:
    """What the cluster's replicas hold by a verdict, as the ledgers are charged with it:
    every other replica's (`Queued.admitted_charge`), and `mine`'s held shape while its
    growth is judged."""
    held = [q.admitted_charge() for q in others if q.key != mine.key]
    held.append(mine.admitted_charge() if mine.held is not None else None)
    return sorted(
        (c for c in held if c is not None and c.cluster == cluster.name),
        key=lambda c: (c.namespace, c.name),
    )


def _take(ledgers: PoolLedgers, cluster: Cluster, charge: Charge) -> None:
    """Charge an in-flight replica's engines all or nothing; one that does not fit takes nothing."""
    trials: dict[PoolKey, PoolLedger] = {}
    for engine in charge.engines:
        pool = cluster.pool(engine.pool)
        if pool is None:
            continue  # a pool the cluster lacks holds nothing
        observed_at = ledgers.basis(cluster, pool).observed_at
        if observed_at is not None and charge.contained_by(observed_at):
            continue  # rule 1: the pool's histogram already counts it
        trial = trials.get(pool.key) or ledgers.ledger(cluster, pool).copy()
        if not place_engine(trial, pool, engine):
            return  # it is itself Overcommitted, by the same replay
        trials[pool.key] = trial
    ledgers.commit(trials)


def _detail(ledger: PoolLedger, pool: Pool, engine: PlacedEngine, cause: Cause) -> str:
    names = pool.kinds.names
    need = [0] * len(ledger.per_node)
    largest: tuple[int, ...] = tuple(0 for _ in ledger.per_node)
    pods = 0
    for copy, _ in engine_pods(pool, engine):
        for demand in copy:
            effective = ledger.effective(demand)
            pods += 1
            largest = max(largest, tuple(effective))
            for i, count in enumerate(effective):
                need[i] += count
    free = ledger.free_devices()
    if cause is Cause.TOO_FEW_DEVICES:
        short = [
            f"it claims {n} {names[i]} device(s), {f} free"
            for i, (n, f) in enumerate(zip(need, free, strict=True))
            if n > f
        ]
        return "; ".join(short)
    roomy = ledger.nodes_with_room(largest)
    return f"its {pods} pod(s) need nodes with room, {roomy} node(s) have room for the largest"


def fit_behind(
    cluster: Cluster, mine: Queued, others: Sequence[Queued], now: datetime
) -> Shortfall | None:
    """Replay the queue up to `mine`; None when it fits, else where it falls short."""
    admitted = _admitted_charges(cluster, mine, others)
    ledgers = PoolLedgers(now, lambda _: admitted)
    ahead = ahead_of(mine, others)
    for queued in ahead:
        _take(ledgers, cluster, queued.claim())
    for engine in mine.claim().engines:
        pool = cluster.pool(engine.pool)
        if pool is None:
            continue  # reported by the caller before any replay
        ledger = ledgers.ledger(cluster, pool)
        trial = ledger.copy()
        if not place_engine(trial, pool, engine):
            cause = shortage(ledger, pool, engine)
            return Shortfall(
                engine=engine.name,
                pool=pool.name,
                cause=cause,
                detail=_detail(ledger, pool, engine, cause),
                ahead=len(ahead),
            )
        ledger.adopt(trial)
    return None


def _already_decided(applicant: Applicant, now: datetime) -> AdmissionVerdict | None:
    """A verdict that needs no replay: the sticky one (an Admitted one lowered to a shape
    that shrank), or admitted because it already runs and no verdict for its placement
    says otherwise (a replica composed before admission existed, or whose status was
    lost)."""
    previous = applicant.previous
    if previous is not None and previous.binds(applicant.placement, applicant.shape):
        record = previous
        if previous.verdict == ADMITTED:
            record = replace(previous, charged=applicant.shape, grown_at=None)
        return AdmissionVerdict(
            reason=previous.verdict, message=_sticky_message(previous), record=record
        )
    if applicant.has_workloads and not applicant.growing:
        return AdmissionVerdict(
            reason=ADMITTED,
            message="admitted: its workloads already exist",
            record=Record(
                placed_at=applicant.placement,
                verdict=ADMITTED,
                decided_at=now,
                message="its workloads already existed",
                charged=applicant.shape,
            ),
        )
    return None


def _not_judged(
    applicant: Applicant, cluster: Cluster | None, others: Sequence[Queued] | None, now: datetime
) -> AdmissionVerdict | None:
    """Why the replay cannot run yet (an input is unreadable, or its commit delay is not over)."""
    mine = applicant.queued
    if applicant.problem:
        return waiting(f"not judged: {applicant.problem}")
    if cluster is None:
        return waiting("not judged: its InferenceCluster cannot be read")
    if others is None:
        return waiting("not judged: the cluster's ModelReplicas are not fetched yet")
    if mine.placed_at is None:
        return waiting("not judged: it has no placement time")
    age = now - mine.placed_at
    if age < COMMIT_DELAY:
        return waiting(  # "settling": the wire word users and tests match stays
            f"settling for {COMMIT_DELAY.seconds}s after its placement, "
            "so that every replica placed before it is visible",
            retry_after=COMMIT_DELAY - age,
        )
    missing = sorted({e.pool for e in mine.charge.engines if cluster.pool(e.pool) is None})
    if missing:
        return waiting(f"not judged: pool {', '.join(missing)} is not in the cluster's spec")
    return None


def judge(
    applicant: Applicant,
    cluster: Cluster | None,
    others: Sequence[Queued] | None,
    now: datetime,
) -> AdmissionVerdict:
    """The replica's verdict for its current placement.

    `cluster` and `others` (the cluster's ModelReplicas) are None when they
    cannot be read.
    """
    decided = _already_decided(applicant, now) or _not_judged(applicant, cluster, others, now)
    if decided is not None:
        return decided
    assert cluster is not None and others is not None  # _not_judged waits otherwise
    shortfall = fit_behind(cluster, applicant.queued, others, now)
    if shortfall is None:
        return AdmissionVerdict(
            reason=ADMITTED,
            message="admitted: it fits behind every replica of the cluster placed before it",
            record=Record(
                placed_at=applicant.placement,
                verdict=ADMITTED,
                decided_at=now,
                charged=applicant.shape,
            ),
        )
    message = shortfall.message()
    return AdmissionVerdict(
        reason=OVERCOMMITTED,
        message=message,
        record=Record(
            placed_at=applicant.placement, verdict=OVERCOMMITTED, decided_at=now, message=message
        ),
    )


def growth_verdict(
    applicant: Applicant, verdict: AdmissionVerdict, now: datetime
) -> AdmissionVerdict:
    """The verdict of a replica whose spec grew past its Admitted verdict.

    Admitted for the growth: the new verdict, charging the new shape. Anything
    else (its commit delay not over, an input missing, too little room or quota): it keeps
    running at the shape its verdict charged, and its record keeps that shape and
    says when the growth was first seen (its queue time, so its place is kept).
    """
    if not applicant.growing or verdict.admitted:
        return verdict
    previous = applicant.previous
    assert previous is not None  # growing needs a recorded verdict
    why = verdict.message.removeprefix("not judged: ")
    return AdmissionVerdict(
        reason=GROWTH_NOT_ADMITTED,
        message=f"admitted at the shape its verdict charged; its growth is not admitted: {why}",
        record=replace(previous, grown_at=previous.grown_at or now),
        retry_after=verdict.retry_after or GROWTH_RETRY,
        refused=verdict.reason == OVERCOMMITTED,
    )


def _sticky_message(record: Record) -> str:
    if record.verdict == ADMITTED:
        return "admitted" + (f": {record.message}" if record.message else "")
    return record.message or "overcommitted: it does not fit behind the replicas placed before it"
