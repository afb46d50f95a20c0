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
    - Nothing is admitted on a guess: a replica younger than `SETTLE`, or
      whose cluster, spec or fellow replicas cannot be read, waits.
    - A verdict binds its placement and is sticky: once Admitted (or
      Overcommitted) for a placed-at, it stays so until the scheduler
      places the replica anew.
    - A replica whose workloads already exist is admitted: admission never
      takes running work away (a replica composed before admission existed,
      or one whose status was lost).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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
from modelplane_common.capacity.pools import (
    Basis,
    charge_replicas,
    empty_ledger,
    engine_pods,
    place_engine,
    shortage,
)

# Longer than the time from the scheduler stamping placed-at to the replica
# being in every other replica's required resources (Crossplane applies it
# within the same reconcile, its cache sees it under a second; the issue's
# simulation assumed up to 5 s), with room for clock skew between function
# replicas. design/admission.md, "Settle time".
SETTLE = timedelta(seconds=10)


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: str  # ADMITTED, WAITING or OVERCOMMITTED
    message: str
    record: Record | None = None  # what status.admission says; None while waiting
    retry_after: timedelta | None = None  # while settling: when to look again

    @property
    def status(self) -> str:
        return "True" if self.reason == ADMITTED else "False"

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


def waiting(message: str, retry_after: timedelta | None = None) -> Verdict:
    return Verdict(WAITING, message, None, retry_after)


class _Pools:
    """The cluster's pool ledgers for one replay, each built on first use."""

    def __init__(self, cluster: Cluster, admitted: Sequence[Charge], now: datetime) -> None:
        self._cluster = cluster
        self._admitted = admitted
        self._now = now
        self._ledgers: dict[PoolKey, PoolLedger] = {}
        self.bases: dict[PoolKey, Basis] = {}

    def pool(self, name: str) -> Pool | None:
        return self._cluster.pool(name)

    def ledger(self, pool: Pool) -> PoolLedger:
        if pool.key not in self._ledgers:
            ledger, basis = empty_ledger(pool, self._cluster, self._now)
            pinned = [c for c in self._admitted if any(e.pool == pool.name for e in c.engines)]
            charge_replicas(ledger, pool, basis, pinned)
            self._ledgers[pool.key] = ledger
            self.bases[pool.key] = basis
        return self._ledgers[pool.key]

    def contains(self, charge: Charge, pool: Pool) -> bool:
        """Rule 1: the pool's histogram already counts this replica's pods."""
        self.ledger(pool)
        observed_at = self.bases[pool.key].observed_at
        return observed_at is not None and charge.contained_by(observed_at)

    def take(self, charge: Charge) -> PlacedEngine | None:
        """Charge a replica's engines all or nothing; the first engine that does not fit."""
        trials: dict[PoolKey, PoolLedger] = {}
        for engine in charge.engines:
            pool = self.pool(engine.pool)
            if pool is None or self.contains(charge, pool):
                continue  # a pool the cluster lacks holds nothing; a contained one is counted
            trial = trials.get(pool.key) or self.ledger(pool).copy()
            if not place_engine(trial, pool, engine):
                return engine
            trials[pool.key] = trial
        for key, trial in trials.items():
            self._ledgers[key].adopt(trial)
        return None


def ahead_of(mine: Queued, others: Sequence[Queued]) -> list[Queued]:
    """The in-flight replicas ahead of `mine` in queue order, in that order."""
    me = queue_order(mine)
    return sorted(
        (
            q
            for q in others
            if q.verdict is None
            and q.key != mine.key
            and q.charge.cluster == mine.charge.cluster
            and queue_order(q) < me
        ),
        key=queue_order,
    )


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
    admitted = sorted(
        (
            q.charge
            for q in others
            if q.verdict == ADMITTED and q.key != mine.key and q.charge.cluster == cluster.name
        ),
        key=lambda c: (c.namespace, c.name),
    )
    pools = _Pools(cluster, admitted, now)
    ahead = ahead_of(mine, others)
    for queued in ahead:
        pools.take(queued.charge)  # one that does not fit is itself Overcommitted
    for engine in mine.charge.engines:
        pool = pools.pool(engine.pool)
        if pool is None:
            continue  # reported by the caller before any replay
        ledger = pools.ledger(pool)
        trial = ledger.copy()
        if not place_engine(trial, pool, engine):
            cause = shortage(ledger, pool, engine)
            return Shortfall(
                engine.name, pool.name, cause, _detail(ledger, pool, engine, cause), len(ahead)
            )
        ledger.adopt(trial)
    return None


def judge(
    mine: Queued,
    placement: str,
    cluster: Cluster | None,
    others: Sequence[Queued] | None,
    now: datetime,
    *,
    previous: Record | None,
    has_workloads: bool,
    problem: str | None = None,
) -> Verdict:
    """The replica's verdict for its current placement (`placement`: the raw placed-at).

    `cluster` and `others` are None when they cannot be read; `problem` says
    why the replica cannot be judged yet (its spec, its placement time).
    """
    if previous is not None and previous.binds(placement):
        return Verdict(previous.verdict, _sticky_message(previous), previous)
    if has_workloads:
        return Verdict(
            ADMITTED,
            "admitted: its workloads already exist",
            Record(placement, ADMITTED, now, "its workloads already existed"),
        )
    if problem:
        return waiting(f"not judged: {problem}")
    if cluster is None:
        return waiting("not judged: its InferenceCluster cannot be read")
    if others is None:
        return waiting("not judged: the cluster's ModelReplicas are not fetched yet")
    if mine.placed_at is None:
        return waiting("not judged: it has no placement time")
    age = now - mine.placed_at
    if age < SETTLE:
        return waiting(
            f"settling for {SETTLE.seconds}s after its placement, "
            "so that every replica placed before it is visible",
            retry_after=SETTLE - age,
        )
    missing = sorted({e.pool for e in mine.charge.engines if cluster.pool(e.pool) is None})
    if missing:
        return waiting(f"not judged: pool {', '.join(missing)} is not in the cluster's spec")
    shortfall = fit_behind(cluster, mine, others, now)
    if shortfall is None:
        return Verdict(
            ADMITTED,
            "admitted: it fits behind every replica of the cluster placed before it",
            Record(placement, ADMITTED, now),
        )
    message = shortfall.message()
    return Verdict(OVERCOMMITTED, message, Record(placement, OVERCOMMITTED, now, message))


def _sticky_message(record: Record) -> str:
    if record.verdict == ADMITTED:
        return "admitted" + (f": {record.message}" if record.message else "")
    return record.message or "overcommitted: it does not fit behind the replicas placed before it"
