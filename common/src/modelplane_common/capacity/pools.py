"""Pool capacity: turn a pool's published status into a ledger and charge replicas.

`PoolLedgers` is the one per-pass cache of them: the scheduler places new
replicas on it and admission replays its cluster's queue on it, each pool's
ledger built the first time the pool is asked for, from the pool's basis
minus the replicas the caller says are charged to its cluster.

Rules (design/api.md section 6)
    1. A pool with a FRESH observation (its cluster publishes it `current`
       under a lease that holds, modelplane_common.currency) starts from its
       histogram plus
       max(0, nodes - observedNodes) empty nodes it can still grow by. A
       replica pinned to it is charged only while the histogram cannot
       contain it yet: PodsScheduled is not True, or scheduledAt is later
       than the pool's observedAt (both on the agent's clock).
    2. A pool with no, stale, rejected, blind or Declared observation falls
       back to its `Pool.fallback`, and every replica pinned to it is charged:
       WholeNode    `nodes` empty nodes; every claiming pod takes a whole node.
       DeviceCount  `nodes` x the declared devices per node, one total per
                    kind; every pod takes the devices it claims
                    (devicecount.py says what fits and what it cannot see).
    3. A report may only lower capacity. A fresh report rejected for a
       node-count bound alone (`Rejected.ceiling`) is not believed as the
       pool's capacity, yet it shows truthfully how much is free at most,
       other tenants' and non-modelplane workloads included, which no
       fallback can see. So the fallback starts from no more than it shows:
       WholeNode    at most the report's wholly free nodes;
       DeviceCount  at most the report's free devices, per kind.
       Every pinned replica is then charged as rule 2 says, so a replica the
       report already counts is subtracted twice: under-promising while the
       report is rejected, never a double booking.

Deliberate choices
    - A booting node (counted in observedNodes but not yet schedulable)
      is neither free nor growable: the pool looks full until the node is
      Ready, then the next observation shows it. Under-promising for a few
      minutes beats promising a node that may never join.
    - Charges are applied in (namespace, name) order so the ledger is the
      same whatever order the replicas arrive in.
    - A charged replica's request names a deviceClassName, not a pool kind
      (the ModelReplica wire form keeps only the class): it is charged to
      the first declared DRA kind of that class with enough devices per
      node, else the first of that class; a class the pool does not declare
      at all makes the pod take a whole node (safe; under DeviceCount, a
      whole node's devices).
    - A charged replica that does not fit (over-committed by someone else,
      or pending for good) is charged for the pods that fit; the rest hold
      nothing in the cluster either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from modelplane_common import currency
from modelplane_common.capacity.devicecount import DeviceCountLedger
from modelplane_common.capacity.diagnosis import Cause
from modelplane_common.capacity.fit import Demand, Ledger, PoolLedger, Reservation
from modelplane_common.capacity.fleet import (
    Charge,
    Cluster,
    Fallback,
    PlacedEngine,
    Pool,
    PoolKey,
    ResolvedRequest,
)
from modelplane_common.devices import DRA
from modelplane_common.observation import Histogram, Observation, Rejected, growable_nodes


@dataclass(frozen=True, slots=True)
class Basis:
    """Why a ledger looks the way it does."""

    observed_at: datetime | None  # set only when a fresh observation is used
    reason: str = ""  # why the pool falls back, when it does
    fallback: Fallback = Fallback.WHOLE_NODE  # how it is counted when it does
    # Rule 3: the free capacity a fresh, rejected report shows, which the fallback
    # never exceeds; None when there is no such report.
    ceiling: Histogram | None = None

    @property
    def observed(self) -> bool:
        return self.observed_at is not None

    @property
    def accounting(self) -> str:
        """`Observed`, or the fallback's name (`WholeNode`, `DeviceCount`)."""
        return "Observed" if self.observed else str(self.fallback)


def basis_of(pool: Pool, now: datetime) -> Basis:
    observation = pool.observation
    if observation is None:
        why = "the cluster declares its capacity (observation mode Declared)"
    elif pool.distrust:
        why = pool.distrust
    elif isinstance(observation, Rejected):
        return Basis(
            None, observation.message, pool.fallback, _fresh_ceiling(observation, pool, now)
        )
    elif not isinstance(observation, Observation):
        why = observation.message
    elif (stale := currency.lapsed(pool.current_until, now)) is not None:
        why = f"the observation is {stale}"
    else:
        return Basis(observation.observed_at)
    return Basis(None, why, pool.fallback)


