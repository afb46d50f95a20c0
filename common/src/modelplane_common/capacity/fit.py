"""Node-level fit: a pool's free capacity as a ledger of node classes.

Model
    A `Ledger` counts a pool's nodes by free-device vector (one int per DRA
    device kind of the pool, in declared order). It never holds one entry per
    node: its size is bounded by the distinct vectors, like the histogram it
    is built from. A pod's `Demand` is the vector of devices it claims on its
    node. A pod fits a node when the node's free vector is at least the
    demand in every kind (rule 3).

Whole-node accounting (rule 2, `fallback: WholeNode`) is the same ledger
with every claiming pod's demand rounded up to a whole empty node
(`Ledger.whole_node`); a pod that claims nothing still needs a node, but any
node, full or not. Device-count accounting (`fallback: DeviceCount`) keeps no
nodes at all: `devicecount.DeviceCountLedger`. Both are a `PoolLedger`, the
one interface placement, charging, admission and diagnosis use.

Invariants
    - Counts never go negative; placing decrements the node a pod takes and
      re-files it under its new free vector, so one pass never overcommits
      (a pass that did not would send every replica to the same free node).
    - Every pod of one gang copy takes a DISTINCT node: while a gang is
      placed, the nodes it took are out of reach of its other pods.
    - A gang is placed all or nothing; a failed attempt leaves the ledger as
      it was.

Exactness
    - One gang copy (one leader, W identical workers, or any few pod types):
      exact. Pods of one type have the same candidate nodes, so Hall's
      condition over the subsets of pod TYPES (not pods) decides whether
      distinct nodes exist: for every set S of types, the nodes fitting some
      type of S must number at least the pods of S. The placement keeps that
      condition true after every pod it places, so it finds distinct nodes
      whenever they exist.
    - Shareable (Standalone) pods of one demand: exact, since each node takes
      min over kinds of free // demand of them whatever the order.
    - Several copies, engines or replicas in one pass: greedy in a fixed
      order (multi-dimensional bin packing is NP-hard); may refuse a packing
      that a cleverer order would find, never accepts one that does not fit.

Assumed node choice (design/scheduler.md)
    The cluster scheduler is assumed to bind each claiming pod as the
    cluster declares it scores nodes (`NodeScoring`, the InferenceCluster's
    spec.nodeScoring). Spread (the default): the node with the MOST free
    devices of the kinds it claims (ties: the most free devices overall,
    then the vector itself), kube-scheduler's default LeastAllocated
    scoring, the assumption under which a published simulation saw no
    over-promise. Pack: the node with the FEWEST free devices of those
    kinds that still fits (ties: the fewest free overall, then the vector),
    a MostAllocated profile; assuming spread there mispredicts about 0.5%
    of pods. Our own measurement is in sim/tests. A pod that claims
    nothing is assumed on the node with the FEWEST free devices under
    either: it takes nothing, so within its gang it should not block a
    node a claiming pod needs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import combinations
from typing import Self

from modelplane_common.observation import FreeVector

Demand = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Reservation:
    """One pod charged to one node class: the trace an exact per-node replay checks."""

    gang: int | None  # ledger-local gang serial; None for a shareable pod
    node: FreeVector  # the node's free vector before the pod
    demand: Demand


def fits(node: FreeVector, demand: Demand) -> bool:
    return all(f >= d for f, d in zip(node, demand, strict=True))


class NodeScoring(StrEnum):
    """How a cluster's scheduler scores the nodes a claiming pod fits (spec.nodeScoring)."""

    SPREAD = "Spread"  # LeastAllocated, kube-scheduler's default
    PACK = "Pack"  # MostAllocated


def _preference(node: FreeVector, demand: Demand, scoring: NodeScoring) -> tuple:
    """Sort key: smaller is the node the cluster scheduler is assumed to pick."""
    if not any(demand):
        return (sum(node), node)
    claimed_free = sum(f for f, d in zip(node, demand, strict=True) if d)
    if scoring is NodeScoring.PACK:
        return (claimed_free, sum(node), node)
    return (-claimed_free, -sum(node), tuple(-f for f in node))


class PoolLedger(ABC):
    """A pool's mutable free capacity, whatever rule counts it.

    Every placement is all or nothing: a method that returns False leaves
    the ledger as it was.
    """

    __slots__ = ()
    per_node: FreeVector  # what one empty node of the pool declares, per DRA kind
    reservations: list[Reservation]  # the per-node trace, where the rule has nodes

    @abstractmethod
    def copy(self) -> Self: ...

    @abstractmethod
    def adopt(self, trial: Self) -> None:
        """Take over a trial copy's state once the whole attempt succeeded."""

    @abstractmethod
    def free_devices(self) -> tuple[int, ...]:
        """Free devices per kind, summed over the pool."""

    @abstractmethod
    def effective(self, demand: Demand) -> Demand:
        """What a pod of this demand really takes here."""

    @abstractmethod
    def nodes_with_room(self, demand: Demand) -> int:
        """How many nodes could take one more pod of this (effective) demand."""

    @abstractmethod
    def place_shared(self, demand: Demand, pods: int) -> bool:
        """Place `pods` pods that may share nodes; all or nothing."""

    @abstractmethod
    def place_gang(self, pods: Sequence[Demand]) -> bool:
        """Place one gang copy, every pod on a distinct node; all or nothing."""

    def place_best_effort(self, pods: Sequence[Demand], *, gang: bool) -> int:
        """Charge what fits of a replica that may not fit (it exists already);
        returns the pods that fit nowhere (they hold nothing in the cluster either)."""
        if gang and self.place_gang(pods):
            return 0
        missing = 0
        for demand in pods:
            if not self.place_shared(demand, 1):
                missing += 1
        return missing


