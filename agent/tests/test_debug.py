"""The per-node debug view: what the report counts for each node, and nothing else."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from modelplane_agent.debug import node_view
from modelplane_agent.state import (
    CLAIMS,
    CLASSES,
    NODES,
    PODS,
    POOLS,
    RULES,
    SLICES,
    ClusterState,
)
from modelplane_testkit import agent_builders as t
from modelplane_testkit.oracle import planned_probes
from modelplane_testkit.oracle_states import Pool

GPU_CLASS = t.device_class("gpu", 'device.attributes["gpu.nvidia.com"].type == "gpu"')


# kube-scheduler versions differ on it (modelplane_agent.taint_rules, Versions).
UNSELECTIVE_RULE = {
    "metadata": {"name": "r"},
    "spec": {"taint": {"key": "k", "effect": "NoSchedule"}},
}


def cluster(*objects: tuple[str, dict]) -> ClusterState:
    state = ClusterState()
    for kind, obj in objects:
        state.apply(kind, "ADDED", obj)
    return state


def gpus(name: str, count: int = 4) -> tuple[str, dict]:
    return SLICES, t.resource_slice(name, [t.device(f"g{j}") for j in range(count)])


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        pytest.param(
            [(NODES, t.node("n1", "a100")), gpus("n1"), (CLAIMS, t.claim("c", [("n1", "g0")]))],
            {"n1": {"a100": {"free": {"gpu": 3}}}},
            id="a node in the histogram reads its free devices by the pool's device names",
        ),
        pytest.param(
            [(NODES, t.node("n1", "a100", cordoned=True)), gpus("n1")],
            {"n1": {"a100": {"leftOut": "cordoned"}}},
            id="a node the histogram leaves out reads why",
        ),
        pytest.param(
            [(NODES, t.node("n1", None)), gpus("n1")],
            {},
            id="a node of no pool is not in the view",
        ),
        pytest.param(
            [
                (
                    NODES,
                    t.node("n1", "a100", allocatable={"cpu": "2", "memory": "8Gi", "pods": "9"}),
                ),
                gpus("n1"),
                (PODS, t.pod("p", node_name="n1", requests={"cpu": "1"})),
            ],
            {"n1": {"a100": {"free": {"gpu": 0}, "noRoomFor": "cpu"}}},
            id="a node without room for the smallest pod counts nothing and says what it lacks",
        ),
        pytest.param(
            [
                (
                    NODES,
                    t.node("n1", "a100", allocatable={"cpu": "4", "memory": "8Gi", "pods": "9"}),
                ),
                gpus("n1"),
                (PODS, t.pod("p", node_name="n1", requests={"cpu": "1"})),
            ],
            {"n1": {"a100": {"free": {"gpu": 1}, "cappedBy": "cpu", "uncapped": {"gpu": 4}}}},
            id="a node with room for fewer smallest pods than free devices says what caps it",
        ),
        pytest.param(
            [
                (NODES, t.node("n1", "a100")),
                (SLICES, t.resource_slice("n1", [t.device("g0")], slice_count=2)),
            ],
            {"n1": {"a100": {"free": {"gpu": 0}, "uncounted": ["incomplete resource pool"]}}},
            id="a node whose devices an incomplete resource pool hides says so",
        ),
        pytest.param(
            [(NODES, t.node("n1", "a100")), gpus("n1"), (RULES, UNSELECTIVE_RULE)],
            {
                "n1": {
                    "a100": {
                        "free": {"gpu": 0},
                        "uncounted": ["DeviceTaintRule without deviceSelector (r)"],
                    }
                }
            },
            id="a node whose devices only a rule without device selector takes names the rule",
        ),
    ],
)
def test_the_view_says_what_the_report_counts_for_each_node(objects, expected):
    pool = t.pool_observation("a100", [("gpu", t.NVIDIA, "gpu")], min_pod_requests={"cpu": "2"})
    state = cluster((CLASSES, GPU_CLASS), (POOLS, pool))
    for kind, obj in objects:
        state.apply(kind, "ADDED", obj)
    assert node_view(state)["nodes"] == expected


def test_every_node_of_an_unobservable_pool_reads_the_pools_reason():
    state = cluster(
        (POOLS, t.pool_observation("a100", [("gpu", t.NVIDIA, "missing")])),
        (NODES, t.node("n1", "a100")),
    )
    view = node_view(state)
    assert view["nodes"] == {"n1": {"a100": {"unobserved": "DeviceClassNotFound"}}}
    assert view["pools"]["a100"]["observing"] == {
        "status": "False",
        "reason": "DeviceClassNotFound",
    }


def test_the_histogram_is_the_multiset_of_the_views_free_vectors():
    rng = random.Random(7)
    state = cluster(
        (CLASSES, GPU_CLASS), (POOLS, t.pool_observation("a100", [("gpu", t.NVIDIA, "gpu")]))
    )
    for i in range(20):
        state.apply(NODES, "ADDED", t.node(f"n{i}", "a100", cordoned=rng.random() < 0.2))
        state.apply(SLICES, "ADDED", gpus(f"n{i}")[1])
        taken = rng.sample(range(4), rng.randrange(5))
        state.apply(CLAIMS, "ADDED", t.claim(f"c{i}", [(f"n{i}", f"g{j}") for j in taken]))
    view = node_view(state)
    vectors = Counter(
        (entry["a100"]["free"]["gpu"],)
        for entry in view["nodes"].values()
        if "free" in entry["a100"]
    )
    histogram = state.pool_report("a100").histogram
    assert histogram is not None
    assert dict(histogram.buckets) == dict(vectors)
    assert view["pools"]["a100"]["observedNodes"] == 20


def test_the_oracle_probes_a_capped_node_one_device_beyond_what_its_devices_leave_free():
    # kube-scheduler judges one pod: a pod claiming one device more than the capped
    # count may bind (the cap bounds how many pods fit), one more than the devices
    # alone leave free must not.
    pool = Pool("a100", [{"name": "gpu", "driver": t.NVIDIA, "deviceClassName": "gpu"}], [], None)
    view = {"n1": {"free": {"gpu": 1}, "cappedBy": "cpu", "uncapped": {"gpu": 4}}}
    more, exact = planned_probes(pool, view, "p")
    assert [(p.counts, p.expect_bound) for p in more + exact] == [
        ({"gpu": 5}, False),
        ({"gpu": 1}, True),
    ]
