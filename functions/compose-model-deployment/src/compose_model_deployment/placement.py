"""Placement: where each replica of one ModelDeployment runs.

`plan` is a pure, deterministic function of the deployment, the selected
InferenceClusters, this deployment's existing replicas, the other replicas'
charges, the failure memory and `now`. It never reads the clock or the wire.

Phases (each a small function below)
    1. remember   drop expired failures; record the (cluster, pool) pairs of
                  replicas Unschedulable for longer than the grace period.
    2. retain     keep every replica that is not failing where it is; an
                  edited shape re-resolves its device requests on the SAME
                  pool when that pool still matches (an engine whose pool
                  vanished or no longer matches is re-placed on the same
                  cluster if it fits there, else the replica moves).
    3. scale down remove the excess: replicas being re-placed first, then
                  those whose pods are not all scheduled, then from the
                  cluster with the most replicas of this deployment, then
                  the highest index.
    4. fill       re-place failing/evicted replicas, then add new ones at the
                  lowest free indices; each goes to the eligible cluster with
                  the fewest replicas of this deployment (ties by name), every
                  engine on one pool (smallest matching hardware first,
                  then by name), all engines of a
                  replica on one cluster. Capacity is charged as it is used.

Invariants
    - A healthy replica never moves: only a replica that is Unschedulable
      past the grace period, whose cluster is gone or unselected past the
      missing-cluster grace period (absence.py; until then it is HELD where
      it is, not counted as scheduled or ready), whose
      cluster carries a NoExecute taint it does not tolerate, or whose pool
      can no longer hold its shape is re-placed; and if no other place fits,
      it stays where it is (stranded, not counted as scheduled).
    - Nothing is deleted except by scale-down to `spec.replicas`.
    - One pass never overcommits: every new placement is charged to the
      ledger before the next is tried (see fit.py, capacity.py).
    - Identity is (namespace, name); the same input in any order gives the
      same plan (everything is sorted by name, index or key first).

Deliberate limits
    - Greedy across replicas and engines (see fit.py); exact per gang copy.
    - A cluster that is not Ready or has an untolerated NoSchedule taint
      gets no NEW replicas but keeps the ones it has (Kubernetes semantics:
      NoSchedule does not evict, NoExecute does).
    - Healing records every pool of the failing replica (the condition does
      not say which engine failed); they are avoided for `avoidFor`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from compose_model_deployment.capacity import (
    Basis,
    charge_replicas,
    empty_ledger,
    place_engine,
    shortage,
)
from compose_model_deployment.diagnosis import NOTHING_CHECKED, Cause, Diagnosis, Verdict
from compose_model_deployment.fit import Ledger, Reservation
from compose_model_deployment.model import (
    Charge,
    Cluster,
    DeploymentSpec,
    EngineShape,
    FailedPlacement,
    OwnReplica,
    PlacedEngine,
    PlacedMember,
    Pool,
    PoolKey,
    ResolvedRequest,
)

MAX_FAILED_PLACEMENTS = 32


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


Matcher = Callable[[Sequence[Mapping], Sequence[Mapping]], Sequence[KindMatchLike] | None]
ChargesFor = Callable[[str], Sequence[Charge]]


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
class Inputs:
    deployment: DeploymentSpec
    clusters: tuple[Cluster, ...]
    own: tuple[OwnReplica, ...]
    failed: tuple[FailedPlacement, ...]
    now: datetime
    # Clusters whose replicas stay where they are this pass, with the reason
    # (absence.py decides: missing within the grace period, or unreadable).
    held: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PlannedReplica:
    index: int
    name: str
    cluster: str
    engines: tuple[PlacedEngine, ...]
    change: Change
    placed_at: datetime
    previous: OwnReplica | None = None
    why: str = ""

    @property
    def scheduled(self) -> bool:
        return self.change not in (Change.STRANDED, Change.HELD)

    @property
    def pools(self) -> tuple[str, ...]:
        return tuple(sorted({m.pool for e in self.engines for m in e.members}))


@dataclass(frozen=True, slots=True)
class Healed:
    replica: str
    cluster: str
    pools: tuple[str, ...]
    why: str


@dataclass(frozen=True, slots=True)
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
    capacity_notes: tuple[str, ...] = ()

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


# A retained replica and its engines re-resolved on their pools (None: needs a new pool).
_Kept = tuple[OwnReplica, list[PlacedEngine | None]]


class _Planner:
    def __init__(self, inputs: Inputs, charges_for: ChargesFor, matcher: Matcher) -> None:
        self.inputs = inputs
        self.spec = inputs.deployment
        self.now = inputs.now
        self.clusters = {c.name: c for c in sorted(inputs.clusters, key=lambda c: c.name)}
        self.charges_for = charges_for
        self.matcher = matcher
        self.ledgers: dict[PoolKey, Ledger] = {}
        self.bases: dict[PoolKey, Basis] = {}
        self.capacity_notes: list[str] = []
        self.kept_charges: dict[str, list[Charge]] = {}
        self._resolved: dict[tuple[str, PoolKey], PlacedEngine | None] = {}
        self.held: list[OwnReplica] = []

    # -- matching ---------------------------------------------------------------------------

    def resolve(self, engine: EngineShape, pool: Pool) -> PlacedEngine | None:
        """The engine's members bound to this pool's kinds, or None if a request matches none."""
        cache_key = (engine.name, pool.key)
        if cache_key in self._resolved:
            return self._resolved[cache_key]
        members: list[PlacedMember] = []
        resolved: PlacedEngine | None = None
        for member in engine.members:
            requests: list[ResolvedRequest] = []
            if member.requests:
                try:
                    matches = self.matcher([r.to_wire() for r in member.requests], pool.devices)
                except ValueError as err:
                    raise InvalidSelector(f"engine {engine.name}: {err}") from err
                if matches is None:
                    break
                by_name = {r.name: r for r in member.requests}
                declared = {str(d.get("name")): d for d in pool.devices}
                for match in matches:
                    if not match.claimed:
                        continue
                    request = by_name[match.request]
                    requests.append(
                        ResolvedRequest(
                            name=request.name,
                            device_class=str(declared[match.kind].get("deviceClassName", "")),
                            count=request.count,
                            selectors=request.selectors,
                            kind=match.kind,
                        )
                    )
            members.append(
                PlacedMember(member.role, pool.name, tuple(requests), member.pods_per_copy)
            )
        else:
            resolved = PlacedEngine(engine.name, engine.copies, tuple(members))
        self._resolved[cache_key] = resolved
        return resolved

    # -- capacity ---------------------------------------------------------------------------

    def ledger(self, cluster: Cluster, pool: Pool) -> Ledger:
        if pool.key not in self.ledgers:
            ledger, basis = empty_ledger(pool, cluster, self.now)
            charges = [
                c
                for c in (*self.charges_for(cluster.name), *self.kept_charges.get(cluster.name, ()))
                if any(e.pool == pool.name for e in c.engines)
            ]
            self.capacity_notes.extend(charge_replicas(ledger, pool, basis, charges))
            self.ledgers[pool.key] = ledger
            self.bases[pool.key] = basis
        return self.ledgers[pool.key]

    def pool_preference(self, engine: EngineShape, pools: Sequence[Pool]) -> list[Pool]:
        """Pools in the order an engine tries them: smallest matching hardware first.

        The key is the most devices per node among the kinds the engine
        claims, so a 1-GPU engine tries a 4-GPU pool before an 8-GPU one and
        large nodes stay whole for engines that need them. Ties, claimless
        engines and pools that do not match at all go by name.
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

    def try_cluster(
        self,
        cluster: Cluster,
        engines: Sequence[EngineShape],
        avoid: frozenset[PoolKey],
    ) -> dict[str, PlacedEngine] | list[Verdict]:
        """Place these engines on one cluster, each on one pool; commit only if all fit.

        On failure, returns why each pool refused the engine that did not fit.
        """
        trials: dict[PoolKey, Ledger] = {}
        placed: dict[str, PlacedEngine] = {}
        for engine in engines:
            refused: list[Verdict] = []
            for pool in self.pool_preference(engine, cluster.pools):
                if pool.key in avoid:
                    refused.append(Verdict(cluster.name, pool.name, Cause.RECENTLY_FAILED))
                    continue
                resolved = self.resolve(engine, pool)
                if resolved is None:
                    refused.append(Verdict(cluster.name, pool.name, Cause.SELECTOR_MISMATCH))
                    continue
                trial = trials.get(pool.key) or self.ledger(cluster, pool).copy()
                if place_engine(trial, pool, resolved):
                    trials[pool.key] = trial
                    placed[engine.name] = resolved
                    break
                refused.append(Verdict(cluster.name, pool.name, shortage(trial, pool, resolved)))
            else:
                return refused
        for key, trial in trials.items():
            self.ledgers[key].adopt(trial)
        return placed

    # -- phases -----------------------------------------------------------------------------

    def remember(self) -> tuple[list[Healed], dict[PoolKey, FailedPlacement]]:
        memory: dict[PoolKey, FailedPlacement] = {}
        for failure in sorted(self.inputs.failed, key=lambda f: (f.key, f.expires_at)):
            if failure.expires_at > self.now:
                memory[failure.key] = failure
        healed: list[Healed] = []
        for own in sorted(self.inputs.own, key=lambda r: r.index):
            why = self.unschedulable_too_long(own)
            if why is None:
                continue
            healed.append(Healed(own.name, own.cluster, own.pools, why))
            for pool in own.pools:
                memory[(own.cluster, pool)] = FailedPlacement(
                    own.cluster, pool, self.now + self.spec.avoid_for, own.name, why[:1024]
                )
        return healed, memory

    def unschedulable_too_long(self, own: OwnReplica) -> str | None:
        ps = own.pods_scheduled
        if ps.status != "False" or ps.reason != "Unschedulable" or ps.since is None:
            return None
        # A condition older than the placement describes the previous placement.
        if own.placed_at is not None and ps.since < own.placed_at:
            return None
        if self.now - ps.since <= self.spec.unschedulable_grace:
            return None
        detail = f": {ps.message}" if ps.message else ""
        return f"unschedulable since {ps.since:%Y-%m-%dT%H:%M:%SZ}{detail}"

    def eviction(self, own: OwnReplica, healing: bool) -> str | None:
        if healing:
            return "its pods are unschedulable"
        cluster = self.clusters.get(own.cluster)
        if cluster is None:
            return f"cluster {own.cluster} is not selected or no longer exists"
        taints = cluster.untolerated(self.spec.tolerations, "NoExecute")
        if taints:
            t = taints[0]
            return f"cluster {own.cluster} has taint {t.key}={t.value}:NoExecute, not tolerated"
        return None

    def retain(
        self, healed_names: set[str]
    ) -> tuple[dict[int, _Kept], list[tuple[OwnReplica, str]]]:
        kept: dict[int, _Kept] = {}
        moving: list[tuple[OwnReplica, str]] = []
        for own in sorted(self.inputs.own, key=lambda r: r.index):
            if own.cluster in self.inputs.held:
                self.held.append(own)
                continue
            why = self.eviction(own, own.name in healed_names)
            if why is not None:
                moving.append((own, why))
                continue
            cluster = self.clusters[own.cluster]
            engines: list[PlacedEngine | None] = []
            for shape in self.spec.engines:
                old = next((e for e in own.engines if e.name == shape.name), None)
                pool = cluster.pool(old.pool) if old is not None else None
                engines.append(self.resolve(shape, pool) if pool is not None else None)
            kept[own.index] = (own, engines)
        return kept, moving

    def scale_down(
        self,
        kept: dict[int, _Kept],
        moving: list[tuple[OwnReplica, str]],
    ) -> list[OwnReplica]:
        everyone = [own for own, _ in kept.values()] + [own for own, _ in moving] + self.held
        excess = len(everyone) - self.spec.replicas
        if excess <= 0:
            return []
        # Replicas being re-placed or held on a cluster that cannot be seen go first.
        moving_names = {own.name for own, _ in moving} | {own.name for own in self.held}
        per_cluster = Counter(own.cluster for own in everyone)
        removed: list[OwnReplica] = []
        for _ in range(excess):
            victim = min(
                everyone,
                key=lambda o: (
                    0 if o.name in moving_names else 1 if o.pods_scheduled.status != "True" else 2,
                    -per_cluster[o.cluster],
                    -o.index,
                ),
            )
            everyone.remove(victim)
            per_cluster[victim.cluster] -= 1
            removed.append(victim)
        gone = {o.index for o in removed}
        for index in gone:
            kept.pop(index, None)
        moving[:] = [(o, why) for o, why in moving if o.index not in gone]
        self.held[:] = [o for o in self.held if o.index not in gone]
        return sorted(removed, key=lambda o: o.index)

    def eligible(self) -> tuple[list[Cluster], list[Verdict]]:
        """Clusters that take new replicas, and a verdict for each pool of those that do not."""
        usable: list[Cluster] = []
        refused: list[Verdict] = []
        for cluster in self.clusters.values():
            tolerations = self.spec.tolerations
            if not cluster.ready:
                cause = Cause.CLUSTER_NOT_READY
            elif cluster.untolerated(tolerations, "NoSchedule") or cluster.untolerated(
                tolerations, "NoExecute"
            ):
                cause = Cause.TAINT_NOT_TOLERATED
            else:
                usable.append(cluster)
                continue
            refused.extend(Verdict(cluster.name, pool.name, cause) for pool in cluster.pools)
        return usable, refused

    def place_anywhere(
        self, per_cluster: Counter[str], avoid: frozenset[PoolKey]
    ) -> tuple[Cluster, dict[str, PlacedEngine]] | Diagnosis:
        usable, refused = self.eligible()
        for cluster in sorted(usable, key=lambda c: (per_cluster[c.name], c.name)):
            placed = self.try_cluster(cluster, self.spec.engines, avoid)
            if isinstance(placed, dict):
                return cluster, placed
            refused.extend(placed)
        return Diagnosis(tuple(refused)) if refused else NOTHING_CHECKED

    def run(self) -> Plan:
        spec, now = self.spec, self.now
        healed, memory = self.remember()
        avoid = frozenset(memory)
        kept, moving = self.retain({h.replica for h in healed})
        removed = self.scale_down(kept, moving)

        for own, engines in kept.values():
            done = tuple(e for e in engines if e is not None)
            if done:
                self.kept_charges.setdefault(own.cluster, []).append(
                    Charge(
                        spec.namespace,
                        own.name,
                        own.cluster,
                        done,
                        own.pods_scheduled.status == "True",
                        own.scheduled_at,
                    )
                )

        planned: dict[int, PlannedReplica] = {
            own.index: PlannedReplica(
                own.index,
                own.name,
                own.cluster,
                own.engines,
                Change.HELD,
                own.placed_at or now,
                own,
                self.inputs.held[own.cluster],
            )
            for own in self.held
        }
        per_cluster: Counter[str] = Counter(own.cluster for own, _ in kept.values())

        for index in sorted(kept):
            own, engines = kept[index]
            missing = [s for s, e in zip(spec.engines, engines, strict=True) if e is None]
            if missing:
                placed = self.try_cluster(self.clusters[own.cluster], missing, avoid)
                if not isinstance(placed, dict):
                    del kept[index]
                    per_cluster[own.cluster] -= 1
                    moving.append(
                        (own, f"its pools can no longer hold its shape on cluster {own.cluster}")
                    )
                    continue
                engines = [
                    e if e is not None else placed[s.name]
                    for s, e in zip(spec.engines, engines, strict=True)
                ]
            final = tuple(e for e in engines if e is not None)
            same = wire_form(final) == wire_form(own.engines)
            repooled = {m.pool for e in final for m in e.members} != set(own.pools)
            planned[index] = PlannedReplica(
                index,
                own.name,
                own.cluster,
                final,
                Change.KEPT if same else Change.RESHAPED,
                now if repooled or own.placed_at is None else own.placed_at,
                own,
            )

        diagnosis: Diagnosis | None = None
        for own, why in sorted(moving, key=lambda m: m[0].index):
            found = self.place_anywhere(per_cluster, avoid)
            if isinstance(found, Diagnosis):
                diagnosis = found
                planned[own.index] = PlannedReplica(
                    own.index,
                    own.name,
                    own.cluster,
                    own.engines,
                    Change.STRANDED,
                    own.placed_at or now,
                    own,
                    why,
                )
                continue
            cluster, placed = found
            per_cluster[cluster.name] += 1
            planned[own.index] = PlannedReplica(
                own.index,
                own.name,
                cluster.name,
                tuple(placed[s.name] for s in spec.engines),
                Change.MOVED,
                now,
                own,
                why,
            )

        taken = set(planned) | {o.index for o in removed}
        index = 0
        while len(planned) < spec.replicas:
            while index in taken:
                index += 1
            found = self.place_anywhere(per_cluster, avoid)
            if isinstance(found, Diagnosis):
                diagnosis = found
                break
            cluster, placed = found
            per_cluster[cluster.name] += 1
            planned[index] = PlannedReplica(
                index,
                spec.replica_name(index),
                cluster.name,
                tuple(placed[s.name] for s in spec.engines),
                Change.PLACED,
                now,
            )
            taken.add(index)

        failures = sorted(memory.values(), key=lambda f: (-f.expires_at.timestamp(), f.key))
        failures = sorted(failures[:MAX_FAILED_PLACEMENTS], key=lambda f: (f.expires_at, f.key))
        return Plan(
            replicas=tuple(planned[i] for i in sorted(planned)),
            removed=tuple(removed),
            healed=tuple(healed),
            failed_placements=tuple(failures),
            desired=spec.replicas,
            diagnosis=diagnosis,
            bases=dict(self.bases),
            reservations={k: tuple(v.reservations) for k, v in sorted(self.ledgers.items())},
            capacity_notes=tuple(self.capacity_notes),
        )


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


def plan(inputs: Inputs, charges_for: ChargesFor, matcher: Matcher) -> Plan:
    """Decide where every replica of the deployment runs. Raises InvalidSelector."""
    return _Planner(inputs, charges_for, matcher).run()


def without_clock_noise(p: Plan) -> Plan:
    """The plan with capacity internals dropped, for comparing plans in tests."""
    return replace(p, bases={}, reservations={}, capacity_notes=())
