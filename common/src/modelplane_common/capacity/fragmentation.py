"""The fragmentation score, FGD's kind on whole devices: one home for the core and the simulator.

The idea is Weng et al.'s (USENIX ATC '23, "Beware of Fragmentation:
Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent"):
measure fragmentation against the workload the fleet expects, and place
each pod where that measure grows least. Written here for whole devices
(a device is free or taken; no partial GPUs). Two users:

    the core   (compose_model_deployment.placement, rule "least
               fragmentation"): a node class is a histogram bucket, the pod
               is on the node class the cluster scheduler is assumed to
               choose (fit.py), the demand is `expected_demand`, and a
               placement's `growth` is exact (a Fraction), so ties are ties
               and the same inputs give the same choice;
    the simulator's node-level reference (modelplane_sim.nodelevel):
               a node is one true free vector, the demand the run's
               workload mix, the choice `choose_node`.

Inputs
    a node's free vector `free` (one int per DRA kind of its pool);
    `metric`, which kinds count as GPUs (the fleet's `metricKinds`);
    the pool's task shapes: each pod demand vector the workload could run
    in the pool, with how many pods of it are expected (its popularity is
    its share of them; the shares sum to 1).

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

Choice (the node-level reference, `choose_node`)
    Among the nodes the pod fits (and, in a gang copy, not yet taken by the
    copy), the one with the smallest increase; ties: the fewest free GPUs
    after the pod (best fit), then the lowest node index, so runs repeat.
    A pod that claims nothing changes no node's score: it goes to the
    fullest fitting node, as the simulator's binder sends it, so that it
    blocks no node a claiming pod needs. The core's choice is placement.py's.

Cost
    One node's score is O(shapes x kinds); choosing a pod's node scores
    every node of the pool once, O(nodes x shapes x kinds); a placement's
    `growth` scores each of its pods once, O(pods x shapes x kinds).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from modelplane_common.capacity.fit import Reservation

Demand = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Shapes:
    """A pool's task shapes: demand vectors with how many pods of each are expected."""

    weights: tuple[tuple[Demand, int], ...]

    @classmethod
    def of(cls, pods: Mapping[Demand, int]) -> Shapes:
        """From pod counts per demand; no pods gives no shapes (nothing is fragmented)."""
        return cls(tuple((d, n) for d, n in sorted(pods.items()) if n > 0))

    @property
    def total(self) -> int:
        return sum(n for _, n in self.weights)

    @property
    def popularity(self) -> tuple[tuple[Demand, float], ...]:
        """Each shape's share of the pods (they sum to 1)."""
        total = self.total
        return tuple((d, n / total) for d, n in self.weights)

    def claimed_kinds(self, width: int) -> tuple[bool, ...]:
        """Which of `width` kinds some shape claims: the devices the demand could use."""
        return tuple(any(d[i] for d, _ in self.weights) for i in range(width))


def fits(free: Sequence[int], demand: Demand) -> bool:
    return all(f >= d for f, d in zip(free, demand, strict=True))


def gpus(free: Sequence[int], metric: Sequence[bool]) -> int:
    return sum(f for f, m in zip(free, metric, strict=True) if m)


def missed(free: Sequence[int], shapes: Shapes, metric: Sequence[bool]) -> int:
    """The node's fragmentation in pods x devices: its free devices times the expected
    pods whose shape does not fit it (`fragmentation` x `shapes.total`, exact)."""
    stranded = gpus(free, metric)
    if not stranded:
        return 0
    return sum(n for d, n in shapes.weights if not fits(free, d)) * stranded


def fragmentation(free: Sequence[int], shapes: Shapes, metric: Sequence[bool]) -> float:
    """The node's expected fragmentation: its free GPUs, weighted by the shapes that
    do not fit it."""
    total = shapes.total
    return missed(free, shapes, metric) / total if total else 0.0


def increase(free: Sequence[int], demand: Demand, shapes: Shapes, metric: Sequence[bool]) -> float:
    """How much the fleet's fragmentation grows when a pod of `demand` takes this node."""
    after = [f - d for f, d in zip(free, demand, strict=True)]
    return fragmentation(after, shapes, metric) - fragmentation(free, shapes, metric)


def growth(reservations: Iterable[Reservation], shapes: Shapes) -> Fraction:
    """How much a placement grows the pool's fragmentation, exactly: the sum of
    `increase` over the pods it charged, each on the node class it was assumed to take
    (`Reservation.node` is that node's free vector before the pod). Only the kinds some
    shape claims count as devices."""
    total = shapes.total
    if not total:
        return Fraction(0)
    units = 0
    for pod in reservations:
        metric = shapes.claimed_kinds(len(pod.demand))
        after = tuple(f - d for f, d in zip(pod.node, pod.demand, strict=True))
        units += missed(after, shapes, metric) - missed(pod.node, shapes, metric)
    return Fraction(units, total)


def expected_demand(pods: Sequence[Demand], whole_node: Demand) -> Shapes:
    """The demand the core scores a placement on one pool against (design/scheduler.md,
    "Fragmentation"): the pods of the replica being placed, by demand, and as many
    again wanting one whole node of the pool, so that half the weight is the replica's
    own shapes and half the largest shape the pool can serve."""
    counts = Counter(pods)
    if any(whole_node) and counts:
        counts[whole_node] += len(pods)
    return Shapes.of(counts)


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
