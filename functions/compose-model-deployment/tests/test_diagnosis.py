"""No-fit diagnosis: each pool checked gets one cause; the summary counts them once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from modelplane_common.capacity.diagnosis import Cause, Diagnosis, PoolRefusal
from modelplane_common.timeutil import format_time
from modelplane_testkit import deployment_builders as t

TAINT = {"key": "gpu", "value": "h100", "effect": "NoSchedule"}
EVICT = {"key": "maintenance", "value": "now", "effect": "NoExecute"}


def observed(name, free_per_node, nodes=1):
    """A pool whose every node has `free_per_node` GPUs free (of 8)."""
    return t.pool(name, nodes, histogram=[({"gpu": free_per_node}, nodes)])


def avoided(cluster, pool):
    return {
        "cluster": cluster,
        "pool": pool,
        "replica": "llm-0",
        "expiresAt": format_time(t.NOW + timedelta(minutes=10)),
    }


def without_node_pools(cluster: dict) -> dict:
    """A selected InferenceCluster whose spec breaks its schema: it cannot be read."""
    del cluster["spec"]["nodePools"]
    return cluster


# (deployment, clusters, expected summary)
NO_FIT = [
    pytest.param(
        t.deployment(engines=[t.standalone(gpus=4)]),
        [t.cluster("a", [observed("p", 2)])],
        "1 pool checked, 1 too few free devices",
        id="fewer free devices in all than the engine claims reads too few free devices",
    ),
    pytest.param(
        t.deployment(engines=[t.standalone(gpus=8)]),
        [t.cluster("a", [observed("p", 4, nodes=2)])],
        "1 pool checked, 1 too few nodes with room",
        id="enough devices in all but no node holding a pod's claim reads too few nodes",
    ),
    pytest.param(
        t.deployment(engines=[t.gang(worker_gpus=4, workers=3)]),
        [t.cluster("a", [observed("p", 8, nodes=2)])],
        "1 pool checked, 1 too few nodes with room",
        id="a gang wider than the pool's nodes reads too few nodes",
    ),
    pytest.param(
        t.deployment(engines=[t.standalone(gpus=1)]),
        [t.cluster("a", [t.pool("p", 1), t.pool("q", 1)], taints=[TAINT])],
        "2 pools checked, 2 taint not tolerated",
        id="an untolerated NoSchedule taint rejects every pool of its cluster",
    ),
    pytest.param(
        t.deployment(engines=[t.standalone(gpus=1)]),
        [t.cluster("a", [t.pool("p", 1)], taints=[EVICT])],
        "1 pool checked, 1 taint not tolerated",
        id="an untolerated NoExecute taint rejects new replicas too",
    ),
    pytest.param(
        t.deployment(engines=[t.standalone(gpus=1)]),
        [t.cluster("a", [t.pool("p", 1)], ready=False)],
        "1 pool checked, 1 cluster not Ready",
        id="a cluster that is not Ready rejects every pool",
    ),
    pytest.param(
        t.deployment(engines=[t.standalone(gpus=1, kind="tpu")]),
        [t.cluster("a", [t.pool("p", 1)])],
        "1 pool checked, 1 selector does not match",
        id="a pool with no matching device kind reads selector does not match",
    ),
    pytest.param(
        t.deployment(engines=[t.standalone(gpus=1)], failed_placements=[avoided("a", "p")]),
        [t.cluster("a", [t.pool("p", 1)])],
        "1 pool checked, 1 failed recently",
        id="a pool avoided after a failure reads failed recently",
    ),
    pytest.param(
        t.deployment(engines=[t.standalone(gpus=4)]),
        [
            t.cluster("a", [observed("p", 2), observed("q", 1), t.pool("r", 1, [t.device("x")])]),
            t.cluster("b", [t.pool("p", 1), t.pool("q", 1)], taints=[TAINT]),
            t.cluster("c", [t.pool("p", 1)], ready=False),
        ],
        "6 pools checked, 2 taint not tolerated, 2 too few free devices, "
        "1 cluster not Ready, 1 selector does not match",
        id="causes are counted across clusters, most first, ties in checking order",
    ),
    pytest.param(
        t.deployment(engines=[t.standalone(gpus=1)]),
        [without_node_pools(t.cluster("a", [t.pool("p", 1)]))],
        "no pool checked: no selected InferenceCluster has a pool",
        id="with no readable cluster the summary says nothing could be checked",
    ),
]


@pytest.mark.parametrize(("xr", "clusters", "summary"), NO_FIT)
def test_a_replica_that_fits_nowhere_is_explained_per_cause(xr, clusters, summary):
    plan = t.schedule(xr, clusters)
    assert plan.missing == 1
    assert plan.diagnosis is not None
    assert plan.diagnosis.summary() == summary


def test_every_pool_checked_has_exactly_one_verdict():
    clusters = [
        t.cluster("a", [observed("p", 2), observed("q", 2)]),
        t.cluster("b", [t.pool("p", 1)], taints=[TAINT]),
    ]
    plan = t.schedule(t.deployment(replicas=1, engines=[t.standalone(gpus=4)]), clusters)
    assert plan.diagnosis is not None
    assert sorted(plan.diagnosis.refusals, key=lambda v: (v.cluster, v.pool)) == [
        PoolRefusal("a", "p", Cause.TOO_FEW_DEVICES),
        PoolRefusal("a", "q", Cause.TOO_FEW_DEVICES),
        PoolRefusal("b", "p", Cause.TAINT_NOT_TOLERATED),
    ]


def test_the_diagnosis_describes_the_replica_that_found_no_place():
    # The first replica takes the only free node; the second finds it full.
    clusters = [t.cluster("a", [observed("p", 8)])]
    plan = t.schedule(t.deployment(replicas=2, engines=[t.standalone(gpus=8)]), clusters)
    assert plan.scheduled == 1
    assert plan.diagnosis is not None
    assert plan.diagnosis.summary() == "1 pool checked, 1 too few free devices"


def test_a_plan_that_places_everything_has_no_diagnosis():
    plan = t.schedule(t.deployment(replicas=1), [t.cluster("a", [t.pool("p", 1)])])
    assert plan.missing == 0
    assert plan.diagnosis is None


@pytest.mark.parametrize(
    ("causes", "summary"),
    [
        pytest.param(
            [Cause.TOO_FEW_DEVICES] * 3 + [Cause.TAINT_NOT_TOLERATED],
            "4 pools checked, 3 too few free devices, 1 taint not tolerated",
            id="the most frequent cause comes first",
        ),
        pytest.param(
            [Cause.TOO_FEW_NODES, Cause.CLUSTER_NOT_READY],
            "2 pools checked, 1 cluster not Ready, 1 too few nodes with room",
            id="equal counts follow the order placement checks them",
        ),
        pytest.param(
            [Cause.SELECTOR_MISMATCH],
            "1 pool checked, 1 selector does not match",
            id="one pool is singular",
        ),
    ],
)
def test_the_summary_counts_each_cause_once(causes, summary):
    diagnosis = Diagnosis(tuple(PoolRefusal("c", f"p{i}", cause) for i, cause in enumerate(causes)))
    assert diagnosis.summary() == summary
