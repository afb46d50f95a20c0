"""The upper bound: a relaxed optimum per snapshot, which no policy can beat.

At each step, the GPUs any scheduler could have allocated are at most the
maximum flow from the live deployments (arrived and not yet departed,
placed or not) to the pools, where a deployment's demand is all its pods'
GPUs and may go to any pool one of whose kinds its engine matches (the
real matcher decides), and a pool's capacity is its free GPUs at time zero
(after background load). Relaxed: it ignores nodes (fragmentation, gangs on
distinct nodes), history (a real scheduler never moves a running replica to
make room) and the grain of a replica. Exact for that relaxation: pools
with the same device kinds form one class, and the flow is the minimum cut,

    min over sets T of classes:  sum(capacity of T) + sum(demand of groups not within T)

(a group is the deployments matching the same classes), with few classes
so few sets.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import combinations

from compose_model_deployment import InvalidSelector, Matcher, Matching, read_deployment
from modelplane_common.capacity.fleet import Cluster, Pool

from modelplane_sim.arrivals import Arrival
from modelplane_sim.fleet import Fleet


class RelaxedBound:
    def __init__(self, fleet: Fleet, clusters: Iterable[Cluster], matcher: Matcher) -> None:
        self._matcher = matcher
        starts = {(c.name, p.name): p for c in fleet.clusters for p in c.pools}
        self._classes: dict[tuple, Pool] = {}
        self._capacity: dict[tuple, int] = {}
        for cluster in clusters:
            for pool in cluster.pools:
                key = pool.devices
                start = starts[pool.key]
                gpus = sum(
                    d
                    for d, name in zip(start.capacity(), start.kinds.names, strict=True)
                    if name in fleet.metric_kinds
                )
                self._classes.setdefault(key, pool)
                self._capacity[key] = self._capacity.get(key, 0) + gpus
        self._groups: dict[str, frozenset[tuple]] = {}

    def _group(self, arrival: Arrival) -> frozenset[tuple]:
        if arrival.name not in self._groups:
            spec = read_deployment(arrival.deployment()).spec
            matching = Matching(self._matcher)
            try:
                group = frozenset(
                    key
                    for key, pool in self._classes.items()
                    if all(matching.resolve(e, pool) is not None for e in spec.engines)
                )
            except InvalidSelector:
                group = frozenset()  # no scheduler may place it (decision.py keeps it)
            self._groups[arrival.name] = group
        return self._groups[arrival.name]

    def at(self, live: Iterable[Arrival]) -> int:
        demand: dict[frozenset[tuple], int] = {}
        for arrival in live:
            group = self._group(arrival)
            demand[group] = demand.get(group, 0) + arrival.gpus
        classes = list(self._classes)
        best = sum(d for g, d in demand.items() if g)
        for size in range(1, len(classes) + 1):
            for chosen in combinations(classes, size):
                inside = set(chosen)
                cut = sum(self._capacity[c] for c in chosen) + sum(
                    d for g, d in demand.items() if not g <= inside
                )
                best = min(best, cut)
        return best
