"""The fleet simulator (modelplane-sim): the invariants its figures rely on, on small profiles.

Each run replays the same arrivals through the real placement core under
every policy; these tests check what must hold whatever the numbers are:
nothing allocates more than exists, the relaxed bound is above every
policy, a fresh histogram with a spreading cluster never over-promises
(and the detector does fire where over-promise is possible), the same
seed gives the same run, bad input is one line naming the field, and the
report is written.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TypedDict, Unpack

import pytest
import yaml
from modelplane_sim import cli
from modelplane_sim.arrivals import Arrival, ArrivalError, Workload, read_model
from modelplane_sim.binder import NodeChoice
from modelplane_sim.fleet import FleetError, from_fleet_file, load
from modelplane_sim.policies import (
    DEVICE_COUNT,
    HISTOGRAMS,
    HISTOGRAMS_PACK,
    WHOLE_NODE,
    all_policies,
)
from modelplane_sim.run import simulate
from modelplane_sim.world import Settings
from modelplane_testkit.fields import reject_unknown

GPU8 = [
    {"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 8}
]
GPU4_NIC2 = [
    {"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com", "count": 4},
    {
        "name": "nic",
        "driver": "rdma.mellanox.com",
        "deviceClassName": "rdma.mellanox.com",
        "count": 2,
    },
]


def small_fleet(background: list | None = None) -> dict:
    return {
        "clusters": [
            {
                "name": "east",
                "pools": [
                    {"name": "big", "nodes": 6, "devices": GPU8, "background": background or []},
                    {"name": "small", "nodes": 4, "devices": GPU4_NIC2},
                ],
            },
            {"name": "west", "pools": [{"name": "big", "nodes": 4, "devices": GPU8}]},
        ]
    }


BUSY = small_fleet([{"nodes": 3, "used": {"gpu": 5}}])

MODEL = {
    "ratePerMinute": 1.2,
    "replicas": {1: 5, 2: 3, 3: 2},
    "copies": {1: 8, 2: 2},
    "gpusPerPod": {1: 5, 2: 2, 3: 1, 4: 2, 8: 2},
    "gang": {"ratio": 0.15, "podsPerCopy": {2: 3, 3: 1}, "gpusPerPod": {4: 1, 8: 1}},
    "lifetime": {"median": "30m", "sigma": 1.0, "min": "3m", "max": "3h"},
    "selectors": [{"weight": 1, "expression": 'device.driver == "gpu.nvidia.com"'}],
}


class RunOptions(TypedDict, total=False):
    hours: int  # how long the workload runs; default 3
    skip: bool  # skip unchanged steps (Settings.skip_unchanged); default True
    declare: bool  # packing clusters declare nodeScoring (Settings.declare_scoring); default True


def run(
    fleet: dict,
    choice: NodeChoice,
    republish: str,
    seed: int = 3,
    policies=None,
    **options: Unpack[RunOptions],
):
    reject_unknown(options, RunOptions)
    length = timedelta(hours=options.get("hours", 3))
    workload = Workload(read_model(MODEL).arrivals(length, seed), length)
    settings = Settings(
        step=timedelta(minutes=1),
        republish=timedelta(minutes=int(republish.rstrip("m"))),
        choice=choice,
        seed=seed,
        skip_unchanged=options.get("skip", True),
        declare_scoring=options.get("declare", True),
    )
    return simulate(from_fleet_file(fleet), workload, settings, policies)


PROFILES = [
    pytest.param(
        small_fleet(),
        NodeChoice.SPREAD,
        "3m",
        id="spreading cluster, histograms 3 minutes old at most",
    ),
    pytest.param(
        small_fleet(),
        NodeChoice.PACK,
        "6m",
        id="packing cluster, histograms republished past maxAge",
    ),
    pytest.param(
        BUSY, NodeChoice.RANDOM, "2m", id="random node choice on a pool with background load"
    ),
]


@pytest.mark.parametrize(("fleet", "choice", "republish"), PROFILES)
def test_no_policy_allocates_more_than_exists_nor_beats_the_bound(fleet, choice, republish):
    result = run(fleet, choice, republish)
    for name, world in result.worlds.items():
        assert not list(world.negative_free_counts()), name
        assert not world.notes, name
        capacity = world.capacity()
        for sample, bound in zip(world.samples, result.bound, strict=True):
            assert 0 <= sample.allocated <= bound <= capacity, (name, sample)
        assert max(s.allocated for s in world.samples) > 0, f"{name} placed nothing"


FRESH = [
    pytest.param(
        small_fleet(), seed, id=f"fresh histograms, spreading cluster, seed {seed}: no over-promise"
    )
    for seed in (1, 2, 3)
] + [pytest.param(BUSY, 4, id="fresh histograms see background load the declared policy cannot")]


@pytest.mark.parametrize(("fleet", "seed"), FRESH)
def test_fresh_histograms_with_a_spreading_cluster_never_over_promise(fleet, seed):
    result = run(fleet, NodeChoice.SPREAD, "1m", seed, (HISTOGRAMS,))
    tally = result.worlds[HISTOGRAMS.name].tally
    assert tally.placed_pods > 100
    assert tally.overpromised_pods == 0
    assert tally.never_bound_pods == 0


OVER_PROMISE = [
    pytest.param(
        BUSY,
        WHOLE_NODE,
        NodeChoice.SPREAD,
        "1m",
        True,
        id="whole-node accounting over-promises nodes that background load holds",
    ),
    pytest.param(
        small_fleet(),
        DEVICE_COUNT,
        NodeChoice.SPREAD,
        "1m",
        True,
        id="device-count accounting over-promises when the free devices are scattered over nodes",
    ),
    pytest.param(
        small_fleet(),
        HISTOGRAMS,
        NodeChoice.PACK,
        "4m",
        False,
        id="histograms up to 4 minutes old over-promise when the cluster packs, undeclared",
    ),
]


@pytest.mark.parametrize(("fleet", "policy", "choice", "republish", "declare"), OVER_PROMISE)
def test_the_over_promise_detector_fires_where_over_promise_is_possible(
    fleet, policy, choice, republish, declare
):
    tally = run(fleet, choice, republish, 3, (policy,), declare=declare).worlds[policy.name].tally
    assert tally.overpromised_pods > 0
    assert tally.overpromised <= tally.placements


def test_a_packing_cluster_that_declares_its_scoring_is_not_over_promised():
    # The run that over-promised while the core assumed spread on every cluster: the
    # packing binder's InferenceCluster now says nodeScoring: Pack (fleet.py).
    tally = (
        run(small_fleet(), NodeChoice.PACK, "4m", 3, (HISTOGRAMS,)).worlds[HISTOGRAMS.name].tally
    )
    assert tally.placed_pods > 100
    assert tally.overpromised_pods == 0


def test_the_same_seed_replays_the_same_run_and_another_seed_does_not():
    first = run(small_fleet(), NodeChoice.RANDOM, "3m", 5, hours=1)
    again = run(small_fleet(), NodeChoice.RANDOM, "3m", 5, hours=1)
    other = run(small_fleet(), NodeChoice.RANDOM, "3m", 6, hours=1)
    for name in first.worlds:
        assert first.worlds[name].samples == again.worlds[name].samples
    assert first.bound == again.bound != other.bound


def test_skipping_the_passes_of_deployments_nothing_could_unblock_changes_nothing():
    skipped = run(BUSY, NodeChoice.RANDOM, "4m", 2, hours=2)
    planned = run(BUSY, NodeChoice.RANDOM, "4m", 2, hours=2, skip=False)
    for name, world in skipped.worlds.items():
        assert world.samples == planned.worlds[name].samples, name
        assert world.tally.passes < planned.worlds[name].tally.passes, name


def test_the_report_is_written_with_every_plot_and_the_table_names_every_policy(tmp_path):
    result = run(small_fleet(), NodeChoice.SPREAD, "3m")
    page = cli.write_report(tmp_path, result, {"fleet": "small"})
    html = page.read_text()
    pngs = sorted(tmp_path.glob("*.png"))
    assert [p.name for p in pngs] == sorted(
        ["gpus.png", "waiting.png", "overpromised.png", "stranded.png", "placement.png"]
    )
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f'src="{png.name}"' in html
    text = cli.table(result.rows)
    for policy in [p.name for p in all_policies()] + ["upper bound"]:
        assert policy in text and policy in html


def test_the_command_prints_the_table_and_writes_the_report(tmp_path, capsys):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(small_fleet()))
    model = tmp_path / "arrivals.yaml"
    model.write_text(yaml.safe_dump({**MODEL, "duration": "40m"}))
    out = tmp_path / "report"
    assert cli.main(["--fleet", str(fleet), "--arrivals", str(model), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    for policy in all_policies():
        assert f"| {policy.name}" in printed.out
    assert "41/41 steps" in printed.err
    assert (out / "report.html").is_file()


CSV = "minute,name,replicas,copies,pods_per_copy,gpus_per_pod,lifetime_minutes,selector\n"


def test_a_csv_of_arrivals_is_replayed_as_written(tmp_path):
    path = tmp_path / "arrivals.csv"
    path.write_text(CSV + "0,big,1,1,2,8,30,\n5,small,2,1,1,1,10,\n")
    workload = cli.arrival_input.load(path, seed=1)
    assert [(a.name, a.pods, a.gpus) for a in workload.arrivals] == [
        ("big", 2, 16),
        ("small", 2, 2),
    ]
    result = simulate(from_fleet_file(small_fleet()), workload, Settings(), (HISTOGRAMS,))
    assert max(s.allocated for s in result.worlds[HISTOGRAMS.name].samples) == 18


@pytest.mark.parametrize(
    ("policy", "clusters"),
    [
        pytest.param(HISTOGRAMS, ["east", "west"], id="the default deployment spreads"),
        pytest.param(
            HISTOGRAMS_PACK,
            ["east", "east"],
            id="the Pack row's deployment packs where it breaks the smallest nodes",
        ),
    ],
)
def test_the_pack_row_replays_its_deployments_asking_cluster_spreading_pack(
    tmp_path, policy, clusters
):
    path = tmp_path / "arrivals.csv"
    path.write_text(CSV + "0,pair,2,1,1,1,60,\n")
    workload = cli.arrival_input.load(path, seed=1, duration=timedelta(minutes=5))
    result = simulate(from_fleet_file(small_fleet()), workload, Settings(), (policy,))
    placed = result.worlds[policy.name].live["pair"].replicas.values()
    assert sorted(r.cluster for r in placed) == clusters


BAD_ROWS = [
    pytest.param(
        "0,a,0,1,1,1,30,\n", "line 2 replicas: must be a number of at least 1", id="no replicas"
    ),
    pytest.param("inf,a,1,1,1,1,30,\n", "line 2 minute: must be a number", id="an endless minute"),
    pytest.param(
        "0,a,1,1,1,1,30,device.driver ==\n",
        "line 2 selector: ",
        id="a selector that does not compile",
    ),
]


@pytest.mark.parametrize(("row", "message"), BAD_ROWS)
def test_a_bad_csv_row_is_one_line_naming_the_line_and_column(tmp_path, row, message):
    path = tmp_path / "arrivals.csv"
    path.write_text(CSV + row)
    with pytest.raises(ArrivalError) as err:
        cli.arrival_input.load(path, seed=1)
    assert str(err.value).startswith(message)


def test_inference_clusters_from_kubectl_start_from_their_published_histograms(tmp_path):
    cluster = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "east"},
        "spec": {
            "credentials": {"secretRef": {"namespace": "x", "name": "east", "key": "kubeconfig"}},
            "nodePools": [
                {
                    "name": "h100",
                    "nodeCount": 3,
                    "maxNodeCount": 9,
                    "fallback": "DeviceCount",
                    "devices": GPU8,
                }
            ],
        },
        "status": {
            "gpuPools": [
                {
                    "name": "h100",
                    "observedAt": "2026-01-01T00:00:00Z",
                    "observedNodes": 2,
                    "nodesByFreeDevices": [{"free": {"gpu": 2}, "nodes": 2}],
                }
            ]
        },
    }
    path = tmp_path / "clusters.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [cluster]}))
    fleet = load(path)
    (shape,) = fleet.clusters
    assert shape.pools[0].start == (((2,), 2), ((8,), 1))
    assert "maxNodeCount" not in shape.spec["nodePools"][0]  # no autoscaler is simulated
    assert "fallback" not in shape.spec["nodePools"][0]  # the policy decides for every pool


BAD_FLEETS = [
    pytest.param(
        {"clusters": []}, "clusters: must be a non-empty list", id="a fleet without clusters"
    ),
    pytest.param(
        {"clusters": [{"name": "a", "pools": [{"name": "p", "nodes": 0, "devices": GPU8}]}]},
        "clusters[0].pools[0].nodes: must be a whole number of at least 1 (got 0)",
        id="a pool without nodes",
    ),
    pytest.param(
        small_fleet([{"nodes": 7, "used": {"gpu": 1}}]),
        "clusters[0].pools[0].background: covers more than the pool's 6 nodes (got 7)",
        id="background load on more nodes than the pool has",
    ),
    pytest.param(
        small_fleet([{"nodes": 1, "used": {"tpu": 1}}]),
        "clusters[0].pools[0].background[0].used: must map kinds ('gpu',)",
        id="background load on a kind the pool does not have",
    ),
    pytest.param(
        {
            "clusters": [
                {"name": "a", "pools": [{"name": "p", "nodes": 1, "devices": [{"name": "gpu"}]}]}
            ]
        },
        "clusters[0] (a): ",
        id="a device the InferenceCluster schema rejects, through the real reader",
    ),
    pytest.param(
        {**small_fleet(), "maxAge": "often"}, "maxAge: ", id="an unreadable observation maxAge"
    ),
    pytest.param(
        {
            "shapes": {"h100": GPU8},
            "clusters": [{"name": "a", "pools": [{"name": "p", "nodes": 1, "shape": "a100"}]}],
        },
        "clusters[0].pools[0].shape: must name one of ['h100'] (got \"a100\")",
        id="a pool naming a shape the fleet does not define",
    ),
    pytest.param(
        {**small_fleet(), "metricKinds": "gpu"},
        "metricKinds: must be a non-empty list of kind names",
        id="metric kinds that are not a list",
    ),
    pytest.param(
        {"clusters": [{**small_fleet()["clusters"][1], "scoring": "MostAllocated"}]},
        "clusters[0].scoring: must be one of ['spread', 'pack', 'random']",
        id="a node scoring the binder does not model",
    ),
]


def test_pools_that_name_a_shape_share_its_devices():
    fleet = from_fleet_file(
        {
            "shapes": {"h100": GPU8},
            "clusters": [{"name": "a", "pools": [{"name": "p", "nodes": 2, "shape": "h100"}]}],
        }
    )
    (cluster,) = fleet.clusters
    assert cluster.spec["nodePools"] == [{"name": "p", "nodeCount": 2, "devices": GPU8}]
    assert cluster.pools[0].start == (((8,), 2),)


SCORING = [
    pytest.param(None, NodeChoice.SPREAD, [[7], [7]], id="no declaration: the run's spread binder"),
    pytest.param("pack", NodeChoice.SPREAD, [[6], [8]], id="declared pack beats the run's binder"),
    pytest.param("spread", NodeChoice.PACK, [[7], [7]], id="declared spread beats a pack run"),
]


@pytest.mark.parametrize(("scoring", "binder", "free"), SCORING)
def test_a_clusters_declared_node_scoring_decides_how_its_pods_bind(scoring, binder, free):
    cluster = {"name": "c", "pools": [{"name": "p", "nodes": 2, "devices": GPU8}]}
    if scoring is not None:
        cluster["scoring"] = scoring
    fleet = from_fleet_file({"clusters": [cluster]})
    arrivals = tuple(
        Arrival(timedelta(0), f"d{i}", 1, 1, 1, 1, timedelta(hours=1)) for i in range(2)
    )
    settings = Settings(choice=binder)
    result = simulate(fleet, Workload(arrivals, timedelta(minutes=2)), settings, [DEVICE_COUNT])
    assert result.worlds["device-count"].nodes["c"]["p"].free == free


@pytest.mark.parametrize(("raw", "message"), BAD_FLEETS)
def test_a_bad_fleet_is_one_line_naming_the_field(raw, message):
    with pytest.raises(FleetError) as err:
        from_fleet_file(raw)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


BAD_MODELS = [
    pytest.param(
        {**MODEL, "ratePerMinute": 0}, "ratePerMinute: must be a positive number", id="no arrivals"
    ),
    pytest.param(
        {**MODEL, "gpusPerPod": {0: 1}}, "gpusPerPod: values must be whole", id="a pod of no GPU"
    ),
    pytest.param(
        {**MODEL, "gang": {"ratio": 2}},
        "gang.ratio: must be a number from 0 to 1",
        id="a gang ratio above 1",
    ),
    pytest.param(
        {**MODEL, "lifetime": {"median": "soon"}}, "lifetime.median: ", id="an unreadable lifetime"
    ),
    pytest.param(
        {**MODEL, "selectors": [{"weight": 1, "expression": "device.driver =="}]},
        "selectors[0].expression: ",
        id="a selector the scheduler's CEL compiler rejects",
    ),
]


@pytest.mark.parametrize(("raw", "message"), BAD_MODELS)
def test_a_bad_arrival_model_is_one_line_naming_the_field(raw, message):
    with pytest.raises(ArrivalError) as err:
        read_model(raw)
    assert str(err.value).startswith(message)


def test_the_example_fleet_as_the_control_plane_sees_it_replays():
    """examples/fleet/clusters.yaml: InferenceClusters with their published status
    (one fresh, one Declared, one rejected and stale)."""
    root = Path(__file__).resolve().parents[2]
    fleet = load(root / "examples/fleet/clusters.yaml")
    assert [c.name for c in fleet.clusters] == ["gpu-east", "gpu-west", "gpu-lab"]
    length = timedelta(hours=1)
    workload = Workload(read_model(MODEL).arrivals(length, 1), length)
    result = simulate(fleet, workload, Settings(), (HISTOGRAMS,))
    assert max(s.allocated for s in result.worlds[HISTOGRAMS.name].samples) > 0


def test_the_default_profile_files_load():
    root = Path(__file__).resolve().parents[2]
    fleet = load(root / "examples/sim/fleet.yaml")
    workload = cli.arrival_input.load(root / "examples/sim/arrivals.yaml", seed=1)
    assert len(fleet.clusters) >= 2 and len(workload.arrivals) > 100
    listed = cli.arrival_input.load(root / "examples/sim/arrivals.csv", seed=1)
    assert any(a.gang for a in listed.arrivals) and all(
        a.selector or a.name == "embed" for a in listed.arrivals
    )
