"""Placement: where each replica of one ModelDeployment runs.

`plan` is a pure, deterministic function of the deployment, the selected
InferenceClusters, this deployment's existing replicas, the other replicas'
charges, the failure memory and `now`. It never reads the clock or the wire.

Phases (each a function below that returns what it decided; `plan` runs them in order)
    1. remember   -> Memory: drop expired failures; record the (cluster,
                  pool) pairs of replicas Unschedulable for longer than the
                  grace period (they are healed and avoided).
    2. retain     -> Retained: keep every replica that is not failing where
                  it is; an edited shape re-resolves its device requests on
                  the SAME pool when that pool still matches (an engine whose
                  pool vanished or no longer matches is left unresolved for
                  fill). Replicas on held clusters are held; the rest move.
    3. scale down -> (Retained, removed): remove the excess by rule "victim
                  order".
    4. fill       -> Filled: against the pass's `PoolLedgers`
                  (modelplane_common.capacity.pools, the cache admission
                  replays its queue on too), built only now, from the kept
                  replicas' charges and the other replicas'
                  (`Inputs.others`): re-place the unresolved engines of
                  kept replicas on their own cluster (else the replica
                  moves), then place moving replicas, then new ones at the
                  lowest free indices. A replica goes, among the eligible
                  clusters with the fewest replicas of this deployment that
                  hold all its engines (rule "cluster order"), to the one it
                  fragments least, each engine on the fitting pool it
                  fragments least (rule "least fragmentation"; ties by rule
                  "pool order", then cluster name). Capacity is
                  charged as it is used; the last replica that finds no place
                  leaves its `Diagnosis` (modelplane_common.capacity.diagnosis).
                  Only clusters that take the deployment (usable.py: access
                  selects the namespace, spec.tenancy neither reserves it nor
                  refuses a template's priority class) are eligible, and
                  every pool tried is first checked against
                  the namespace's device quota (`Inputs.tenant`,
                  modelplane_common.capacity.quota), charged like capacity.

Named ordering rules (design/scheduler.md, "Ordering rules", "Fragmentation")
    cluster order  fewest replicas of this deployment first (availability
                   spreading, a stated policy); a cluster with more is tried
                   only when none with fewer holds the replica. A deployment
                   with spec.clusterSpreading Pack keeps no count
                   (`spread_over`): every cluster ranks equal and rule
                   "least fragmentation" alone picks among them.
    least fragmentation
                   among the pools (and clusters of equal rank) that hold it,
                   the place where the replica's pods, each on the node class
                   the cluster scheduler is assumed to choose, grow the
                   pool's fragmentation least for the demand the pass sees
                   (modelplane_common.capacity.fragmentation); exact
                   fractions, so ties are ties.
    pool order     ties of least fragmentation: smallest matching hardware
                   first (most devices per node of a claimed kind), then by
                   name; unmatched pools last. Ties between clusters: by name.
    victim order   leaving (moving or held) first, then on a cluster that no
                   longer takes the deployment (usable.py), then pods not all
                   scheduled,
                   then the cluster with the most replicas of this
                   deployment, then the highest index.

Invariants
    - A healthy replica never moves: only a replica that is Unschedulable
      past the grace period, whose cluster is gone or unselected past the
      missing-cluster grace period (absence.py; until then it is HELD where
      it is, not counted as scheduled or ready), whose
      cluster carries a NoExecute taint it does not tolerate, whose pool
      can no longer hold its shape, or that waits for an admission its
      cluster's spec.tenancy refuses (usable.py) is re-placed; and if no
      other place fits, it stays where it is (stranded, not counted as
      scheduled).
    - Nothing is deleted except by scale-down to `spec.replicas`.
    - A policy edit moves no admitted replica: one on a cluster that no
      longer takes the deployment (access, a reserved namespace, an
      unapproved priority class: usable.py) stays (reported in
      `Plan.unadmitted`), takes no new devices there, and is removed first on
      scale-down.
    - One pass never takes the namespace over its device quota: each new
      placement is charged to the quota ledger before the next is tried; a
      quota lowered under what runs removes nothing.
    - One pass never overcommits: every new placement is charged to the
      ledger before the next is tried (see modelplane_common.capacity: fit, pools).
    - Identity is (namespace, name); the same input in any order gives the
      same plan (everything is sorted by name, index or key first).
    - A move is dated from the view, never from the clock: a healed, drained
      or re-pooled replica's placed-at and its pools' `expiresAt` follow from
      the failure's own time (failure_due, move_dates, placement_time.py), so
      the same view decided again at a later `now` gives the same plan; only
      a first placement is stamped with `now`.

Deliberate limits
    - Greedy across replicas and engines (see modelplane_common.capacity.fit); exact per gang copy.
    - Rule "least fragmentation" compares at most CLUSTERS_COMPARED clusters of equal
      cluster order per replica (the first that hold it, by name): each costs its
      pools' ledgers.
    - A cluster that is not Ready or has an untolerated NoSchedule taint
      gets no NEW replicas but keeps the ones it has (Kubernetes semantics:
      NoSchedule does not evict, NoExecute does).
    - Healing records every pool of the failing replica (the condition does
      not say which engine failed); they are avoided for `avoidFor`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from fractions import Fraction
from typing import Protocol

from modelplane_common.capacity.admission import OVERCOMMITTED, WAITING
from modelplane_common.capacity.charge_label import counted_by_pools
from modelplane_common.capacity.diagnosis import NOTHING_CHECKED, Cause, Diagnosis, PoolRefusal
from modelplane_common.capacity.fit import Demand, PoolLedger, Reservation
from modelplane_common.capacity.fleet import (
    Charge,
    Cluster,
    PlacedEngine,
    PlacedMember,
    Pool,
    PoolKey,
    ResolvedRequest,
)
from modelplane_common.capacity.fragmentation import Shapes, expected_demand, growth
from modelplane_common.capacity.pools import (
    Basis,
    PoolLedgers,
    engine_pods,
    place_engine,
    shortage,
)
from modelplane_common.capacity.quota import QuotaLedger, QuotaShortfall, devices_of
from modelplane_common.devices import DeviceKind, DeviceRequest
from modelplane_common.outcome import capped
from modelplane_common.pods_created import released

from compose_model_deployment import placement_time, usable
from compose_model_deployment.model import (
    ClusterSpreading,
    DeploymentSpec,
    EngineShape,
    FailedPlacement,
    OwnReplica,
    Tenant,
)

MAX_FAILED_PLACEMENTS = 32
# How a failed placement whose pods the cluster refused begins its reason.
PODS_NOT_CREATED = "its pods were not created"


class KindMatchLike(Protocol):
    # Read-only, so that frozen dataclasses satisfy it.
    @property
    def request(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def claimed(self) -> bool: ...


# Which pool device kind satisfies each of one pod's requests, or None (cel.devices.match_requests).
Matcher = Callable[[Sequence[DeviceRequest], Sequence[DeviceKind]], Sequence[KindMatchLike] | None]


class InvalidSelector(ValueError):
    """A member's CEL selector does not compile or evaluate; nothing may be planned."""


