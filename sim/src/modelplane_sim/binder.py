"""The in-cluster scheduler as the simulator models it: what really binds, node by node.

Each pool is a list of nodes, each a mutable free-device vector (one int
per DRA kind of the pool, in declared order, like the agent's histogram).
A replica's pods bind all together or not at all (as under gang
admission): a pod needs a node whose free vector covers its demand in
every kind, and the pods of one gang copy need DISTINCT nodes. Which of the
fitting nodes a pod takes is the binder's policy:

    spread   the most free devices of the kinds the pod claims (ties: the
             most free overall, then the lowest node index), as
             kube-scheduler's default LeastAllocated scoring would choose;
    pack     the fewest free devices of the claimed kinds that still fit
             (MostAllocated, a bin-packing profile);
    random   any fitting node, uniformly (seeded, so runs repeat).

A pod that claims nothing takes a node slot in its gang (distinct nodes)
but no devices; it goes to the fullest fitting node so that it blocks no
node a claiming pod needs.

Invariant: a free count never goes below zero (`bind` only takes from a
node that fits, `release` gives back exactly what was taken).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from modelplane_common.capacity.fleet import PlacedEngine
from modelplane_common.observation import DeviceKinds, FreeVector, Histogram

Demand = tuple[int, ...]


class NodeChoice(StrEnum):
    SPREAD = "spread"
    PACK = "pack"
    RANDOM = "random"


@dataclass(frozen=True, slots=True)
class Bound:
    """One pod on one node: what `release` gives back."""

    pool: str
    node: int
    demand: Demand


class PoolNodes:
    """The true free vectors of one pool's nodes."""

    def __init__(self, kinds: DeviceKinds, start: Sequence[tuple[FreeVector, int]]) -> None:
        self.kinds = kinds
        self.free: list[list[int]] = [list(v) for v, n in start for _ in range(n)]

    def histogram(self) -> Histogram:
        """What the agent would publish: nodes counted by free vector."""
        return Histogram.of((tuple(f), 1) for f in self.free)

    def free_devices(self) -> tuple[int, ...]:
        return tuple(sum(node[i] for node in self.free) for i in range(len(self.kinds.names)))


def pod_demands(engine: PlacedEngine, kinds: DeviceKinds) -> list[tuple[list[Demand], bool]]:
    """One entry per copy: the demand vector of each pod, and whether the copy is a gang.

    The engine comes from the plan, so each request names the pool kind it
    resolved to; that kind is what the DRA allocator hands out.
    """
    index = {name: i for i, name in enumerate(kinds.names)}
    pods: list[Demand] = []
    for member in engine.members:
        demand = [0] * len(kinds.names)
        for request in member.requests:
            if request.kind in index:
                demand[index[request.kind]] += request.count
        pods.extend([tuple(demand)] * member.pods_per_copy)
    return [(list(pods), engine.is_gang) for _ in range(engine.copies)]


def _fits(free: Sequence[int], demand: Demand) -> bool:
    return all(f >= d for f, d in zip(free, demand, strict=True))


def _choose(
    nodes: list[list[int]],
    demand: Demand,
    taken: set[int],
    choice: NodeChoice,
    rnd: random.Random,
) -> int | None:
    fitting = [i for i, free in enumerate(nodes) if i not in taken and _fits(free, demand)]
    if not fitting:
        return None
    if not any(demand):
        return min(fitting, key=lambda i: (sum(nodes[i]), i))
    if choice is NodeChoice.RANDOM:
        return rnd.choice(fitting)

    def claimed_free(i: int) -> tuple[int, int]:
        free = nodes[i]
        return (sum(f for f, d in zip(free, demand, strict=True) if d), sum(free))

    if choice is NodeChoice.SPREAD:
        return min(fitting, key=lambda i: (tuple(-x for x in claimed_free(i)), i))
    return min(fitting, key=lambda i: (claimed_free(i), i))


def bind(
    pools: Mapping[str, PoolNodes],
    engines: Sequence[PlacedEngine],
    choice: NodeChoice,
    rnd: random.Random,
) -> list[Bound] | None:
    """Bind every pod of a replica, or none (the nodes are left as they were)."""
    bound: list[Bound] = []
    for engine in engines:
        pool = pools[engine.pool]
        for pods, gang in pod_demands(engine, pool.kinds):
            taken: set[int] = set()
            for demand in sorted(pods, key=lambda d: -sum(d)):
                node = _choose(pool.free, demand, taken if gang else set(), choice, rnd)
                if node is None:
                    release(pools, bound)
                    return None
                taken.add(node)
                pool.free[node] = [f - d for f, d in zip(pool.free[node], demand, strict=True)]
                bound.append(Bound(engine.pool, node, demand))
    return bound


def occupy(pools: Mapping[str, PoolNodes], bound: Sequence[Bound]) -> None:
    """Take what a placement chose elsewhere (the node-level reference) from its nodes."""
    for pod in bound:
        node = pools[pod.pool].free
        if not _fits(node[pod.node], pod.demand):
            raise ValueError(f"{pod.pool} node {pod.node}: {pod.demand} over free {node[pod.node]}")
        node[pod.node] = [f - d for f, d in zip(node[pod.node], pod.demand, strict=True)]


def release(pools: Mapping[str, PoolNodes], bound: Sequence[Bound]) -> None:
    for pod in bound:
        node = pools[pod.pool].free
        node[pod.node] = [f + d for f, d in zip(node[pod.node], pod.demand, strict=True)]
