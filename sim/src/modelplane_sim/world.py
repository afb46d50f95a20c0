"""One policy's run: arrivals and departures replayed through the real placement core.

Each step of simulated time (`now` is an input; nothing reads the clock):

    1. depart     deployments whose lifetime ended are deleted: their pods
                  leave their nodes, their replicas stop being charged;
    2. retry      pending replicas try to bind again (kube-scheduler retries
                  unschedulable pods as capacity frees);
    3. publish    every `republish`, if the policy has an agent, each pool's
                  true histogram goes into status.gpuPools (observedAt = now),
                  and the InferenceClusters are read again with
                  `capacity.readers.read_cluster`; in between the core sees
                  the last one (stale: departures are not seen, placements
                  since are charged by the assumed node choice);
    4. reconcile  every deployment that needs a pass, in name order, is
                  planned through the function's entrance
                  (`compose_model_deployment.plan`, the phases production
                  runs) on a typed Request: the deployment read by
                  `read_deployment`, its replicas as `OwnReplica`s
                  (PodsScheduled False/Unschedulable while pending, so
                  healing runs after the grace period), its
                  `failedPlacements` from its last plan, the fleet's
                  clusters with every other replica as a `Charge` in its
                  ModelReplica wire form (`wire_form`), a tenant without
                  labels or quota, and no in-flight bound (the simulator
                  has no charge label to count pending replicas by). A
                  pass that plans nothing keeps every replica, as the
                  function does. New and moved replicas bind at
                  once (`binder.bind`, `BIND_DELAY` after `now`, so a
                  histogram published at `now` does not contain them).
                  An over-promise is a placement whose first bind fails.

A deployment needs a pass when it lacks replicas, or a pending replica is
past its grace period, or a failed placement expired. A deployment that
found no room is not planned again until something could have freed some
(a departure, a publication, a replica moved or removed: `epoch`); the pass
it skips would have found the same (sim/tests checks the runs are
equal with `skip_unchanged=False`; the default run's are too, at half the
CPU). Healthy replicas never move, so a deployment whose replicas are all
bound needs no pass.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from compose_model_deployment import (
    Change,
    DeploymentInput,
    DeploymentSpec,
    FailedPlacement,
    Matcher,
    Matching,
    OthersOnCluster,
    Own,
    OwnReplica,
    PlannedReplica,
    ReplicaCondition,
    Reported,
    Request,
    Room,
    Tenant,
    Unplanned,
    View,
    plan,
    read_deployment,
    wire_form,
)
from compose_model_deployment import Fleet as FetchedFleet
from modelplane_common import currency
from modelplane_common.capacity.fleet import Charge, Cluster, PlacedEngine
from modelplane_common.capacity.readers import read_cluster
from modelplane_common.observation import Observation
from modelplane_common.timeutil import parse_duration

from modelplane_sim.arrivals import Arrival
from modelplane_sim.binder import Bound, NodeChoice, PoolNodes, bind, pod_demands, release
from modelplane_sim.fleet import Fleet
from modelplane_sim.policies import Policy

NAMESPACE = "sim"
BIND_DELAY = timedelta(seconds=5)


@dataclass(frozen=True, slots=True)
class Settings:
    step: timedelta = timedelta(minutes=1)
    republish: timedelta = timedelta(minutes=3)
    choice: NodeChoice = NodeChoice.SPREAD
    seed: int = 1
    # Skip the pass of a deployment that found no room while nothing could have freed
    # some (module docstring); False plans it every step, for the test that it is the same.
    skip_unchanged: bool = True
    # Whether a packing binder's InferenceCluster declares spec.nodeScoring: Pack; False
    # leaves every cluster at the default (the core assumes spread), as before the field.
    declare_scoring: bool = True


@dataclass(slots=True)
class Replica:
    """One placement of one replica: where the core put it and what really bound."""

    name: str
    index: int
    cluster: str
    engines: tuple[PlacedEngine, ...]  # as planned: each request names its pool kind
    placed_at: datetime
    pods: int
    bound: list[Bound] | None = None
    scheduled_at: datetime | None = None
    pending_since: datetime | None = None

    def own(self) -> OwnReplica:
        """As the deployment's composed ModelReplica reads back."""
        if self.bound is not None:
            ps = ReplicaCondition("True", "AllPodsScheduled", "", since=self.scheduled_at)
        else:
            ps = ReplicaCondition(
                "False", "Unschedulable", "no node fits", since=self.pending_since
            )
        return OwnReplica(
            index=self.index,
            name=self.name,
            cluster=self.cluster,
            engines=wire_form(self.engines),
            pods_scheduled=ps,
            scheduled_at=self.scheduled_at,
            ready=self.bound is not None,
            placed_at=self.placed_at,
        )

    def charge(self) -> Charge:
        """As another deployment's pass reads this ModelReplica from the fleet listing."""
        return Charge(
            namespace=NAMESPACE,
            name=self.name,
            cluster=self.cluster,
            engines=wire_form(self.engines),
            pods_scheduled=self.bound is not None,
            scheduled_at=self.scheduled_at,
        )


