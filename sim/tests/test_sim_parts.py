"""The simulator's own models, one rule per case: the binder (the cluster's node
choice), the relaxed upper bound, and the command's input errors."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
import yaml
from compose_model_deployment import default_matcher
from modelplane_common.capacity.fleet import PlacedEngine, PlacedMember, ResolvedRequest, Role
from modelplane_common.observation import DeviceKinds
from modelplane_sim import cli
from modelplane_sim.arrivals import Arrival
from modelplane_sim.binder import NodeChoice, PoolNodes, bind, release
from modelplane_sim.bound import RelaxedBound
from modelplane_sim.fleet import FleetError, from_fleet_file, load
from modelplane_sim.policies import DEVICE_COUNT, HISTOGRAMS, WHOLE_NODE
from modelplane_sim.run import START
from modelplane_sim.world import Settings, World

GPU_NIC = DeviceKinds(("gpu", "nic"), (8, 2))


def engine(gpus: int, *, pods: int = 1, copies: int = 1, nic: int = 0) -> PlacedEngine:
    requests = [ResolvedRequest("gpu", "gpu.nvidia.com", gpus, kind="gpu")]
    if nic:
        requests.append(ResolvedRequest("nic", "rdma.mellanox.com", nic, kind="nic"))
    if pods == 1:
        members = (PlacedMember(Role.STANDALONE, "p", tuple(requests)),)
    else:
        members = (
            PlacedMember(Role.LEADER, "p", tuple(requests)),
            PlacedMember(Role.WORKER, "p", tuple(requests), pods - 1),
        )
    return PlacedEngine("e", copies, members)


BINDS = [
    pytest.param(
        [(8, 2), (3, 2), (5, 2)],
        engine(2),
        NodeChoice.SPREAD,
        [[6, 2], [3, 2], [5, 2]],
        id="spread takes the node with the most free devices of the claimed kind",
    ),
    pytest.param(
        [(8, 2), (3, 2), (5, 2)],
        engine(2),
        NodeChoice.PACK,
        [[8, 2], [1, 2], [5, 2]],
        id="pack takes the node with the fewest free devices that still fit",
    ),
    pytest.param(
        [(4, 0), (2, 2)],
        engine(2, nic=1),
        NodeChoice.SPREAD,
        [[4, 0], [0, 1]],
        id="a pod fits only a node that has every kind it claims",
    ),
    pytest.param(
        [(8, 2), (8, 2), (1, 2)],
        engine(4, pods=2),
        NodeChoice.PACK,
        [[4, 2], [4, 2], [1, 2]],
        id="a gang copy takes distinct nodes even when one node would hold both pods",
    ),
    pytest.param(
        [(8, 2), (1, 2)],
        engine(4, pods=2),
        NodeChoice.SPREAD,
        None,
        id="a gang copy with too few fitting nodes binds nothing",
    ),
    pytest.param(
        [(8, 2), (2, 2)],
        engine(2, copies=3),
        NodeChoice.SPREAD,
        [[2, 2], [2, 2]],
        id="standalone copies may share a node",
    ),
    pytest.param(
        [(8, 2), (2, 2)],
        engine(4, copies=3),
        NodeChoice.SPREAD,
        None,
        id="a replica binds whole or not at all: the nodes are left as they were",
    ),
]


@pytest.mark.parametrize(("start", "placed", "choice", "after"), BINDS)
def test_the_binder_places_pods_as_the_cluster_would(start, placed, choice, after):
    nodes = PoolNodes(GPU_NIC, [(v, 1) for v in start])
    bound = bind({"p": nodes}, [placed], choice, random.Random(1))
    assert nodes.free == (after if after is not None else [list(v) for v in start])
    assert (bound is None) == (after is None)
    if bound is not None:
        release({"p": nodes}, bound)
        assert nodes.free == [list(v) for v in start]


def test_a_random_cluster_only_ever_picks_a_fitting_node():
    for seed in range(20):
        nodes = PoolNodes(GPU_NIC, [((1, 2), 3), ((6, 2), 1), ((2, 0), 2)])
        assert bind({"p": nodes}, [engine(5)], NodeChoice.RANDOM, random.Random(seed))
        assert sorted(map(tuple, nodes.free)).count((1, 2)) == 4


H100 = {
    "name": "gpu",
    "driver": "gpu.nvidia.com",
    "deviceClassName": "gpu.nvidia.com",
    "count": 8,
    "attributes": {"gpu.nvidia.com/productName": {"string": "H100"}},
}
L4 = {
    "name": "gpu",
    "driver": "gpu.nvidia.com",
    "deviceClassName": "gpu.nvidia.com",
    "count": 4,
    "attributes": {"gpu.nvidia.com/productName": {"string": "L4"}},
}
FLEET = {
    "clusters": [
        {
            "name": "a",
            "pools": [
                {"name": "h100", "nodes": 2, "devices": [H100]},
                {"name": "l4", "nodes": 4, "devices": [L4]},
            ],
        },
        {
            "name": "b",
            "pools": [
                {
                    "name": "h100",
                    "nodes": 1,
                    "devices": [H100],
                    "background": [{"nodes": 1, "used": {"gpu": 3}}],
                }
            ],
        },
    ]
}
ONLY_H100 = 'device.attributes["gpu.nvidia.com"].productName == "H100"'


def wanting(gpus_per_pod: int, pods: int, selector: str = "") -> Arrival:
    return Arrival(
        timedelta(0),
        f"d{gpus_per_pod}-{pods}-{len(selector)}",
        pods,
        1,
        1,
        gpus_per_pod,
        timedelta(hours=1),
        selector,
    )


BOUNDS = [
    pytest.param([], 0, id="nothing live: nothing to allocate"),
    pytest.param([wanting(1, 5)], 5, id="demand below capacity: all of it"),
    pytest.param(
        [wanting(8, 4, ONLY_H100)],
        21,
        id="H100-only demand is capped by the H100 pools' free GPUs, background load excluded",
    ),
    pytest.param(
        [wanting(8, 4, ONLY_H100), wanting(1, 30)],
        37,
        id="demand that can go anywhere fills what H100-only demand leaves",
    ),
    pytest.param(
        [wanting(8, 2, 'device.driver == "tpu"')], 0, id="demand no pool matches adds nothing"
    ),
    pytest.param([wanting(8, 1)], 8, id="an 8-GPU pod counts only where a node has 8"),
]


@pytest.mark.parametrize(("live", "expected"), BOUNDS)
def test_the_relaxed_bound_is_the_max_flow_to_the_pools_each_deployment_matches(live, expected):
    fleet = from_fleet_file(FLEET)
    world = World(fleet, WHOLE_NODE, default_matcher(), Settings(), START)
    assert RelaxedBound(fleet, world.clusters, default_matcher()).at(live) == expected


BAD_INPUTS = [
    pytest.param(
        {"clusters": "none"},
        {"ratePerMinute": 1, "gpusPerPod": {1: 1}},
        "modelplane-sim: clusters: must be a non-empty list",
        id="a bad fleet file",
    ),
    pytest.param(
        FLEET,
        {"ratePerMinute": -1, "gpusPerPod": {1: 1}},
        "modelplane-sim: ratePerMinute: must be a positive number",
        id="a bad arrival model",
    ),
]


@pytest.mark.parametrize(("fleet", "model", "message"), BAD_INPUTS)
def test_the_command_rejects_bad_input_in_one_line_with_status_2(
    tmp_path, capsys, fleet, model, message
):
    (tmp_path / "f.yaml").write_text(yaml.safe_dump(fleet))
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(model))
    code = cli.main(
        [
            "--fleet",
            str(tmp_path / "f.yaml"),
            "--arrivals",
            str(tmp_path / "a.yaml"),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(message) and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_selector_that_fails_on_a_device_is_kept_unplaced_as_the_function_keeps_it():
    failing = wanting(1, 1, 'device.attributes["gpu.nvidia.com"].productName > 3')
    fleet = from_fleet_file(FLEET)
    world = World(fleet, WHOLE_NODE, default_matcher(), Settings(), START)
    world.step(START, [failing, wanting(1, 2)])
    assert world.allocated == 2  # the other deployment is placed and bound
    assert world.live[failing.name].replicas == {}
    (note,) = world.notes
    field = "spec.template.spec.engines[0].members[0].nodeSelector.devices[0].selectors[0]"
    assert note.startswith(f"{failing.name}: engine engine: {field}.cel.expression: CEL selector")
    assert "never placed" in note
    bound = RelaxedBound(fleet, world.clusters, default_matcher())
    assert bound.at([failing, wanting(1, 2)]) == 2


def test_inference_clusters_whose_spec_breaks_the_schema_are_one_line(tmp_path):
    cluster = {
        "kind": "InferenceCluster",
        "metadata": {"name": "east"},
        "spec": {"nodePools": [{"name": "h100", "nodeCount": "many", "devices": [H100]}]},
    }
    path = tmp_path / "clusters.yaml"
    path.write_text(yaml.safe_dump(cluster))
    with pytest.raises(FleetError) as err:
        load(path)
    assert str(err.value).startswith("items[0]: spec.")
    assert "\n" not in str(err.value)


ONE_NODE = {"clusters": [{"name": "a", "pools": [{"name": "p", "nodes": 1, "devices": [H100]}]}]}


@pytest.mark.parametrize(
    ("republish", "bound_at_minute"),
    [
        pytest.param(5, 10, id="a histogram 5 minutes apart hides a departure until the next one"),
        pytest.param(1, 7, id="a histogram republished every minute shows it at once"),
    ],
)
def test_histograms_are_stale_between_republishes(republish, bound_at_minute):
    first = Arrival(timedelta(0), "first", 1, 1, 1, 8, timedelta(minutes=6))
    second = Arrival(timedelta(minutes=7), "second", 1, 1, 1, 8, timedelta(hours=1))
    settings = Settings(republish=timedelta(minutes=republish))
    world = World(from_fleet_file(ONE_NODE), HISTOGRAMS, default_matcher(), settings, START)
    for minute in range(13):
        now = START + timedelta(minutes=minute)
        world.step(now, [a for a in (first, second) if a.at == timedelta(minutes=minute)])
    bound = world.live["second"].first_bound[0]
    assert bound - START == timedelta(minutes=bound_at_minute, seconds=5)
    assert world.tally.overpromised == 0


FRAGMENTED = {
    "clusters": [
        {
            "name": "a",
            "pools": [
                {
                    "name": "p",
                    "nodes": 2,
                    "devices": [H100],
                    "background": [{"nodes": 2, "used": {"gpu": 5}}],
                }
            ],
        },
        {"name": "b", "pools": [{"name": "p", "nodes": 1, "devices": [H100]}]},
    ]
}


def test_an_over_promise_is_healed_by_the_core_after_the_grace_period():
    """Device-count on cluster a sees 16 GPUs; its nodes have 3 free each, so a 4-GPU
    pod cannot bind. The core moves the replica after the 2-minute grace period and
    remembers the pool in failedPlacements."""
    wants = Arrival(timedelta(0), "w", 1, 1, 1, 4, timedelta(hours=1))
    world = World(from_fleet_file(FRAGMENTED), DEVICE_COUNT, default_matcher(), Settings(), START)
    for minute in range(5):
        world.step(START + timedelta(minutes=minute), [wants] if minute == 0 else [])
    live = world.live["w"]
    assert world.tally.overpromised == 1 and world.tally.never_bound_pods == 1
    assert live.replicas[0].cluster == "b" and live.replicas[0].bound is not None
    assert live.first_bound[0] - START == timedelta(minutes=3, seconds=5)
    assert [(f.cluster, f.pool) for f in live.failed] == [("a", "p")]
