"""The node-level reference: a scheduler that sees every node of every pool.

It is the yardstick for what histograms lose. It does not go through the
core (`placement.plan`): it reads the true free vector of every node of
every pool (what a full-state scheduler would know, and more than any
InferenceCluster says) and places each missing replica of a deployment
where the fleet's fragmentation for the workload's task shapes grows least
(modelplane_common.capacity.fragmentation: the score, its inputs and its cost). The same arrivals
and departures, node model and metrics as every other policy (world.py);
the pods it places bind on the nodes it chose, at once, so it never
over-promises and never heals.

A replica's placement
    For each cluster (in name order), each engine of the replica takes the
    pool of that cluster where its pods raise fragmentation least (pools
    in declared order on ties), every pod on the node `choose_node` picks,
    the pods of one gang copy on distinct nodes; engines placed earlier in
    the cluster count in the trial of the later ones. The replica goes to
    the cluster whose placement raises fragmentation least (ties: the
    first cluster). A replica none fits waits, as under any policy, and is
    tried again when something departs.

    The device matching is the core's (`placement.Matching`, the real CEL
    matcher), so it places nothing the core would refuse for its devices;
    it does not spread a deployment's replicas across clusters (the core's
    availability rule), since it measures fragmentation alone.

The task shapes
    Per pool, the pod demand vectors of every arrival of the run whose
    engine matches the pool, weighted by their pods (replicas x copies x
    pods per copy): the workload's mix, known in advance as FGD assumes,
    not the order of the arrivals.

Greedy per pod: for a gang of identical pods (every arrival of the
simulator and the trace) it finds distinct nodes whenever they exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from compose_model_deployment import InvalidSelector, Matcher, Matching, read_deployment
from modelplane_common.capacity.fleet import Cluster, PlacedEngine
from modelplane_common.capacity.fragmentation import Demand, Shapes, choose_node

from modelplane_sim.arrivals import Arrival
from modelplane_sim.binder import Bound, PoolNodes, occupy, pod_demands
from modelplane_sim.fleet import Fleet
from modelplane_sim.policies import Policy
from modelplane_sim.world import BIND_DELAY, Live, Replica, Settings, World

PoolKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Choice:
    """Where one replica goes: its cluster, its engines as placed, its pods' nodes."""

    cluster: str
    engines: tuple[PlacedEngine, ...]
    pods: tuple[Bound, ...]
    increase: float


def place_engine(
    pool: str,
    nodes: list[list[int]],
    engine: PlacedEngine,
    kinds_of: PoolNodes,
    score: tuple[Shapes, Sequence[bool]],
) -> tuple[list[Bound], float] | None:
    """Every pod of the engine on `nodes` (changed in place), or None if one fits nowhere."""
    shapes, metric = score
    bound: list[Bound] = []
    total = 0.0
    for pods, gang in pod_demands(engine, kinds_of.kinds):
        taken: set[int] = set()
        for demand in sorted(pods, key=lambda d: -sum(d)):
            chosen = choose_node(nodes, demand, taken if gang else set(), shapes, metric)
            if chosen is None:
                return None
            node, grows = chosen
            taken.add(node)
            nodes[node] = [f - d for f, d in zip(nodes[node], demand, strict=True)]
            bound.append(Bound(pool, node, demand))
            total += grows
    return bound, total