class _OthersView(Mapping[str, OthersOnCluster]):
    """The fleet's charges by cluster without one deployment's own, built per lookup."""

    def __init__(self, charges: Mapping[str, Mapping[str, Charge]], own: set[str]) -> None:
        self._charges = charges
        self._own = own

    def __getitem__(self, cluster: str) -> OthersOnCluster:
        on = self._charges[cluster]
        return OthersOnCluster(tuple(c for n, c in on.items() if n not in self._own))

    def __iter__(self) -> Iterator[str]:
        return iter(self._charges)

    def __len__(self) -> int:
        return len(self._charges)


@dataclass(slots=True)
class Live:
    """A deployment between its arrival and its departure."""

    arrival: Arrival
    deployment: DeploymentInput
    arrived: datetime
    matching: Matching
    replicas: dict[int, Replica] = field(default_factory=dict)
    failed: tuple[FailedPlacement, ...] = ()
    stuck_at_epoch: int | None = None  # the epoch of a pass that found no room
    invalid: str | None = None  # why the core keeps it as it is (a selector that fails)
    first_bound: dict[int, datetime] = field(default_factory=dict)

    @property
    def spec(self) -> DeploymentSpec:
        return self.deployment.spec

    @property
    def departs(self) -> datetime:
        return self.arrived + self.arrival.lifetime

    @property
    def bound(self) -> int:
        return sum(1 for r in self.replicas.values() if r.bound is not None)


@dataclass(slots=True)
class Tally:
    placements: int = 0
    placed_pods: int = 0
    overpromised: int = 0  # placements whose first bind failed
    overpromised_pods: int = 0
    never_bound_pods: int = 0  # pods of placements that ended (moved, deleted) unbound
    passes: int = 0
    waits: list[float] = field(default_factory=list)  # minutes to placement; inf: never


@dataclass(frozen=True, slots=True)
class Sample:
    minute: float
    allocated: int
    waiting: int
    overpromised_pods: int
    stranded: int