def _fresh_ceiling(rejected: Rejected, pool: Pool, now: datetime) -> Histogram | None:
    """Rule 3's ceiling: a stale report says nothing about what is free now."""
    ceiling = rejected.ceiling
    if ceiling is None or not currency.holds(pool.current_until, now):
        return None
    return ceiling.histogram


def empty_ledger(pool: Pool, cluster: Cluster, now: datetime) -> tuple[PoolLedger, Basis]:
    """The pool's capacity before any replica is charged."""
    basis = basis_of(pool, now)
    per_node = pool.kinds.empty_node
    if basis.observed:
        observation = pool.observation
        assert isinstance(observation, Observation)
        counts = dict(observation.histogram.buckets)
        grow = growable_nodes(pool.nodes, observation.observed_nodes)
        if grow:
            counts[per_node] = counts.get(per_node, 0) + grow
        return Ledger(counts, per_node, whole_node=False, scoring=cluster.node_scoring), basis
    if basis.fallback is Fallback.DEVICE_COUNT:
        declared = tuple(p * pool.nodes for p in per_node)
        return DeviceCountLedger(
            per_node, pool.nodes, _at_most_free(declared, basis.ceiling)
        ), basis
    empty = pool.nodes
    if basis.ceiling is not None:
        empty = min(empty, dict(basis.ceiling.buckets).get(per_node, 0))
    return Ledger({per_node: empty}, per_node, whole_node=True), basis


def _at_most_free(declared: tuple[int, ...], ceiling: Histogram | None) -> tuple[int, ...]:
    """Rule 3 under DeviceCount: the declared totals, each no more than the report shows."""
    if ceiling is None:
        return declared
    shown = [0] * len(declared)
    for vector, nodes in ceiling.buckets:
        for i, free in enumerate(vector):
            shown[i] += free * nodes
    return tuple(min(d, s) for d, s in zip(declared, shown, strict=True))


def demand_of(pool: Pool, requests: Iterable[ResolvedRequest]) -> Demand | None:
    """The devices one pod claims on a node of this pool, by pool kind.

    None when a request names a class the pool does not declare: the pod
    cannot be mapped, so whoever charges it must assume a whole node.
    """
    kinds = pool.kinds
    index = {name: i for i, name in enumerate(kinds.names)}
    class_of = {k.name: k.device_class for k in pool.devices if k.claim == DRA}
    demand = [0] * len(kinds.names)
    for request in requests:
        if request.kind is not None and request.kind in index:
            demand[index[request.kind]] += request.count
            continue
        same_class = [n for n in kinds.names if class_of.get(n) == request.device_class]
        if not same_class:
            return None
        roomy = [n for n in same_class if kinds.per_node[index[n]] >= request.count]
        demand[index[(roomy or same_class)[0]]] += request.count
    return tuple(demand)


def engine_pods(pool: Pool, engine: PlacedEngine) -> list[tuple[list[Demand], bool]]:
    """One entry per copy: the demands of its pods and whether they form a gang."""
    copy: list[Demand] = []
    for member in engine.members:
        demand = demand_of(pool, member.requests)
        if demand is None:
            demand = pool.kinds.empty_node if any(pool.kinds.per_node) else ()
            # An unmappable claiming pod takes a whole node; with no DRA kind
            # at all there is nothing it could take.
        copy.extend([demand] * member.pods_per_copy)
    return [(list(copy), engine.is_gang) for _ in range(engine.copies)]


def place_engine(ledger: PoolLedger, pool: Pool, engine: PlacedEngine) -> bool:
    """Place every copy of an engine on the ledger; all or nothing."""
    trial = ledger.copy()
    for pods, gang in engine_pods(pool, engine):
        if gang:
            if not trial.place_gang(pods):
                return False
        else:
            for demand in sorted(set(pods)):
                if not trial.place_shared(demand, pods.count(demand)):
                    return False
    ledger.adopt(trial)
    return True