class Change(StrEnum):
    KEPT = "Kept"
    RESHAPED = "Reshaped"  # same cluster; requests re-resolved or an engine re-pooled
    PLACED = "Placed"
    MOVED = "Moved"
    STRANDED = "Stranded"  # had to move, nowhere fits: left where it is
    HELD = "Held"  # its cluster is missing or unreadable: left where it is (see absence.py)


@dataclass(frozen=True, slots=True)
class OthersOnCluster:
    """What the other deployments' replicas hold on one cluster, and what reading them noted."""

    charges: tuple[Charge, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Inputs:
    deployment: DeploymentSpec
    clusters: tuple[Cluster, ...]
    own: tuple[OwnReplica, ...]
    failed: tuple[FailedPlacement, ...]
    now: datetime
    # Clusters whose replicas stay where they are this pass, with the reason
    # (absence.py decides: missing within the grace period, or unreadable).
    held: Mapping[str, str] = field(default_factory=dict)
    # The other replicas by cluster. Placement looks up only the clusters it
    # tries, so a reader may produce a cluster's entry on its first lookup
    # (readers.OtherReplicas does: reading every one of 8,000 replicas each
    # pass would cost more than the rest of the pass).
    others: Mapping[str, OthersOnCluster] = field(default_factory=dict)
    # The namespace's labels, quota and the devices its other replicas claim (tenancy.py).
    tenant: Tenant = field(default_factory=Tenant)
    # Since when each missing cluster has been missing (absence.py): a replica on one
    # past the grace period moves, and its move fell due at `since` plus the grace.
    missing_since: Mapping[str, datetime] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedReplica:
    index: int
    name: str
    cluster: str
    engines: tuple[PlacedEngine, ...]
    change: Change
    placed_at: datetime
    previous: OwnReplica | None = None
    why: str = ""
    # Its pools' fresh observations already count it, so readers of the fleet need not
    # read it (modelplane_common.capacity.charge_label); False is always safe.
    counted: bool = False

    @property
    def waiting(self) -> bool:
        """Kept where it is while its cluster has not admitted it yet: placed, not scheduled."""
        return (
            self.change in (Change.KEPT, Change.RESHAPED)
            and self.previous is not None
            and self.previous.admission == WAITING
        )

    @property
    def scheduled(self) -> bool:
        return self.change not in (Change.STRANDED, Change.HELD) and not self.waiting

    @property
    def pools(self) -> tuple[str, ...]:
        return tuple(sorted({m.pool for e in self.engines for m in e.members}))


@dataclass(frozen=True, slots=True, kw_only=True)
class Healed:
    replica: str
    cluster: str
    pools: tuple[str, ...]
    why: str
    # When the failure healed fell due, as the replica's status dates it (failure_due).
    due: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    replicas: tuple[PlannedReplica, ...]
    removed: tuple[OwnReplica, ...]
    healed: tuple[Healed, ...]
    failed_placements: tuple[FailedPlacement, ...]
    desired: int
    # Why the last replica that found no place found none (None: none failed).
    diagnosis: Diagnosis | None = None
    bases: Mapping[PoolKey, Basis] = field(default_factory=dict)
    reservations: Mapping[PoolKey, tuple[Reservation, ...]] = field(default_factory=dict)
    # What reading the other replicas noted, by the order their clusters were first tried.
    others_notes: tuple[str, ...] = ()
    # Replicas kept on a cluster that no longer takes the deployment, and why each such
    # cluster does not (usable.py), by cluster name.
    unadmitted: tuple[PlannedReplica, ...] = ()
    refusals: Mapping[str, usable.Refusal] = field(default_factory=dict)

    @property
    def scheduled(self) -> int:
        return sum(1 for r in self.replicas if r.scheduled)

    @property
    def ready(self) -> int:
        return sum(
            1
            for r in self.replicas
            if r.previous is not None
            and r.previous.ready
            and r.change in (Change.KEPT, Change.RESHAPED)
            and r.pools == r.previous.pools
        )

    @property
    def missing(self) -> int:
        return max(0, self.desired - self.scheduled)

    @property
    def held(self) -> tuple[PlannedReplica, ...]:
        return tuple(r for r in self.replicas if r.change is Change.HELD)

    @property
    def waiting(self) -> tuple[PlannedReplica, ...]:
        return tuple(r for r in self.replicas if r.waiting)


@dataclass(frozen=True, slots=True)
class Staying:
    """A retained replica and its engines re-resolved on their pools (None: needs a new pool)."""

    own: OwnReplica
    engines: tuple[PlacedEngine | None, ...]


@dataclass(frozen=True, slots=True)
class Memory:
    """What `remember` decided: who is healed and which pools are avoided."""

    healed: tuple[Healed, ...]
    failures: Mapping[PoolKey, FailedPlacement]

    @property
    def avoid(self) -> frozenset[PoolKey]:
        return frozenset(self.failures)


@dataclass(frozen=True, slots=True)
class Retained:
    """What `retain` (and then `scale_down`) decided for the existing replicas."""

    kept: Mapping[int, Staying]  # by index
    moving: tuple[tuple[OwnReplica, str], ...]  # must be re-placed, and why
    held: tuple[OwnReplica, ...]  # on a missing or unreadable cluster (absence.py)

    def everyone(self) -> list[OwnReplica]:
        return [k.own for k in self.kept.values()] + [o for o, _ in self.moving] + list(self.held)


@dataclass(frozen=True, slots=True)
class Filled:
    """What `fill` decided: every replica's place, and why the last one without a place has none."""

    replicas: Mapping[int, PlannedReplica]
    diagnosis: Diagnosis | None


# -- named ordering rules (design/scheduler.md, "Ordering rules") ----------------------------


def cluster_order(cluster: Cluster, replicas_on: Mapping[str, int]) -> tuple[int, str]:
    """Rule "cluster order": a new or moving replica tries the clusters with the fewest
    replicas of this deployment first (among them rule "least fragmentation" decides),
    ties by name."""
    return (replicas_on.get(cluster.name, 0), cluster.name)


def spread_over(spec: DeploymentSpec, replicas_on: Mapping[str, int]) -> Mapping[str, int]:
    """The replica counts rule "cluster order" ranks clusters by: this deployment's per
    cluster under spec.clusterSpreading Spread; none under Pack, so that every cluster
    ranks equal and rule "least fragmentation" alone chooses among them."""
    return replicas_on if spec.cluster_spreading is ClusterSpreading.SPREAD else {}


def victim_order(
    own: OwnReplica,
    leaving: AbstractSet[str],
    replicas_on: Mapping[str, int],
    unadmitted: AbstractSet[str] = frozenset(),
) -> tuple[int, int, int]:
    """Rule "victim order": scale-down removes the smallest key first.

    Replicas being re-placed or held on a cluster that cannot be seen go
    first, then those on a cluster that no longer takes the deployment
    (`unadmitted`, by name: usable.py), then those whose pods are not all scheduled,
    then those on the cluster with the most replicas of this deployment,
    then the highest index.
    """
    if own.name in leaving:
        state = 0
    elif own.name in unadmitted:
        state = 1
    elif own.pods_scheduled.status != "True":
        state = 2
    else:
        state = 3
    return (state, -replicas_on.get(own.cluster, 0), -own.index)


class Matching:
    """Engines bound to pools' device kinds, memoized per (engine, pool): pure, never charged."""

    def __init__(self, matcher: Matcher, engines: Sequence[EngineShape] = ()) -> None:
        self._matcher = matcher
        self._resolved: dict[tuple[str, PoolKey], PlacedEngine | None] = {}
        # Each engine's position in the spec, to name a bad selector's field.
        self._positions = {e.name: i for i, e in reversed(list(enumerate(engines)))}

    def resolve(self, engine: EngineShape, pool: Pool) -> PlacedEngine | None:
        """The engine's members bound to this pool's kinds, or None if a request matches none."""
        cache_key = (engine.name, pool.key)
        if cache_key in self._resolved:
            return self._resolved[cache_key]
        members: list[PlacedMember] = []
        resolved: PlacedEngine | None = None
        for position, member in enumerate(engine.members):
            requests: list[ResolvedRequest] = []
            if member.requests:
                try:
                    matches = self._matcher(member.requests, pool.devices)
                except ValueError as err:
                    where = self._selector_field(engine.name, position, member.requests, err)
                    raise InvalidSelector(f"engine {engine.name}: {where}{err}") from err
                if matches is None:
                    break
                by_name = {r.name: r for r in member.requests}
                declared = {k.name: k for k in pool.devices}
                for match in matches:
                    if not match.claimed:
                        continue
                    request = by_name[match.request]
                    requests.append(
                        ResolvedRequest(
                            name=request.name,
                            device_class=declared[match.kind].device_class,
                            count=request.count,
                            selectors=request.selectors,
                            kind=match.kind,
                        )
                    )
            members.append(
                PlacedMember(
                    role=member.role,
                    pool=pool.name,
                    requests=tuple(requests),
                    pods_per_copy=member.pods_per_copy,
                )
            )
        else:
            resolved = PlacedEngine(engine.name, engine.copies, tuple(members))
        self._resolved[cache_key] = resolved
        return resolved

    def _selector_field(
        self, engine: str, member: int, requests: Sequence[DeviceRequest], err: ValueError
    ) -> str:
        """``<field>: `` for the selector an error is about (its ``expression``), or ""."""
        expression = getattr(err, "expression", None)
        found = [
            (d, s)
            for d, request in enumerate(requests)
            for s, selector in enumerate(request.selectors)
            if selector == expression
        ]
        if engine not in self._positions or not found:
            return ""
        d, s = found[0]
        return (
            f"spec.template.spec.engines[{self._positions[engine]}].members[{member}]"
            f".nodeSelector.devices[{d}].selectors[{s}].cel.expression: "
        )

    def pool_order(self, engine: EngineShape, pools: Sequence[Pool]) -> list[Pool]:
        """Rule "pool order": the order an engine tries a cluster's pools.

        Smallest matching hardware first: the key is the most devices per
        node among the kinds the engine claims, so a 1-GPU engine tries a
        4-GPU pool before an 8-GPU one and large nodes stay whole for engines
        that need them. Ties, claimless engines and pools that do not match
        at all go by name.
        """

        def key(pool: Pool) -> tuple[int, int, str]:
            resolved = self.resolve(engine, pool)
            if resolved is None:
                return (1, 0, pool.name)
            per_node = dict(zip(pool.kinds.names, pool.kinds.per_node, strict=True))
            largest = max(
                (per_node.get(r.kind or "", 0) for m in resolved.members for r in m.requests),
                default=0,
            )
            return (0, largest, pool.name)

        return sorted(pools, key=key)


# -- phase 1: remember -----------------------------------------------------------------------


def unschedulable_too_long(own: OwnReplica, spec: DeploymentSpec, now: datetime) -> str | None:
    ps = own.pods_scheduled
    if ps.status != "False" or ps.reason != "Unschedulable" or ps.since is None:
        return None
    # A condition older than the placement describes the previous placement. Conditions
    # are stamped to the second, placed-at to the microsecond: compare to the second.
    if own.placed_at is not None and ps.since < own.placed_at.replace(microsecond=0):
        return None
    if now - ps.since <= spec.unschedulable_grace:
        return None
    detail = f": {ps.message}" if ps.message else ""
    return f"unschedulable since {ps.since:%Y-%m-%dT%H:%M:%SZ}{detail}"


def overcommitted(own: OwnReplica) -> str | None:
    """Its cluster refused to admit it: a failed placement at once, no grace period
    (no pod of it ever existed). design/admission.md."""
    if own.admission != OVERCOMMITTED:
        return None
    detail = f": {own.admission_message}" if own.admission_message else ""
    return f"was not admitted on its cluster{detail}"


def pods_not_created(own: OwnReplica) -> str | None:
    """Its cluster refused its pods past the grace (PodsCreated False/NotCreated): it holds
    nothing, and is re-placed at once with the cluster's reason (modelplane_common.pods_created).
    A condition older than the placement describes the previous placement."""
    created = own.pods_created
    if not released(created.status, created.reason):
        return None
    if own.placed_at is not None and (created.since is None or created.since < own.placed_at):
        return None
    detail = f": {created.message}" if created.message else ""
    return f"{PODS_NOT_CREATED}{detail}"


def failure_due(own: OwnReplica, spec: DeploymentSpec) -> datetime | None:
    """When the failure a healed replica is healed for fell due, as its status dates it;
    None when the status does not date it.

    Overcommitted: the verdict's `decidedAt`. Pods not created: PodsCreated's
    `since` (the replica turns NotCreated only once missingPodsGracePeriod is
    over). Unschedulable: PodsScheduled's `since` plus unschedulableGracePeriod.
    Never the clock: a pass that heals the same failure again dates it the same
    (placement_time.py).
    """
    if own.admission == OVERCOMMITTED and own.admission_at is not None:
        return own.admission_at
    if pods_not_created(own) is not None and own.pods_created.since is not None:
        return own.pods_created.since
    since = own.pods_scheduled.since
    if own.pods_scheduled.reason == "Unschedulable" and since is not None:
        return since + spec.unschedulable_grace
    return None


def avoided_until(own: OwnReplica, spec: DeploymentSpec, now: datetime) -> datetime:
    """How long a healed replica's pools are avoided: `avoidFor` from when its failure
    fell due (failure_due), so a pass that heals it again remembers the same expiry.

    Counting from then, not from now, also lets a replica left where it was
    (nothing else fits) return to its pool: an Overcommitted or NotCreated
    verdict is sticky and an Unschedulable condition stays, so counting from
    now would avoid its pool for as long as it stays. `now` only when the
    status does not date the failure.
    """
    due = failure_due(own, spec)
    return (due if due is not None else now) + spec.avoid_for


def remember(inputs: Inputs) -> Memory:
    """Drop expired failures; record the pools of replicas Unschedulable past the grace."""
    spec, now = inputs.deployment, inputs.now
    failures: dict[PoolKey, FailedPlacement] = {}
    for failure in sorted(inputs.failed, key=lambda f: (f.key, f.expires_at)):
        if failure.expires_at > now:
            failures[failure.key] = failure
    healed: list[Healed] = []
    for own in sorted(inputs.own, key=lambda r: r.index):
        why = unschedulable_too_long(own, spec, now) or overcommitted(own) or pods_not_created(own)
        if why is None:
            continue
        healed.append(
            Healed(
                replica=own.name,
                cluster=own.cluster,
                pools=own.pools,
                why=why,
                due=failure_due(own, spec),
            )
        )
        expires = avoided_until(own, spec, now)
        if expires <= now:
            continue  # moved again, but its pools are no longer avoided
        for pool in own.pools:
            failures[(own.cluster, pool)] = FailedPlacement(
                cluster=own.cluster,
                pool=pool,
                expires_at=expires,
                replica=own.name,
                reason=capped(why),
            )
    return Memory(tuple(healed), failures)


# -- phase 2: retain -------------------------------------------------------------------------


def eviction(
    own: OwnReplica, healing: bool, clusters: Mapping[str, Cluster], spec: DeploymentSpec
) -> str | None:
    """Why a replica must leave its place, or None if it may stay. A replica its cluster
    has not admitted moves when that cluster's tenancy rules refuse it (usable.py): it
    would wait there for ever, and runs nothing there to restart."""
    if healing:
        if own.admission == OVERCOMMITTED:
            return "its cluster did not admit it"
        if pods_not_created(own) is not None:
            return "its cluster did not create its pods"
        return "its pods are unschedulable"
    cluster = clusters.get(own.cluster)
    if cluster is None:
        return f"cluster {own.cluster} is not selected or no longer exists"
    taints = cluster.untolerated(spec.tolerations, "NoExecute")
    if taints:
        t = taints[0]
        return f"cluster {own.cluster} has taint {t.key}={t.value}:NoExecute, not tolerated"
    refused = usable.tenancy_refusal(cluster, spec) if own.admission == WAITING else None
    if refused is not None:
        return f"cluster {own.cluster} will not admit it: {refused.why}"
    return None


def retain(
    inputs: Inputs, clusters: Mapping[str, Cluster], memory: Memory, matching: Matching
) -> Retained:
    """Keep every replica that may stay, its engines re-resolved on the pools they use."""
    spec = inputs.deployment
    healed = {h.replica for h in memory.healed}
    kept: dict[int, Staying] = {}
    moving: list[tuple[OwnReplica, str]] = []
    held: list[OwnReplica] = []
    for own in sorted(inputs.own, key=lambda r: r.index):
        if own.cluster in inputs.held:
            held.append(own)
            continue
        why = eviction(own, own.name in healed, clusters, spec)
        if why is not None:
            moving.append((own, why))
            continue
        cluster = clusters[own.cluster]
        engines: list[PlacedEngine | None] = []
        for shape in spec.engines:
            old = next((e for e in own.engines if e.name == shape.name), None)
            pool = cluster.pool(old.pool) if old is not None else None
            engines.append(matching.resolve(shape, pool) if pool is not None else None)
        kept[own.index] = Staying(own, tuple(engines))
    return Retained(kept, tuple(moving), tuple(held))


# -- phase 3: scale down ---------------------------------------------------------------------


def scale_down(
    retained: Retained, replicas: int, unadmitted: AbstractSet[str] = frozenset()
) -> tuple[Retained, tuple[OwnReplica, ...]]:
    """The replicas that stay and those removed (by index), by rule "victim order"."""
    everyone = retained.everyone()
    excess = len(everyone) - replicas
    if excess <= 0:
        return retained, ()
    leaving = {own.name for own, _ in retained.moving} | {own.name for own in retained.held}
    replicas_on = Counter(own.cluster for own in everyone)
    removed: list[OwnReplica] = []
    for _ in range(excess):
        victim = min(everyone, key=lambda o: victim_order(o, leaving, replicas_on, unadmitted))
        everyone.remove(victim)
        replicas_on[victim.cluster] -= 1
        removed.append(victim)
    gone = {o.index for o in removed}
    survivors = Retained(
        {i: k for i, k in retained.kept.items() if i not in gone},
        tuple((o, why) for o, why in retained.moving if o.index not in gone),
        tuple(o for o in retained.held if o.index not in gone),
    )
    return survivors, tuple(sorted(removed, key=lambda o: o.index))


def own_charge(own: OwnReplica, engines: tuple[PlacedEngine, ...], spec: DeploymentSpec) -> Charge:
    """One of the deployment's replicas as the ledgers charge it, with these engines."""
    return Charge(
        namespace=spec.namespace,
        name=own.name,
        cluster=own.cluster,
        engines=engines,
        pods_scheduled=own.pods_scheduled.status == "True",
        scheduled_at=own.scheduled_at,
    )


def kept_charges(retained: Retained, spec: DeploymentSpec) -> dict[str, list[Charge]]:
    """What the kept replicas hold, by cluster: the engines still resolved on their pools."""
    charges: dict[str, list[Charge]] = {}
    for kept in retained.kept.values():
        done = tuple(e for e in kept.engines if e is not None)
        if done:
            charges.setdefault(kept.own.cluster, []).append(own_charge(kept.own, done, spec))
    return charges


def with_charge_label(
    replica: PlannedReplica, clusters: Mapping[str, Cluster], spec: DeploymentSpec, now: datetime
) -> PlannedReplica:
    """A replica kept exactly where it is is `counted` once its pools' fresh observations
    contain it; every other change leaves it pending (charge_label.py)."""
    if replica.change is not Change.KEPT or replica.previous is None:
        return replica
    charge = own_charge(replica.previous, replica.engines, spec)
    return replace(replica, counted=counted_by_pools(charge, clusters.get(replica.cluster), now))


# -- phase 4: fill ---------------------------------------------------------------------------


# The most clusters of equal cluster order whose fragmentation one replica compares (the
# first that hold it, by name): each costs its pools' ledgers, built from its histograms
# and its charged replicas (design/scheduler.md, "Fragmentation", cost).
CLUSTERS_COMPARED = 8


def _on_empty_nodes(pool: Pool, engine: PlacedEngine) -> list[Reservation]:
    """The engine's pods each on an empty node of the pool: how a pool counted without
    nodes (a fallback) is scored, the pessimistic reading WholeNode charges by."""
    return [
        Reservation(None, pool.kinds.empty_node, demand)
        for copy, _ in engine_pods(pool, engine)
        for demand in copy
    ]


@dataclass(frozen=True, slots=True)
class _Fitted:
    """One engine fitted on one pool: its trial ledger and the fragmentation it adds."""

    engine: PlacedEngine
    pool: Pool
    trial: PoolLedger
    growth: Fraction


@dataclass(frozen=True, slots=True)
class _Attempt:
    """A replica's engines fitted on one cluster, charged to trial copies only."""

    cluster: Cluster
    placed: dict[str, PlacedEngine]
    trials: dict[PoolKey, PoolLedger]
    claimed: Counter[str]
    growth: Fraction


class _Filler:
    """Places engines against one pass's PoolLedgers; its state is what it has charged,
    and what it derived from that (the demand per pool, each cluster's last attempt)."""

    def __init__(
        self,
        spec: DeploymentSpec,
        clusters: Mapping[str, Cluster],
        ledgers: PoolLedgers,
        matching: Matching,
        avoid: frozenset[PoolKey],
    ) -> None:
        self.spec = spec
        self.clusters = clusters
        self.ledgers = ledgers
        self.matching = matching
        self.avoid = avoid
        self.refusals: Mapping[str, usable.Refusal] = {}
        self.quota = QuotaLedger(Tenant().quota)
        # The first quota shortfall the current attempt met, for its Diagnosis.
        self.quota_short: QuotaShortfall | None = None
        self._shapes: dict[PoolKey, Shapes] = {}
        # Each cluster's last fitting attempt for a whole replica: still what a new attempt
        # would find until something is committed there (`commit` drops it), since the
        # quota only tightens once replicas are placed anywhere (fill releases before).
        self._attempts: dict[str, _Attempt] = {}

    def with_tenant(
        self, tenant: Tenant, charged: Counter[str], refusals: Mapping[str, usable.Refusal]
    ) -> _Filler:
        """The clusters that do not take the deployment (usable.refusals); the quota charged
        with what the namespace holds."""
        self.refusals = refusals
        self.quota = QuotaLedger(tenant.quota, tenant.used + charged)
        return self

    def admits(self, cluster: Cluster) -> bool:
        return cluster.name not in self.refusals

    def shapes(self, pool: Pool) -> Shapes:
        """The demand a placement on this pool is scored against (rule "least
        fragmentation"): this deployment's pods as resolved there, and a whole node."""
        if pool.key not in self._shapes:
            pods: list[Demand] = []
            for engine in self.spec.engines:
                resolved = self.matching.resolve(engine, pool)
                for copy, _ in engine_pods(pool, resolved) if resolved is not None else ():
                    pods.extend(copy)
            self._shapes[pool.key] = expected_demand(pods, pool.kinds.empty_node)
        return self._shapes[pool.key]

    def _fit_pool(
        self,
        cluster: Cluster,
        pool: Pool,
        engine: EngineShape,
        trials: dict[PoolKey, PoolLedger],
        claimed: Counter[str],
    ) -> _Fitted | Cause:
        """One engine on one pool: the resolved engine, the charged trial and how much it
        grows the pool's fragmentation, or the cause."""
        if pool.key in self.avoid:
            return Cause.RECENTLY_FAILED
        resolved = self.matching.resolve(engine, pool)
        if resolved is None:
            return Cause.SELECTOR_MISMATCH
        short = self.quota.shortfall(claimed + devices_of((resolved,)))
        if short is not None:
            self.quota_short = self.quota_short or short
            return Cause.QUOTA_EXCEEDED
        trial = trials.get(pool.key) or self.ledgers.ledger(cluster, pool).copy()
        before = len(trial.reservations)
        if place_engine(trial, pool, resolved):
            if self.ledgers.basis(cluster, pool).observed:
                taken = trial.reservations[before:]
            else:  # no node is seen: each pod is assumed on an empty node, as WholeNode counts
                taken = _on_empty_nodes(pool, resolved)
            return _Fitted(resolved, pool, trial, growth(taken, self.shapes(pool)))
        return shortage(trial, pool, resolved)

    def attempt(
        self, cluster: Cluster, engines: Sequence[EngineShape]
    ) -> _Attempt | list[PoolRefusal]:
        """These engines on one cluster, each on the fitting pool it fragments least
        (ties: rule "pool order"), charged to trial copies only; or why the engine that
        fits nowhere there was refused by each pool."""
        trials: dict[PoolKey, PoolLedger] = {}
        placed: dict[str, PlacedEngine] = {}
        claimed: Counter[str] = Counter()
        grows = Fraction(0)
        for engine in engines:
            refused: list[PoolRefusal] = []
            fitting: list[_Fitted] = []
            for pool in self.matching.pool_order(engine, cluster.pools):
                fitted = self._fit_pool(cluster, pool, engine, trials, claimed)
                if isinstance(fitted, Cause):
                    refused.append(PoolRefusal(cluster.name, pool.name, fitted))
                else:
                    fitting.append(fitted)
            if not fitting:
                return refused
            best = min(fitting, key=lambda f: f.growth)  # the first on ties: rule "pool order"
            placed[engine.name], trials[best.pool.key] = best.engine, best.trial
            claimed.update(devices_of((best.engine,)))
            grows += best.growth
        return _Attempt(cluster, placed, trials, claimed, grows)

    def _replica_on(self, cluster: Cluster) -> _Attempt | list[PoolRefusal]:
        """`attempt` for every engine of a replica, reusing the cluster's last fitting
        attempt while nothing was committed there and the quota still allows it."""
        cached = self._attempts.get(cluster.name)
        if cached is not None and self.quota.shortfall(cached.claimed) is None:
            return cached
        attempted = self.attempt(cluster, self.spec.engines)
        if isinstance(attempted, _Attempt):
            self._attempts[cluster.name] = attempted
        return attempted

    def commit(self, attempt: _Attempt) -> dict[str, PlacedEngine]:
        self._attempts.pop(attempt.cluster.name, None)
        self.ledgers.commit(attempt.trials)
        self.quota.charge(attempt.claimed)
        return attempt.placed

    def try_cluster(
        self, cluster: Cluster, engines: Sequence[EngineShape]
    ) -> dict[str, PlacedEngine] | list[PoolRefusal]:
        """Place these engines on one cluster (`attempt`) and charge them if all fit."""
        attempted = self.attempt(cluster, engines)
        return attempted if isinstance(attempted, list) else self.commit(attempted)

    def eligible(self) -> tuple[list[Cluster], list[PoolRefusal]]:
        """Clusters that take new replicas, and a refusal for each pool of those that do not."""
        usable: list[Cluster] = []
        refused: list[PoolRefusal] = []
        tolerations = self.spec.tolerations
        for cluster in self.clusters.values():
            refusal = self.refusals.get(cluster.name)
            if refusal is not None:
                cause = refusal.cause
            elif not cluster.ready:
                cause = Cause.CLUSTER_NOT_READY
            elif cluster.untolerated(tolerations, "NoSchedule") or cluster.untolerated(
                tolerations, "NoExecute"
            ):
                cause = Cause.TAINT_NOT_TOLERATED
            else:
                usable.append(cluster)
                continue
            refused.extend(PoolRefusal(cluster.name, pool.name, cause) for pool in cluster.pools)
        return usable, refused

    def place_anywhere(
        self, replicas_on: Mapping[str, int]
    ) -> tuple[Cluster, dict[str, PlacedEngine]] | Diagnosis:
        """Among the clusters with the fewest replicas of this deployment where it fits
        (rule "cluster order"; the first CLUSTERS_COMPARED of them by name), the one it
        fragments least, ties by name; or why none takes it."""
        usable, refused = self.eligible()
        replicas_on = spread_over(self.spec, replicas_on)
        self.quota_short = None
        best: _Attempt | None = None
        fewest, compared = 0, 0
        for cluster in sorted(usable, key=lambda c: cluster_order(c, replicas_on)):
            if best is not None and replicas_on.get(cluster.name, 0) > fewest:
                break  # rule "cluster order": the rest hold more replicas of this deployment
            if compared == CLUSTERS_COMPARED:
                break
            attempted = self._replica_on(cluster)
            if isinstance(attempted, list):
                refused.extend(attempted)
                continue
            compared += 1
            if best is None or attempted.growth < best.growth:
                best, fewest = attempted, replicas_on.get(cluster.name, 0)
        if best is not None:
            return best.cluster, self.commit(best)
        return Diagnosis(tuple(refused), self.quota_short) if refused else NOTHING_CHECKED


def _held_in_place(inputs: Inputs, retained: Retained) -> dict[int, PlannedReplica]:
    """Replicas on a cluster that cannot be seen stay exactly where they are."""
    return {
        own.index: PlannedReplica(
            index=own.index,
            name=own.name,
            cluster=own.cluster,
            engines=own.engines,
            change=Change.HELD,
            placed_at=placement_time.kept_at(own, inputs.now),
            previous=own,
            why=inputs.held[own.cluster],
        )
        for own in retained.held
    }


def _staying(
    staying: Staying, spec: DeploymentSpec, clusters: Mapping[str, Cluster], filler: _Filler
) -> tuple[PlacedEngine, ...] | None:
    """A kept replica's engines, those whose pool no longer holds them re-placed on
    its own cluster; None when they do not fit there (the replica must move)."""
    missing = [s for s, e in zip(spec.engines, staying.engines, strict=True) if e is None]
    if not missing:
        return tuple(e for e in staying.engines if e is not None)
    cluster = clusters[staying.own.cluster]
    if not filler.admits(cluster):
        return None  # new devices on a cluster that no longer takes the deployment: move
    placed = filler.try_cluster(cluster, missing)
    if not isinstance(placed, dict):
        return None
    return tuple(
        e if e is not None else placed[s.name]
        for s, e in zip(spec.engines, staying.engines, strict=True)
    )


def _kept_in_place(
    own: OwnReplica,
    engines: tuple[PlacedEngine, ...],
    dates: placement_time.MoveDates,
    now: datetime,
) -> PlannedReplica:
    """A replica that stays on its cluster: its stamp kept, or dated from the view when an
    engine moved to another pool there (placement_time.py)."""
    same = wire_form(engines) == wire_form(own.engines)
    repooled = {m.pool for e in engines for m in e.members} != set(own.pools)
    return PlannedReplica(
        index=own.index,
        name=own.name,
        cluster=own.cluster,
        engines=engines,
        change=Change.KEPT if same else Change.RESHAPED,
        placed_at=(dates.moved_at(own, now) if repooled else placement_time.kept_at(own, now)),
        previous=own,
    )


def _moved(
    own: OwnReplica,
    why: str,
    found: tuple[Cluster, dict[str, PlacedEngine]] | Diagnosis,
    spec: DeploymentSpec,
    dates: placement_time.MoveDates,
    now: datetime,
) -> PlannedReplica:
    """A replica that must move: where it goes (stamped from the view, placement_time.py),
    or stranded where it is."""
    if isinstance(found, Diagnosis):
        return PlannedReplica(
            index=own.index,
            name=own.name,
            cluster=own.cluster,
            engines=own.engines,
            change=Change.STRANDED,
            placed_at=placement_time.kept_at(own, now),
            previous=own,
            why=why,
        )
    cluster, placed = found
    return PlannedReplica(
        index=own.index,
        name=own.name,
        cluster=cluster.name,
        engines=tuple(placed[s.name] for s in spec.engines),
        change=Change.MOVED,
        placed_at=dates.moved_at(own, now),
        previous=own,
        why=why,
    )


def _free_indices(taken: AbstractSet[int]) -> Iterator[int]:
    index = 0
    while True:
        if index not in taken:
            yield index
        index += 1


def fill(
    inputs: Inputs,
    clusters: Mapping[str, Cluster],
    retained: Retained,
    removed: Sequence[OwnReplica],
    filler: _Filler,
    dates: placement_time.MoveDates,
) -> Filled:
    """Keep, then re-place, then add: every replica's place for this pass; a move is
    dated by `dates` (move_dates)."""
    spec, now = inputs.deployment, inputs.now
    planned = _held_in_place(inputs, retained)
    replicas_on: Counter[str] = Counter(k.own.cluster for k in retained.kept.values())
    moving = list(retained.moving)

    # Kept replicas: an engine whose pool no longer holds it is re-placed on the same cluster.
    for index in sorted(retained.kept):
        staying = retained.kept[index]
        engines = _staying(staying, spec, clusters, filler)
        if engines is None:
            replicas_on[staying.own.cluster] -= 1
            filler.quota.release(devices_of(e for e in staying.engines if e is not None))
            why = f"its pools can no longer hold its shape on cluster {staying.own.cluster}"
            moving.append((staying.own, why))
            continue
        planned[index] = _kept_in_place(staying.own, engines, dates, now)

    # Replicas that must move: anywhere else that fits, or stranded where they are.
    diagnosis: Diagnosis | None = None
    for own, why in sorted(moving, key=lambda m: m[0].index):
        found = filler.place_anywhere(replicas_on)
        if isinstance(found, Diagnosis):
            diagnosis = found
            filler.quota.charge(devices_of(own.engines))  # stranded: it still holds them
        else:
            replicas_on[found[0].name] += 1
        planned[own.index] = _moved(own, why, found, spec, dates, now)

    # New replicas at the lowest free indices, until the count is reached or nothing fits.
    free = _free_indices(set(planned) | {o.index for o in removed})
    while len(planned) < spec.replicas:
        found = filler.place_anywhere(replicas_on)
        if isinstance(found, Diagnosis):
            diagnosis = found
            break
        cluster, placed = found
        replicas_on[cluster.name] += 1
        index = next(free)
        planned[index] = PlannedReplica(
            index=index,
            name=spec.replica_name(index),
            cluster=cluster.name,
            engines=tuple(placed[s.name] for s in spec.engines),
            change=Change.PLACED,
            placed_at=now,
        )
    return Filled(planned, diagnosis)


def move_dates(inputs: Inputs, healed: Sequence[Healed]) -> placement_time.MoveDates:
    """What the view dates about each existing replica's move, were it to move: a healed
    failure by its own time (failure_due); a cluster missing past the grace by when it
    was first seen missing plus the grace. Anything else (a NoExecute taint, a pool gone
    or no longer matching) carries no time: placement_time dates it by the view."""
    dues = {h.replica: h.due for h in healed if h.due is not None}
    grace = inputs.deployment.missing_cluster_grace
    for own in inputs.own:
        missing = inputs.missing_since.get(own.cluster)
        if own.name not in dues and missing is not None:
            dues[own.name] = missing + grace
    return placement_time.MoveDates(dues, placement_time.newest_observation(inputs.clusters))


def wire_form(engines: Sequence[PlacedEngine]) -> tuple[PlacedEngine, ...]:
    """Engines as a ModelReplica spells them: the pool kind is not on the wire."""
    return tuple(
        replace(
            e,
            members=tuple(
                replace(m, requests=tuple(replace(r, kind=None) for r in m.requests))
                for m in e.members
            ),
        )
        for e in engines
    )


def _others_on(inputs: Inputs, cluster: str) -> tuple[Charge, ...]:
    others = inputs.others.get(cluster)
    return () if others is None else others.charges


def _others_notes(inputs: Inputs, cluster: str) -> tuple[str, ...]:
    others = inputs.others.get(cluster)
    return () if others is None else others.notes


def plan(inputs: Inputs, matcher: Matcher) -> Plan:
    """Decide where every replica of the deployment runs. Raises InvalidSelector."""
    spec = inputs.deployment
    clusters = {c.name: c for c in sorted(inputs.clusters, key=lambda c: c.name)}
    matching = Matching(matcher, spec.engines)
    memory = remember(inputs)
    refusals = usable.refusals(clusters.values(), spec, inputs.tenant.labels)
    retained = retain(inputs, clusters, memory, matching)
    retained, removed = scale_down(retained, spec.replicas, _unadmitted(retained, refusals))
    kept = kept_charges(retained, spec)
    ledgers = PoolLedgers(inputs.now, lambda name: (*_others_on(inputs, name), *kept.get(name, ())))
    filler = _Filler(spec, clusters, ledgers, matching, memory.avoid).with_tenant(
        inputs.tenant, _quota_charged(retained, kept), refusals
    )
    filled = fill(inputs, clusters, retained, removed, filler, move_dates(inputs, memory.healed))
    replicas = tuple(
        with_charge_label(filled.replicas[i], clusters, spec, inputs.now)
        for i in sorted(filled.replicas)
    )

    failures = sorted(memory.failures.values(), key=lambda f: (-f.expires_at.timestamp(), f.key))
    failures = sorted(failures[:MAX_FAILED_PLACEMENTS], key=lambda f: (f.expires_at, f.key))
    return Plan(
        replicas=replicas,
        removed=removed,
        healed=memory.healed,
        failed_placements=tuple(failures),
        desired=spec.replicas,
        diagnosis=filled.diagnosis,
        bases=dict(ledgers.bases),
        reservations=ledgers.reservations(),
        others_notes=tuple(n for c in ledgers.clusters_read for n in _others_notes(inputs, c)),
        unadmitted=tuple(
            r
            for r in replicas
            if r.change in (Change.KEPT, Change.RESHAPED) and r.cluster in refusals
        ),
        refusals=refusals,
    )


def _unadmitted(retained: Retained, refusals: Mapping[str, usable.Refusal]) -> frozenset[str]:
    """The replicas on a selected cluster that no longer takes the deployment, by name."""
    return frozenset(own.name for own in retained.everyone() if own.cluster in refusals)


def _quota_charged(retained: Retained, kept: Mapping[str, Sequence[Charge]]) -> Counter[str]:
    """What the deployment's staying replicas claim: the kept ones' resolved engines and
    the held ones' engines (moving replicas are charged where they land)."""
    charged: Counter[str] = Counter()
    for charges in kept.values():
        for charge in charges:
            charged.update(devices_of(charge.engines))
    for own in retained.held:
        charged.update(devices_of(own.engines))
    return charged
