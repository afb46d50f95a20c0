"""Rule 3 of capacity/pools.py: a report may only lower capacity.

The issue's case: a pool declared at 3 nodes of 8 GPUs whose agent reports 5
nodes (a surge deeper than the margin) with 1 node free. The report is
rejected for its size; before this rule the pool fell back to whole-node
accounting and promised 3 new 8-GPU replicas, of which 2 could never bind
(whole-node fallback cannot see the workloads that fill the other nodes).
Each case places 8-GPU replicas one by one until the pool refuses.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from modelplane_common.capacity.fleet import (
    Charge,
    PlacedEngine,
    PlacedMember,
    ResolvedRequest,
    Role,
)
from modelplane_common.capacity.pools import charge_replicas, empty_ledger, place_engine
from modelplane_common.capacity.readers import read_cluster
from modelplane_common.observation import Rejected
from modelplane_testkit import deployment_builders as t

GPU = t.device("gpu", 8)
EIGHT_GPUS = PlacedEngine(
    "serve",
    1,
    (
        PlacedMember(
            Role.STANDALONE,
            "pool",
            (ResolvedRequest("gpus", GPU["deviceClassName"], 8, kind="gpu"),),
        ),
    ),
)


@dataclass(frozen=True)
class Case:
    histogram: list  # the agent's nodesByFreeDevices, as (free, nodes)
    observed_nodes: int
    placed: int  # 8-GPU replicas the pool takes before it refuses
    fallback: str | None = None  # None: WholeNode
    observed_at: str | None = None  # None: fresh
    running: int = 0  # 8-GPU replicas already pinned to the pool


def replicas_placed(case: Case) -> int:
    spec, status = t.pool(
        "pool",
        3,
        [GPU],
        histogram=case.histogram,
        observed_nodes=case.observed_nodes,
        observed_at=case.observed_at,
    )
    cluster, _ = read_cluster(t.cluster("east", [(spec, status)], fallback=case.fallback))
    (pool,) = cluster.pools
    assert isinstance(pool.observation, Rejected)
    ledger, basis = empty_ledger(pool, cluster, t.NOW)
    running = [Charge("team-b", f"run-{i}", "east", (EIGHT_GPUS,)) for i in range(case.running)]
    charge_replicas(ledger, pool, basis, running)
    placed = 0
    while placed < 10 and place_engine(ledger, pool, EIGHT_GPUS):
        placed += 1
    return placed


SURGE = [({"gpu": 8}, 1), ({"gpu": 0}, 4)]  # 5 nodes observed, 1 free

CASES = [
    pytest.param(
        Case(SURGE, 5, placed=1),
        id="a surge past the margin with 1 free node gives 1 replica, not the 3 declared",
    ),
    pytest.param(
        Case(SURGE, 5, placed=1, fallback="DeviceCount"),
        id="under DeviceCount the 8 free GPUs shown cap the 24 declared",
    ),
    pytest.param(
        Case([({"gpu": 8}, 5)], 5, placed=3),
        id="a rejected report never raises capacity: 5 free nodes shown, 3 declared",
    ),
    pytest.param(
        Case([({"gpu": 8}, 3)], 5, placed=2, running=1),
        id="replicas pinned to the pool are still charged under the cap",
    ),
    pytest.param(
        Case([({"gpu": 8}, 4)], 2, placed=3),
        id="a histogram of more nodes than observed is a bound too, and caps nothing here",
    ),
    pytest.param(
        Case([({"gpu": 8}, 1), ({"gpu": 4}, 3)], 2, placed=1),
        id="half-free nodes are not whole nodes: a histogram over observedNodes caps at 1",
    ),
    pytest.param(
        Case(SURGE, 5, placed=3, observed_at=t.ago(20)),
        id="a stale rejected report says nothing about now: the fallback alone",
    ),
    pytest.param(
        Case([({"gpu": 9}, 1), ({"gpu": 0}, 4)], 5, placed=3),
        id="a malformed report (9 free of 8) caps nothing: only node-count bounds qualify",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_a_report_rejected_for_a_node_count_bound_only_lowers_capacity(case: Case):
    assert replicas_placed(case) == case.placed