def shortage(ledger: PoolLedger, pool: Pool, engine: PlacedEngine) -> Cause:
    """Why `place_engine` refused: too few devices in all, or too few nodes holding them.

    The same two causes under every rule. Under DeviceCount "too few nodes"
    means a gang copy has more pods than the pool has nodes, or a pod claims
    more than one node declares: the totals would have held it.
    """
    need = [0] * len(ledger.per_node)
    for pods, _ in engine_pods(pool, engine):
        for demand in pods:
            for i, count in enumerate(ledger.effective(demand)):
                need[i] += count
    if any(n > free for n, free in zip(need, ledger.free_devices(), strict=True)):
        return Cause.TOO_FEW_DEVICES
    return Cause.TOO_FEW_NODES


def charge_replicas(
    ledger: PoolLedger, pool: Pool, basis: Basis, charges: Sequence[Charge]
) -> tuple[str, ...]:
    """Subtract the replicas pinned to this pool that the ledger does not contain yet.

    Returns one note per replica that did not fit whole (the pool is
    over-committed by it or it is pending for good).
    """
    notes: list[str] = []
    for charge in sorted(charges, key=lambda c: (c.namespace, c.name)):
        if charge.released:
            continue  # a phantom: its pods were refused (modelplane_common.pods_created)
        if basis.observed_at is not None and charge.contained_by(basis.observed_at):
            continue
        for engine in charge.engines:
            if engine.pool != pool.name:
                continue
            missing = 0
            for pods, gang in engine_pods(pool, engine):
                missing += ledger.place_best_effort(pods, gang=gang)
            if missing:
                notes.append(
                    f"{charge.namespace}/{charge.name} engine {engine.name}: "
                    f"{missing} pod(s) do not fit pool {pool.cluster}/{pool.name}"
                )
    return tuple(notes)


# The replicas charged to a cluster's pools, by cluster name (each pool takes those pinned to it).
ChargesOn = Callable[[str], Sequence[Charge]]


class PoolLedgers:
    """Every pool's ledger for one pass, each built on first use and charged as it is used.

    A pool's ledger starts as `empty_ledger` minus `charges_on(cluster)`'s
    replicas pinned to that pool (`charge_replicas`). Callers try a placement
    on a copy and `commit` the copies once the whole attempt fits, so a
    refused attempt leaves every ledger as it was.
    """

    __slots__ = ("_charges_on", "_ledgers", "_now", "_pinned", "bases", "notes")

    def __init__(self, now: datetime, charges_on: ChargesOn) -> None:
        self._now = now
        self._charges_on = charges_on
        self._ledgers: dict[PoolKey, PoolLedger] = {}
        # Per cluster, asked once: its charges by the pools they are pinned to.
        self._pinned: dict[str, dict[str, list[Charge]]] = {}
        self.bases: dict[PoolKey, Basis] = {}  # why each ledger built so far looks as it does
        self.notes: list[str] = []  # charged replicas that did not fit whole

    def ledger(self, cluster: Cluster, pool: Pool) -> PoolLedger:
        if pool.key not in self._ledgers:
            ledger, basis = empty_ledger(pool, cluster, self._now)
            pinned = self._pinned_to(cluster.name).get(pool.name, [])
            self.notes.extend(charge_replicas(ledger, pool, basis, pinned))
            self._ledgers[pool.key] = ledger
            self.bases[pool.key] = basis
        return self._ledgers[pool.key]

    def _pinned_to(self, cluster: str) -> dict[str, list[Charge]]:
        if cluster not in self._pinned:
            by_pool: dict[str, list[Charge]] = {}
            for charge in self._charges_on(cluster):
                for pool in {e.pool for e in charge.engines}:
                    by_pool.setdefault(pool, []).append(charge)
            self._pinned[cluster] = by_pool
        return self._pinned[cluster]

    @property
    def clusters_read(self) -> tuple[str, ...]:
        """The clusters whose charges were asked for, first asked first."""
        return tuple(self._pinned)

    def basis(self, cluster: Cluster, pool: Pool) -> Basis:
        self.ledger(cluster, pool)
        return self.bases[pool.key]

    def commit(self, trials: Mapping[PoolKey, PoolLedger]) -> None:
        """Adopt the trial copies of an attempt that fitted whole."""
        for key, trial in trials.items():
            self._ledgers[key].adopt(trial)

    def reservations(self) -> dict[PoolKey, tuple[Reservation, ...]]:
        return {k: tuple(v.reservations) for k, v in sorted(self._ledgers.items())}
