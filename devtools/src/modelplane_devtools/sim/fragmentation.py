"""The fragmentation score of the node-level reference: the FGD kind, on whole devices.

The idea is Weng et al.'s (USENIX ATC '23, "Beware of Fragmentation:
Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent"):
measure fragmentation against the workload the fleet expects, and place
each pod where that measure grows least. Written here for the simulator's
model, where a device is free or taken (no partial GPUs):

Inputs
    a node's free vector `free` (one int per DRA kind of its pool);
    `metric`, which kinds count as GPUs (the fleet's `metricKinds`);
    the pool's task shapes: each pod demand vector the workload could run
    in the pool, with its popularity (the share of the workload's pods of
    that demand, among the pods that could run there; they sum to 1).

Score
    A node's fragmentation for one shape d is its free GPUs when d does not
    fit it (no pod of that shape could use any of them), and 0 when d fits
    (FGD's partial-GPU term is always 0 on whole devices). Its expected
    fragmentation is the popularity-weighted sum over the shapes; the
    fleet's is the sum over its nodes. Placing a pod of demand d on a node
    changes only that node, so the fleet's fragmentation grows by

        increase(free, d) = F(free - d) - F(free)

    which may be negative: filling a node that no popular shape fits any
    more takes GPUs out of the fragmented count (the packing tendency).

Choice
    Among the nodes the pod fits (and, in a gang copy, not yet taken by the
    copy), the one with the smallest increase; ties: the fewest free GPUs
    after the pod (best fit), then the lowest node index, so runs repeat.
    A pod that claims nothing changes no node's score: it goes to the
    fullest fitting node, as the binder sends it (binder.py), so that it
    blocks no node a claiming pod needs.

Cost
    One node's score is O(shapes x kinds); choosing a pod's node scores
    every node of the pool once, O(nodes x shapes x kinds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Demand = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Shapes:
    """A pool's task shapes: demand vectors with their popularity (summing to 1)."""

    popularity: tuple[tuple[Demand, float], ...]

    @classmethod
    def of(cls, pods: Mapping[Demand, int]) -> Shapes:
        """From pod counts per demand; no pods gives no shapes (nothing is fragmented)."""
        total = sum(pods.values())
        if not total:
            return cls(())
        return cls(tuple((d, n / total) for d, n in sorted(pods.items()) if n))


def fits(free: Sequence[int], demand: Demand) -> bool:
    return all(f >= d for f, d in zip(free, demand, strict=True))


def gpus(free: Sequence[int], metric: Sequence[bool]) -> int:
    return sum(f for f, m in zip(free, metric, strict=True) if m)


def fragmentation(free: Sequence[int], shapes: Shapes, metric: Sequence[bool]) -> float:
    """The node's expected fragmentation: its free GPUs, weighted by the shapes that
    do not fit it."""
    stranded = gpus(free, metric)
    if not stranded:
        return 0.0
    return sum(p for d, p in shapes.popularity if not fits(free, d)) * stranded


def increase(free: Sequence[int], demand: Demand, shapes: Shapes, metric: Sequence[bool]) -> float:
    """How much the fleet's fragmentation grows when a pod of `demand` takes this node."""
    after = [f - d for f, d in zip(free, demand, strict=True)]
    return fragmentation(after, shapes, metric) - fragmentation(free, shapes, metric)


def choose_node(
    nodes: Sequence[Sequence[int]],
    demand: Demand,
    taken: set[int],
    shapes: Shapes,
    metric: Sequence[bool],
) -> tuple[int, float] | None:
    """The node a pod of `demand` takes (module docstring, Choice) and the increase it
    causes; None when no node outside `taken` fits."""
    fitting = [i for i, free in enumerate(nodes) if i not in taken and fits(free, demand)]
    if not fitting:
        return None
    if not any(demand):
        return min(fitting, key=lambda i: (sum(nodes[i]), i)), 0.0
    scored = [
        (increase(nodes[i], demand, shapes, metric), gpus(nodes[i], metric), i) for i in fitting
    ]
    grows, _, node = min(scored)
    return node, grows
