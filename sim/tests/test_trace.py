"""The trace loader (sim/trace.py) on a sample in the openb format that we wrote ourselves.

sim/tests/data/openb-sample holds 7 nodes (one without a GPU) and 6
tasks (one CPU-only, one GPU-sharing, one with a gpu_spec) in the columns
of the published openb csv files; the published files are not shipped
(their folder states no licence).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from modelplane_sim import cli, trace
from modelplane_sim.arrivals import ArrivalError
from modelplane_sim.fleet import FleetError

SAMPLE = Path(__file__).parent / "data" / "openb-sample"
NODES = SAMPLE / trace.NODES_FILE
PODS = SAMPLE / "openb_pod_list_default.csv"

POOLS = [
    pytest.param(
        1, {"g2-x8": 3, "t4-x2": 2, "v100m32-x8": 1}, id="every GPU node, by model and count"
    ),
    pytest.param(2, {"g2-x8": 1, "t4-x2": 2}, id="every 2nd GPU node in file order"),
]


@pytest.mark.parametrize(("every", "pools"), POOLS)
def test_gpu_nodes_become_pools_by_model_and_gpu_count(every, pools):
    fleet = trace.read_nodes(NODES, every)
    assert trace.counts(fleet) == pools
    (cluster,) = fleet.clusters
    g2 = next(p for p in cluster.spec["nodePools"] if p["name"] == "g2-x8")
    (device,) = g2["devices"]
    assert device["count"] == 8
    assert device["attributes"]["gpu.nvidia.com/productName"] == {"string": "G2"}


def test_whole_gpu_tasks_are_read_in_creation_order_and_the_others_counted():
    tasks, skipped = trace.read_tasks(PODS)
    assert [(t.name, t.gpus, t.models) for t in tasks] == [
        ("sample-pod-00", 8, ()),
        ("sample-pod-03", 1, ()),
        ("sample-pod-04", 2, ("V100M32", "G2")),
        ("sample-pod-05", 4, ()),
    ]
    assert skipped == 2  # a CPU-only task and a GPU-sharing one


def test_a_pod_list_without_gpu_spec_nor_creation_time_is_read_in_file_order(tmp_path):
    pods = tmp_path / "openb_pod_list_multigpu50.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nb,1,1,2,1000\na,1,1,1,1000\n")
    tasks, skipped = trace.read_tasks(pods)
    assert [(t.name, t.gpus, t.models) for t in tasks] == [("b", 2, ()), ("a", 1, ())]
    assert skipped == 0


@pytest.mark.parametrize("seed", [1, 2])
def test_tasks_are_drawn_until_their_gpus_reach_the_demand_and_never_leave(seed):
    replay = trace.load(NODES, PODS, 1.0, timedelta(hours=8), seed=seed)
    arrivals = replay.workload.arrivals
    gpus = [a.gpus_per_pod for a in arrivals]
    # The sample's fleet has 36 GPUs: the draws stop at the first that reaches them.
    assert sum(gpus) == replay.demand_gpus >= 36 > sum(gpus[:-1])
    assert set(gpus) <= {8, 1, 2, 4}
    assert arrivals[-1].at < timedelta(hours=4) <= arrivals[-1].at + timedelta(hours=4) / len(gpus)
    assert all(a.lifetime == timedelta(hours=8) and a.pods == 1 for a in arrivals)
    again = trace.load(NODES, PODS, 1.0, timedelta(hours=8), seed=seed)
    assert again.workload.arrivals == arrivals


def test_a_gpu_spec_becomes_a_selector_on_the_product_name():
    tasks, _ = trace.read_tasks(PODS)
    (arrival,) = trace.inflate([tasks[2]], 1, timedelta(hours=1), seed=1)
    assert arrival.selector == (
        'device.attributes["gpu.nvidia.com"].productName in ["V100M32", "G2"]'
    )


BAD = [
    pytest.param("sn,gpu\nn0,8\n", "", "lacks columns ['model']", id="a node file without model"),
    pytest.param(
        "sn,gpu,model\nn0,8,G2\n",
        "name,gpu_milli\np,1000\n",
        "lacks columns ['num_gpu']",
        id="a pod list without num_gpu",
    ),
    pytest.param(
        "sn,gpu,model\nn0,eight,G2\n", "", "line 2 gpu: must be a whole number", id="a GPU count"
    ),
    pytest.param(
        "sn,gpu,model\nn0,8,G2\n",
        "name,num_gpu,gpu_milli,gpu_spec,creation_time\np,1,1000,,soon\n",
        "line 2 creation_time: must be a whole number",
        id="a creation time that is not seconds",
    ),
]


@pytest.mark.parametrize(("nodes", "pods", "message"), BAD)
def test_a_bad_trace_file_is_one_line_naming_the_line_and_column(tmp_path, nodes, pods, message):
    (tmp_path / "nodes.csv").write_text(nodes)
    (tmp_path / "pods.csv").write_text(pods or "name,num_gpu,gpu_milli,gpu_spec,creation_time\n")
    with pytest.raises((FleetError, ArrivalError)) as err:
        trace.load(tmp_path / "nodes.csv", tmp_path / "pods.csv", 1.3, timedelta(hours=1))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_trace_replays_with_the_same_table_and_the_node_level_row(tmp_path, capsys):
    out = tmp_path / "report"
    argv = ["--trace", str(SAMPLE), "--duration", "30m", "--out", str(out)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "4 whole-GPU tasks, 2 left out" in printed
    for policy in ("whole-node", "device-count", "histograms", "node-level", "upper bound"):
        assert f"| {policy} " in printed
    assert (out / "report.html").is_file()
