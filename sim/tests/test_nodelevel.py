"""The node-level reference: its fragmentation score on hand-worked cases, and its placements.

The score (modelplane_common.capacity.fragmentation): a node's free GPUs count as fragmented,
weighted by the popularity of each task shape that does not fit it; a pod
goes where that grows least. The policy (sim/nodelevel.py) must never put
two pods of one gang copy on one node nor take more than a node has.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from modelplane_common.capacity.fleet import PlacedEngine, PlacedMember, ResolvedRequest, Role
from modelplane_common.capacity.fragmentation import Shapes, choose_node, fragmentation, increase
from modelplane_common.observation import DeviceKinds
from modelplane_sim import run
from modelplane_sim.arrivals import Workload, read_model
from modelplane_sim.binder import NodeChoice, PoolNodes
from modelplane_sim.fleet import from_fleet_file
from modelplane_sim.nodelevel import NodeLevelWorld, place_engine
from modelplane_sim.policies import NODE_LEVEL
from modelplane_sim.world import Settings

ONE_OR_EIGHT = Shapes.of({(1,): 1, (8,): 1})  # half the pods want 1 GPU, half 8
GPU = (True,)
GPU_AND_NIC = (True, False)

FRAGMENTATION = [
    pytest.param((8,), ONE_OR_EIGHT, GPU, 0.0, id="an empty node fits every shape: nothing"),
    pytest.param(
        (7,), ONE_OR_EIGHT, GPU, 3.5, id="7 free GPUs no 8-GPU pod can use, half the pods"
    ),
    pytest.param((0,), ONE_OR_EIGHT, GPU, 0.0, id="a full node has nothing to fragment"),
    pytest.param(
        (3,), Shapes.of({(1,): 2, (2,): 1, (4,): 1}), GPU, 0.75, id="3 free, only 4 misses: 3 x 1/4"
    ),
    pytest.param((5,), Shapes(()), GPU, 0.0, id="no shapes expected: nothing is fragmented"),
    pytest.param(
        (4, 0),
        Shapes.of({(1, 1): 1}),
        GPU_AND_NIC,
        4.0,
        id="no NIC left: the 4 GPUs are fragmented, the NICs are not GPUs",
    ),
]


@pytest.mark.parametrize(("free", "shapes", "metric", "expected"), FRAGMENTATION)
def test_a_nodes_fragmentation_is_its_free_gpus_weighted_by_the_shapes_that_miss_it(
    free, shapes, metric, expected
):
    assert fragmentation(free, shapes, metric) == pytest.approx(expected)


INCREASES = [
    pytest.param((8,), (1,), 3.5, id="a 1-GPU pod on an empty node: 7 GPUs no 8-GPU pod fits"),
    pytest.param((1,), (1,), -0.5, id="the last GPU of a node: its fragment is gone"),
    pytest.param((8,), (8,), 0.0, id="a whole node for an 8-GPU pod leaves nothing"),
    pytest.param((2,), (1,), -0.5, id="2 free to 1 free: one fragmented GPU less"),
]


@pytest.mark.parametrize(("free", "demand", "expected"), INCREASES)
def test_placing_a_pod_increases_fragmentation_by_the_nodes_after_minus_before(
    free, demand, expected
):
    assert increase(free, demand, ONE_OR_EIGHT, GPU) == pytest.approx(expected)


CHOICES = [
    pytest.param(
        [[8], [1]], (1,), set(), ONE_OR_EIGHT, (1, -0.5), id="a small pod fills the fragment"
    ),
    pytest.param(
        [[4], [4], [2]],
        (1,),
        set(),
        Shapes.of({(1,): 1}),
        (2, 0.0),
        id="equal increases: the fewest free GPUs, best fit",
    ),
    pytest.param(
        [[8], [8]], (1,), set(), Shapes.of({(1,): 1}), (0, 0.0), id="equal nodes: the lowest index"
    ),
    pytest.param(
        [[8], [1]], (1,), {1}, ONE_OR_EIGHT, (0, 3.5), id="a node the gang took is not offered"
    ),
    pytest.param(
        [[3], [5]], (0,), set(), ONE_OR_EIGHT, (0, 0.0), id="a claimless pod: the fullest node"
    ),
    pytest.param([[3], [2]], (4,), set(), ONE_OR_EIGHT, None, id="no node fits: none"),
]


@pytest.mark.parametrize(("nodes", "demand", "taken", "shapes", "expected"), CHOICES)
def test_a_pod_takes_the_fitting_node_whose_fragmentation_grows_least(
    nodes, demand, taken, shapes, expected
):
    assert choose_node(nodes, demand, taken, shapes, GPU) == expected


def _engine(pods_per_copy: int, gpus: int, copies: int = 1) -> PlacedEngine:
    request = ResolvedRequest(
        name="gpu", device_class="gpu.nvidia.com", count=gpus, selectors=(), kind="gpu"
    )
    if pods_per_copy == 1:
        members = (PlacedMember(Role.STANDALONE, "big", (request,)),)
    else:
        members = (
            PlacedMember(Role.LEADER, "big", (request,)),
            PlacedMember(Role.WORKER, "big", (request,), pods_per_copy - 1),
        )
    return PlacedEngine("engine", copies, members)


KINDS = PoolNodes(DeviceKinds(("gpu",), (8,)), ())

GANGS = [
    pytest.param([[8], [8], [8]], _engine(3, 4), [[4], [4], [4]], id="3 pods of 4: three nodes"),
    pytest.param([[8], [8]], _engine(3, 2), None, id="3 pods, 2 nodes: refused though 16 GPUs fit"),
    pytest.param(
        [[8], [4], [8]],
        _engine(2, 4, copies=2),
        [[0], [0], [4]],
        id="two gang copies may share nodes, each copy on distinct ones",
    ),
    pytest.param([[8], [3]], _engine(1, 4, copies=3), None, id="more than the nodes hold: none"),
]


@pytest.mark.parametrize(("nodes", "engine", "after"), GANGS)
def test_a_gang_copy_never_shares_a_node_and_no_node_gives_more_than_it_has(nodes, engine, after):
    placed = place_engine("big", nodes, engine, KINDS, (ONE_OR_EIGHT, GPU))
    if after is None:
        assert placed is None
        return
    assert placed is not None and nodes == after
    bound, _ = placed
    per_copy = sum(m.pods_per_copy for m in engine.members) if engine.is_gang else 1
    for copy in range(engine.copies):
        pods = bound[copy * per_copy : (copy + 1) * per_copy]
        assert len({p.node for p in pods}) == len(pods), pods


GPU8 = [
    {"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 8}
]
FLEET = {
    "clusters": [
        {
            "name": "east",
            "pools": [
                {
                    "name": "big",
                    "nodes": 5,
                    "devices": GPU8,
                    "background": [{"nodes": 2, "used": {"gpu": 3}}],
                },
            ],
        },
        {"name": "west", "pools": [{"name": "big", "nodes": 3, "devices": GPU8}]},
    ]
}
GANG_HEAVY = {
    "ratePerMinute": 1.5,
    "replicas": {1: 2, 2: 1},
    "copies": {1: 2, 2: 1},
    "gpusPerPod": {1: 3, 2: 1, 3: 1, 8: 1},
    "gang": {"ratio": 0.4, "podsPerCopy": {2: 2, 3: 1}, "gpusPerPod": {4: 1, 8: 1}},
    "lifetime": {"median": "20m", "sigma": 1.0, "min": "3m", "max": "2h"},
}


class Recording(NodeLevelWorld):
    """The node-level world, checking each placement as it is made."""

    def _place_choice(self, live, index, choice, now):
        arrival = live.arrival
        per_copy = arrival.pods_per_copy
        assert len(choice.pods) == arrival.copies * per_copy
        for copy in range(arrival.copies):
            pods = choice.pods[copy * per_copy : (copy + 1) * per_copy]
            assert len({p.node for p in pods}) == per_copy, (arrival, pods)
        super()._place_choice(live, index, choice, now)  # occupy raises on an over-allocation
        assert not list(self.negative_free_counts())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_node_level_reference_never_shares_a_gang_node_nor_over_allocates_in_a_run(
    seed, monkeypatch
):
    monkeypatch.setattr(run, "NodeLevelWorld", Recording)
    length = timedelta(hours=2)
    workload = Workload(read_model(GANG_HEAVY).arrivals(length, seed), length)
    settings = Settings(choice=NodeChoice.SPREAD, seed=seed)
    result = run.simulate(from_fleet_file(FLEET), workload, settings, [NODE_LEVEL])
    world = result.worlds["node-level"]
    assert isinstance(world, Recording)
    assert world.tally.placements > 20 and world.tally.overpromised == 0
    gangs = [a for a in workload.arrivals if a.gang]
    assert gangs, "the workload must hold gangs for the check to mean anything"
    capacity = world.capacity()
    for sample, bound in zip(world.samples, result.bound, strict=True):
        assert 0 <= sample.allocated <= bound <= capacity
