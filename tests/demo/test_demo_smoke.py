"""`make demo-smoke`: the demo comes up from the packages, places every example, and stops.

What `make demo` shows, checked end to end in one run (`session.smoke`):
Modelplane installed by the README's commands, the example InferenceClusters
gpu-east and gpu-edge (each Observed by its agent) Ready on two workload clusters of
kwok nodes, every placeable example ModelDeployment Ready with each replica
on a cluster and exactly the pods it asks for bound by kube-scheduler
(`fleet.placed`, which raises what is not yet so), and each placement
counted in the functions' Prometheus metrics, read by scraping every function
process's /metrics (`fleet.placements_counted`). Then every process is
stopped by its PID. A missing binary is an error naming `make e2e-tools`,
never a skip. Not part of `make e2e`: this stack needs the ports (9443) the
e2e session's holds; `make demo-smoke` runs it on its own.
"""

from __future__ import annotations

import time

import pytest
from modelplane_e2e.demo import session

pytestmark = pytest.mark.e2e


def test_the_demo_places_every_example_deployment_counts_it_in_metrics_then_stops_everything():
    workdir = session.new_run()
    began = time.monotonic()
    smoked = session.smoke(workdir)
    demo = smoked.demo
    took = time.monotonic() - began
    (workdir / "timings.txt").write_text(
        "".join(f"{k}: {v:.1f}s\n" for k, v in demo.running.timings.items())
        + f"smoke: {took:.1f}s\n"
    )
    assert not demo.running.supervisor.processes, "processes left running"
    assert session.leftovers(workdir / "logs" / "pids", session.began(workdir)) == []
    assert {w.cluster.name for w in demo.workloads} == {"gpu-east", "gpu-edge"}
    placed = sum(n for (_, change), n in smoked.placements.items() if change == "Placed")
    assert placed >= sum(d.manifest["spec"]["replicas"] for d in demo.deployments)