class World:
    def __init__(
        self,
        fleet: Fleet,
        policy: Policy,
        matcher: Matcher,
        settings: Settings,
        start: datetime,
    ) -> None:
        self.fleet, self.policy, self.matcher, self.settings = fleet, policy, matcher, settings
        # A cluster's declared node scoring decides its binder (and its InferenceCluster's
        # spec.nodeScoring); else the run's `--binder`.
        self.scoring = {c.name: c.scoring for c in fleet.clusters}
        self.start = start
        self.rnd = random.Random(settings.seed)
        self.nodes: dict[str, dict[str, PoolNodes]] = {
            c.name: {p.name: p.nodes() for p in c.pools} for c in fleet.clusters
        }
        self.metric = {
            (c.name, p.name): tuple(n in fleet.metric_kinds for n in p.kinds.names)
            for c in fleet.clusters
            for p in c.pools
        }
        self.max_age = parse_duration(fleet.max_age)
        self.live: dict[str, Live] = {}
        self.charges: dict[str, dict[str, Charge]] = {c.name: {} for c in fleet.clusters}
        self.tally = Tally()
        self.samples: list[Sample] = []
        self.epoch = 0
        self.allocated = 0
        self.published_at: datetime | None = None
        # What the real reader said about the InferenceClusters (a policy misspelled shows here).
        self.notes: set[str] = set()
        self.clusters: tuple[Cluster, ...] = self._read_clusters(None)

    # -- the InferenceClusters the core reads ---------------------------------------------

    def _read_clusters(self, now: datetime | None, current: bool = True) -> tuple[Cluster, ...]:
        """The clusters as compose-inference-cluster publishes them at `now` (None: before
        the first report): every pool observed then, current or judged stale."""
        observation = {**self.policy.observation, "maxAge": self.fleet.max_age}
        lease = None if now is None else now + currency.LEASE
        out = []
        for shape in self.fleet.clusters:
            gpu_pools = [] if now is None else self._published(shape.name, shape.spec, now, current)
            binder = self.scoring[shape.name] or self.settings.choice
            declared = binder if self.settings.declare_scoring else NodeChoice.SPREAD
            cluster, notes = read_cluster(
                shape.inference_cluster(observation, gpu_pools, declared, lease)
            )
            self.notes.update(notes)
            out.append(cluster)
        return tuple(out)

    def _published(self, cluster: str, spec: Mapping, now: datetime, current: bool) -> list[dict]:
        pools = []
        for declared in spec["nodePools"]:
            nodes = self.nodes[cluster][declared["name"]]
            seen = Observation(now, len(nodes.free), nodes.histogram())
            pools.append(
                {
                    "name": declared["name"],
                    "devices": declared["devices"],
                    **seen.to_wire(nodes.kinds),
                    currency.CURRENT: current,
                }
            )
        return pools

    # -- one step -------------------------------------------------------------------------

    def step(self, now: datetime, arriving: list[Arrival]) -> None:
        self._depart(now)
        self._retry(now)
        self._publish(now)
        for arrival in arriving:
            self._arrive(arrival)
        for name in sorted(self.live):
            live = self.live[name]
            if self._needs_pass(live, now):
                self._reconcile(live, now)
        self.samples.append(self._sample(now))

    def finish(self) -> None:
        """Close the run: placements still pending count as never bound; the time to
        placement of replicas still waiting is censored (left out of the percentiles)."""
        for live in self.live.values():
            self.tally.never_bound_pods += sum(
                r.pods for r in live.replicas.values() if r.bound is None
            )

    def _depart(self, now: datetime) -> None:
        for name in [n for n, live in self.live.items() if live.departs <= now]:
            live = self.live.pop(name)
            for index in list(live.replicas):
                self._drop(live, index)
            waited = [
                (live.first_bound[i] - live.arrived).total_seconds() / 60
                if i in live.first_bound
                else float("inf")
                for i in range(live.spec.replicas)
            ]
            self.tally.waits.extend(waited)

    def _retry(self, now: datetime) -> None:
        for name in sorted(self.live):
            live = self.live[name]
            for index in sorted(live.replicas):
                replica = live.replicas[index]
                if replica.bound is None:
                    self._bind(live, replica, now)

    def _publish(self, now: datetime) -> None:
        if not self.policy.publishes:
            return
        due = self.published_at is None or now - self.published_at >= self.settings.republish
        if due:
            self.published_at = now
            self.clusters = self._read_clusters(now)
            self.epoch += 1
        elif self.published_at is not None and (
            self.published_at + self.max_age
            < now
            <= self.published_at + self.max_age + self.settings.step
        ):
            # The observation just turned stale, and the cluster says so: whole-node from now on.
            self.clusters = self._read_clusters(self.published_at, current=False)
            self.epoch += 1

    def _arrive(self, arrival: Arrival) -> None:
        deployment = read_deployment(arrival.deployment(NAMESPACE))
        # Arrived at its own time (the step only notices it): waits count from then.
        self.live[arrival.name] = Live(
            arrival, deployment, self.start + arrival.at, Matching(self.matcher)
        )

    # -- the core ---------------------------------------------------------------------------

    def _needs_pass(self, live: Live, now: datetime) -> bool:
        if live.invalid is not None:
            return False
        grace = live.spec.unschedulable_grace
        pending = [r for r in live.replicas.values() if r.bound is None]
        if any(r.pending_since is not None and now - r.pending_since > grace for r in pending):
            return True
        if any(f.expires_at <= now for f in live.failed):
            return True
        missing = len(live.replicas) < live.spec.replicas
        unchanged = self.settings.skip_unchanged and live.stuck_at_epoch == self.epoch
        return missing and not unchanged

    def _others(self, live: Live) -> Mapping[str, OthersOnCluster]:
        """The other deployments' replicas by cluster, as the fleet listing gives them."""
        own = {r.name for r in live.replicas.values()}
        return _OthersView(self.charges, own)

    def _request(self, live: Live, now: datetime) -> Request:
        """What the function would read for this deployment (module docstring, step 4)."""
        own = tuple(r.own() for r in live.replicas.values())
        clusters = tuple(self.clusters)
        fleet = View(
            clusters=clusters,
            unreadable={},
            notes=(),
            sites={},
            no_clusters=not clusters,
            others=self._others(live),
            room=Room(None),
            whole=frozenset(c.name for c in clusters),
            namespace_fetched=True,
        )
        return Request(
            now=now,
            reported=Reported(was_ready=False, scheduled=None, memories={}, dropping_events=False),
            deployment=live.deployment,
            own=Own(observed={}, ready=sum(1 for r in own if r.ready), replicas=own),
            failed=live.failed,
            tenant=Tenant(),
            fleet=FetchedFleet(view=fleet),
        )

    def _reconcile(self, live: Live, now: datetime) -> None:
        self.tally.passes += 1
        outcome = plan(self._request(live, now), self.matcher)
        if isinstance(outcome, Unplanned):
            self._kept(live, outcome)
            return
        planned_pass = outcome.plan
        live.failed = planned_pass.failed_placements
        for removed in planned_pass.removed:
            self._drop(live, removed.index)
        for planned in planned_pass.replicas:
            if planned.change in (Change.PLACED, Change.MOVED):
                self._drop(live, planned.index)
                self._place(live, planned, now)
        placed = len(live.replicas) >= live.spec.replicas
        live.stuck_at_epoch = None if placed else self.epoch

    def _kept(self, live: Live, outcome: Unplanned) -> None:
        """A pass that planned nothing: every replica stays as it is, as in the function.
        A selector that does not compile never will (decision.py, InvalidSelector)."""
        if outcome.why.reason == "InvalidSelector":
            live.invalid = outcome.why.message
            self.notes.add(f"{live.arrival.name}: {outcome.why.message}; never placed")
            return
        self.notes.add(f"{live.arrival.name}: nothing planned: {outcome.why.reason}")
        live.stuck_at_epoch = self.epoch

    def _place(self, live: Live, planned: PlannedReplica, now: datetime) -> None:
        pools = self.nodes[planned.cluster]
        pods = sum(len(p) for e in planned.engines for p, _ in pod_demands(e, pools[e.pool].kinds))
        replica = Replica(planned.name, planned.index, planned.cluster, planned.engines, now, pods)
        live.replicas[planned.index] = replica
        self.tally.placements += 1
        self.tally.placed_pods += pods
        if not self._bind(live, replica, now + BIND_DELAY):
            self.tally.overpromised += 1
            self.tally.overpromised_pods += pods
        self.charges[replica.cluster][replica.name] = replica.charge()

    def _bind(self, live: Live, replica: Replica, at: datetime) -> bool:
        choice = self.scoring[replica.cluster] or self.settings.choice
        bound = bind(self.nodes[replica.cluster], replica.engines, choice, self.rnd)
        if bound is None:
            if replica.pending_since is None:
                replica.pending_since = at
            return False
        replica.bound, replica.scheduled_at = bound, at
        self.allocated += self._metric_devices(replica.cluster, bound)
        live.first_bound.setdefault(replica.index, at)
        self.charges[replica.cluster][replica.name] = replica.charge()
        return True

    def _drop(self, live: Live, index: int) -> None:
        replica = live.replicas.pop(index, None)
        if replica is None:
            return
        self.charges[replica.cluster].pop(replica.name, None)
        if replica.bound is None:
            self.tally.never_bound_pods += replica.pods
        else:
            release(self.nodes[replica.cluster], replica.bound)
            self.allocated -= self._metric_devices(replica.cluster, replica.bound)
        self.epoch += 1

    def _metric_devices(self, cluster: str, bound: list[Bound]) -> int:
        return sum(
            d
            for pod in bound
            for d, m in zip(pod.demand, self.metric[(cluster, pod.pool)], strict=True)
            if m
        )

    # -- measuring --------------------------------------------------------------------------

    def _sample(self, now: datetime) -> Sample:
        waiting = sum(live.spec.replicas - live.bound for live in self.live.values())
        return Sample(
            minute=(now - self.start).total_seconds() / 60,
            allocated=self.allocated,
            waiting=waiting,
            overpromised_pods=self.tally.overpromised_pods,
            stranded=self._stranded(),
        )

    def _waiting_demands(self) -> dict[tuple[str, str], set[tuple[int, ...]]]:
        """Per pool, the pod demands of every waiting replica that could run there."""
        wanted: dict[tuple[str, str], set[tuple[int, ...]]] = {}
        for live in self.live.values():
            if live.bound >= live.spec.replicas or live.invalid is not None:
                continue
            for cluster in self.clusters:
                for pool in cluster.pools:
                    for engine in live.spec.engines:
                        resolved = live.matching.resolve(engine, pool)
                        if resolved is None:
                            continue
                        kinds = self.nodes[cluster.name][pool.name].kinds
                        for pods, _ in pod_demands(resolved, kinds):
                            wanted.setdefault(pool.key, set()).update(pods)
        return wanted

    def _stranded(self) -> int:
        """Free GPUs on nodes where no waiting pod that could use the pool fits."""
        stranded = 0
        for key, demands in self._waiting_demands().items():
            metric = self.metric[key]
            for free in self.nodes[key[0]][key[1]].free:
                if not any(all(f >= d for f, d in zip(free, dem, strict=True)) for dem in demands):
                    stranded += sum(f for f, m in zip(free, metric, strict=True) if m)
        return stranded

    def capacity(self) -> int:
        return sum(
            sum(d for d, m in zip(p.capacity(), self.metric[(c.name, p.name)], strict=True) if m)
            for c in self.fleet.clusters
            for p in c.pools
        )

    def negative_free_counts(self) -> Iterator[str]:
        """Every node whose free count went negative (the binder's invariant), as a message."""
        for cluster, pools in self.nodes.items():
            for pool, nodes in pools.items():
                for i, free in enumerate(nodes.free):
                    if min(free, default=0) < 0:
                        yield f"{cluster}/{pool} node {i}: free {free}"
