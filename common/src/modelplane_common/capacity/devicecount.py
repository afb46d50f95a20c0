"""Device-count accounting: a pool without a fresh observation counted as one total per kind.

The rule (`fallback: DeviceCount`, rule 2 of design/api.md section 6)
    A pool of N declared nodes with P_k devices of kind k on each node starts
    with N x P_k free devices of kind k. Every pod charged or placed takes its
    demand (the devices it claims, never a whole node) from those totals.
    Nodes are not tracked, only their number and what one of them declares:
    - a pod fits when, for every kind, its demand is at most P_k (one node
      holds all a pod claims) and at most the free total;
    - a gang copy of g pods fits when g <= N (its pods still need distinct
      nodes) and its pods fit the free totals together;
    - a pod that claims nothing needs only that the pool has a node.

What it cannot see
    Fragmentation. On 4 nodes of 8 GPUs with 30 claimed, the 2 free GPUs
    admit a 2-GPU pod although they may sit on two different nodes; the pod
    then stays Pending in the cluster, its replica turns Unschedulable and is
    healed after the deployment's grace period (re-placed, the pool avoided
    for `avoidFor`). Whole-node accounting never over-promises this way;
    device counting trades that for using every declared device. It never
    promises more than the pool's totals: the sum of what it places and
    charges stays within N x P_k for every kind.

Invariants
    - Free totals never go negative; every placement is all or nothing.
    - No per-node trace: `reservations` stays empty, since there are no nodes
      a replay could check a placement against.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from modelplane_common.capacity.fit import Demand, PoolLedger, Reservation, fits
from modelplane_common.observation import FreeVector


def _sum(demands: Sequence[Demand], width: int) -> Demand:
    return tuple(sum(d[i] for d in demands) for i in range(width))


class DeviceCountLedger(PoolLedger):
    """A pool's free devices as one total per DRA kind, over `nodes` declared nodes."""

    __slots__ = ("free", "nodes", "per_node", "reservations")

    def __init__(self, per_node: FreeVector, nodes: int, free: Demand | None = None) -> None:
        self.per_node = per_node
        self.nodes = nodes
        self.free: Demand = free if free is not None else tuple(p * nodes for p in per_node)
        self.reservations: list[Reservation] = []

    def copy(self) -> Self:
        return type(self)(self.per_node, self.nodes, self.free)

    def adopt(self, trial: Self) -> None:
        self.free = trial.free

    def free_devices(self) -> tuple[int, ...]:
        return self.free

    def effective(self, demand: Demand) -> Demand:
        return demand

    def nodes_with_room(self, demand: Demand) -> int:
        """The declared nodes one of which could hold the pod: all of them or none."""
        return self.nodes if self._one_node_holds(demand) else 0

    def _one_node_holds(self, demand: Demand) -> bool:
        return self.nodes > 0 and fits(self.per_node, demand)

    def _take(self, demands: Sequence[Demand]) -> bool:
        total = _sum(demands, len(self.per_node))
        if not fits(self.free, total):
            return False
        self.free = tuple(f - t for f, t in zip(self.free, total, strict=True))
        return True

    def place_shared(self, demand: Demand, pods: int) -> bool:
        if pods <= 0:
            return True
        return self._one_node_holds(demand) and self._take([demand] * pods)

    def place_gang(self, pods: Sequence[Demand]) -> bool:
        if len(pods) > self.nodes or not all(self._one_node_holds(d) for d in pods):
            return False
        return self._take(pods)