class Ledger(PoolLedger):
    """Mutable free capacity of one pool, by node class."""

    __slots__ = ("_gangs", "counts", "per_node", "reservations", "scoring", "whole_node")

    def __init__(
        self,
        counts: dict[FreeVector, int],
        per_node: FreeVector,
        *,
        whole_node: bool,
        scoring: NodeScoring = NodeScoring.SPREAD,
    ) -> None:
        self.counts = {v: n for v, n in counts.items() if n > 0}
        self.per_node = per_node
        self.whole_node = whole_node
        self.scoring = scoring
        self.reservations: list[Reservation] = []
        self._gangs = 0

    def adopt(self, trial: Self) -> None:
        self.counts, self.reservations, self._gangs = trial.counts, trial.reservations, trial._gangs

    def copy(self) -> Self:
        twin = type(self)(
            self.counts, self.per_node, whole_node=self.whole_node, scoring=self.scoring
        )
        twin.reservations = list(self.reservations)
        twin._gangs = self._gangs
        return twin

    # -- reading --------------------------------------------------------------------------

    @property
    def nodes(self) -> int:
        return sum(self.counts.values())

    def free_devices(self) -> tuple[int, ...]:
        totals = [0] * len(self.per_node)
        for vector, nodes in self.counts.items():
            for i, free in enumerate(vector):
                totals[i] += free * nodes
        return tuple(totals)

    def effective(self, demand: Demand) -> Demand:
        """A whole node under whole-node accounting, else the demand itself."""
        if self.whole_node and any(demand):
            return self.per_node
        return demand

    def nodes_with_room(self, demand: Demand) -> int:
        return sum(n for vector, n in self.counts.items() if fits(vector, demand))

    # -- placing --------------------------------------------------------------------------

    def _take(self, node: FreeVector, demand: Demand, gang: int | None) -> None:
        left = self.counts[node] - 1
        if left:
            self.counts[node] = left
        else:
            del self.counts[node]
        after = tuple(f - d for f, d in zip(node, demand, strict=True))
        self.counts[after] = self.counts.get(after, 0) + 1
        self.reservations.append(Reservation(gang, node, demand))

    def _best_node(self, demand: Demand) -> FreeVector | None:
        candidates = [v for v in self.counts if fits(v, demand)]
        if not candidates:
            return None
        return min(candidates, key=lambda v: _preference(v, demand, self.scoring))

    def place_shared(self, demand: Demand, pods: int) -> bool:
        need = self.effective(demand)
        snapshot = (dict(self.counts), len(self.reservations))
        for _ in range(pods):
            node = self._best_node(need)
            if node is None:
                self.counts, kept = snapshot[0], snapshot[1]
                del self.reservations[kept:]
                return False
            self._take(node, need, None)
        return True

    def place_gang(self, pods: Sequence[Demand]) -> bool:
        chosen = self._choose_distinct([self.effective(d) for d in pods])
        if chosen is None:
            return False
        self._gangs += 1
        for node, demand in chosen:
            self._take(node, demand, self._gangs)
        return True

    def _choose_distinct(self, pods: list[Demand]) -> list[tuple[FreeVector, Demand]] | None:
        types = sorted(set(pods), key=lambda d: (-sum(d), tuple(-x for x in d)))
        matching = _GangMatching(types, [pods.count(t) for t in types], dict(self.counts))
        if not matching.hall():
            return None
        chosen: list[tuple[FreeVector, Demand]] = []
        for i, demand in enumerate(types):
            ranked = sorted(matching.fitting(i), key=lambda v: _preference(v, demand, self.scoring))
            while matching.need[i]:
                node = next((n for n in ranked if matching.take(n, i)), None)
                if node is None:  # pragma: no cover - Hall's condition guarantees a node
                    raise AssertionError("Hall's condition held but no node kept it")
                chosen.append((node, demand))
        return chosen


class _GangMatching:
    """Distinct nodes for a gang's pods as a bipartite matching, checked by Hall's condition.

    `types` are the distinct demands, `need[i]` how many pods of type i are
    still unmatched, `available` the nodes per free vector. A node fits a set
    of types (its mask); Hall's condition (every subset of types is wanted by
    no more pods than there are nodes fitting one of them) holds exactly when
    every pod can get its own node.
    """

    def __init__(
        self, types: Sequence[Demand], need: list[int], available: dict[FreeVector, int]
    ) -> None:
        self.need = need
        self._available = available
        self._mask_of = {
            v: sum(1 << i for i, t in enumerate(types) if fits(v, t)) for v in available
        }
        self._by_mask: dict[int, int] = {}
        for v, n in available.items():
            self._by_mask[self._mask_of[v]] = self._by_mask.get(self._mask_of[v], 0) + n
        self._subsets = [
            sum(1 << i for i in combo)
            for size in range(1, len(types) + 1)
            for combo in combinations(range(len(types)), size)
        ]

    def fitting(self, i: int) -> list[FreeVector]:
        """The free vectors a pod of type i fits on."""
        return [v for v in self._available if self._mask_of[v] >> i & 1]

    def hall(self) -> bool:
        for subset in self._subsets:
            wanted = sum(n for i, n in enumerate(self.need) if subset >> i & 1)
            if wanted and sum(n for m, n in self._by_mask.items() if m & subset) < wanted:
                return False
        return True

    def take(self, node: FreeVector, i: int) -> bool:
        """Give one pod of type i a node of this vector if the rest can still be matched."""
        if not self._available[node]:
            return False
        self._move(node, i, -1)
        if self.hall():
            return True
        self._move(node, i, +1)
        return False

    def _move(self, node: FreeVector, i: int, step: int) -> None:
        self._available[node] += step
        self._by_mask[self._mask_of[node]] += step
        self.need[i] += step