def workload_shapes(
    arrivals: Iterable[Arrival],
    clusters: Sequence[Cluster],
    nodes: Mapping[str, Mapping[str, PoolNodes]],
    matcher: Matcher,
) -> dict[PoolKey, Shapes]:
    """Per pool, the task shapes of every arrival that could run there (module docstring)."""
    weights: dict[tuple, int] = {}
    first: dict[tuple, Arrival] = {}
    for arrival in arrivals:
        # Arrivals that differ only in name, time, lifetime and replicas match alike.
        key = (arrival.selector, arrival.copies, arrival.pods_per_copy, arrival.gpus_per_pod)
        weights[key] = weights.get(key, 0) + arrival.replicas
        first.setdefault(key, arrival)
    counts: dict[PoolKey, dict[Demand, int]] = {}
    for key, replicas in weights.items():
        spec = read_deployment(first[key].deployment()).spec
        matching = Matching(matcher)
        for cluster in clusters:
            for pool in cluster.pools:
                kinds = nodes[cluster.name][pool.name].kinds
                for engine in spec.engines:
                    try:
                        resolved = matching.resolve(engine, pool)
                    except InvalidSelector:
                        resolved = None  # never placed by anyone: not part of the demand
                    for pods, _ in pod_demands(resolved, kinds) if resolved else ():
                        tally = counts.setdefault(pool.key, {})
                        for demand in pods:
                            tally[demand] = tally.get(demand, 0) + replicas
    return {(c.name, p.name): Shapes.of(counts.get(p.key, {})) for c in clusters for p in c.pools}


class NodeLevelWorld(World):
    """One run of the node-level reference on the World's arrivals, nodes and metrics."""

    def __init__(
        self,
        fleet: Fleet,
        policy: Policy,
        matcher: Matcher,
        settings: Settings,
        start: datetime,
        arrivals: Sequence[Arrival],
    ) -> None:
        super().__init__(fleet, policy, matcher, settings, start)
        self.shapes = workload_shapes(arrivals, self.clusters, self.nodes, matcher)

    def _reconcile(self, live: Live, now: datetime) -> None:
        self.tally.passes += 1
        for index in range(live.spec.replicas):
            if index in live.replicas:
                continue
            try:
                choice = self.choose(live)
            except InvalidSelector as err:
                live.invalid = str(err)
                self.notes.add(f"{live.arrival.name}: {err}; never placed")
                return
            if choice is None:
                break
            self._place_choice(live, index, choice, now)
        placed = len(live.replicas) >= live.spec.replicas
        live.stuck_at_epoch = None if placed else self.epoch

    def choose(self, live: Live) -> Choice | None:
        """The cluster, pools and nodes one more replica of `live` takes, or None."""
        best: Choice | None = None
        for cluster in sorted(self.clusters, key=lambda c: c.name):
            choice = self._in_cluster(live, cluster)
            if choice is not None and (best is None or choice.increase < best.increase):
                best = choice
        return best

    def _in_cluster(self, live: Live, cluster: Cluster) -> Choice | None:
        trial: dict[str, list[list[int]]] = {}  # pools the earlier engines changed
        engines: list[PlacedEngine] = []
        pods: list[Bound] = []
        total = 0.0
        for engine in live.spec.engines:
            best: tuple[float, PlacedEngine, list[Bound], list[list[int]]] | None = None
            for pool in cluster.pools:
                resolved = live.matching.resolve(engine, pool)
                if resolved is None:
                    continue
                nodes = [
                    list(n) for n in trial.get(pool.name, self.nodes[cluster.name][pool.name].free)
                ]
                score = (self.shapes[pool.key], self.metric[pool.key])
                placed = place_engine(
                    pool.name, nodes, resolved, self.nodes[cluster.name][pool.name], score
                )
                if placed is not None and (best is None or placed[1] < best[0]):
                    best = (placed[1], resolved, placed[0], nodes)
            if best is None:
                return None
            grows, resolved, bound, nodes = best
            trial[resolved.pool] = nodes
            engines.append(resolved)
            pods.extend(bound)
            total += grows
        return Choice(cluster.name, tuple(engines), tuple(pods), total)

    def _place_choice(self, live: Live, index: int, choice: Choice, now: datetime) -> None:
        at = now + BIND_DELAY
        pods = len(choice.pods)
        replica = Replica(
            f"{live.arrival.name}-{index}", index, choice.cluster, choice.engines, now, pods
        )
        occupy(self.nodes[choice.cluster], choice.pods)
        replica.bound, replica.scheduled_at = list(choice.pods), at
        live.replicas[index] = replica
        live.first_bound.setdefault(index, at)
        self.tally.placements += 1
        self.tally.placed_pods += pods
        self.allocated += self._metric_devices(choice.cluster, replica.bound)
        self.charges[choice.cluster][replica.name] = replica.charge()
