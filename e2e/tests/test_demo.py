"""The demo's fleet read from the examples, and how `make demo-down` finds what to stop."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from modelplane_devtools.processes import Supervisor
from modelplane_e2e.demo import example, fleet, session
from modelplane_e2e.stack import Stack

EAST, EDGE = example.clusters()
BY_STEM = {d.stem: d for d in example.deployments()}


def test_the_demo_plays_two_observed_example_clusters_whose_replicas_can_read_ready():
    modes = {c.name: c.manifest["spec"]["observation"]["mode"] for c in (EAST, EDGE)}
    assert modes == {"gpu-east": "Observed", "gpu-edge": "Observed"}


def test_each_declared_pool_becomes_that_many_nodes_with_its_devices_as_a_driver_names_them():
    h100, l40s = example.pools(EAST.manifest)
    assert (h100.name, h100.nodes, l40s.name, l40s.nodes) == ("h100", 16, "l40s", 8)
    (gpu,) = h100.devices
    assert (gpu.driver, gpu.count) == ("gpu.nvidia.com", 8)
    assert gpu.attributes["architecture"] == {"string": "Hopper"}
    assert gpu.capacity == {"memory": {"value": "80Gi"}}
    assert [d.name for d in l40s.devices] == ["gpu", "nic"]
    assert l40s.devices[1].attributes == {"linkSpeedGbps": {"int": 200}}


def test_a_clusters_fleet_taints_become_taint_arguments_and_none_give_none():
    assert example.taint_arguments(EAST.manifest) == [
        "modelplane.ai/dedicated=inference:NoSchedule"
    ]
    assert example.taint_arguments(EDGE.manifest) == []


@pytest.mark.parametrize(
    ("stem", "pods"),
    [
        ("eight-gpu-single-node", 2),  # 2 replicas of one Standalone pod
        ("leader-worker-gang", 3),  # 1 replica: a leader and 2 worker nodes
        ("prefill-decode", 4),  # 2 replicas of two Standalone engines
        ("single-gpu-throughput", 6),  # 6 replicas of one pod
    ],
    ids=["one pod per standalone replica", "a gang is its leader and each worker node",
         "each engine is a pod", "many one-pod replicas"],
)  # fmt: skip
def test_pods_wanted_counts_every_member_pod_of_every_replica(stem, pods):
    assert example.pods_wanted(BY_STEM[stem].manifest) == pods


def test_the_unplaceable_example_is_not_in_the_demo():
    assert "larger-than-any-node" not in BY_STEM
    assert len(BY_STEM) == 4


def test_leftovers_are_the_listed_processes_alive_and_started_since_the_run_began(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    try:
        pids = tmp_path / "pids"
        pids.write_text(f"{child.pid} sleeper\n{gone.pid} gone\n1 init\n")
        assert session.leftovers(pids, since=time.time() - 30) == [child.pid]
        # A PID listed by a run that began after the process did is someone else's now.
        assert session.leftovers(pids, since=time.time() + 60) == []
    finally:
        child.kill()
        child.wait()


def test_a_runs_folder_name_is_when_it_began(tmp_path):
    folder = tmp_path / "20261206-041950"
    expected = time.mktime((2026, 12, 6, 4, 19, 50, 0, 0, -1))
    assert session.began(folder) == expected


def test_a_server_that_died_stops_the_wait_at_once_naming_it_and_its_log(tmp_path):
    supervisor = Supervisor(tmp_path / "logs")
    demo = fleet.Demo(Stack(tmp_path, supervisor), workloads=[], deployments=[])
    fleet.all_running(demo)  # nothing started, nothing exited
    died = supervisor.start("registry", [sys.executable, "-c", "print('bind: in use'); exit(3)"])
    died.popen.wait()
    with pytest.raises(fleet.ProcessExited, match=r"registry exited \(3\)(.|\n)*bind: in use"):
        fleet.all_running(demo)
    assert not issubclass(fleet.ProcessExited, AssertionError)  # `eventually` does not retry it
