"""The e2e session: both clusters, Crossplane, Modelplane installed from its packages, the agent.

The stack starts once per session in `out/e2e/<time>/` and is stopped by
PID at the end; its logs stay there. A failing test's report names that
folder, shows the last lines of every server that died and the agent's log.

Modelplane is installed as the README installs it (`install`): the
Configuration package and, through its dependencies, the three functions and
provider-kubernetes, from a registry on 127.0.0.1 that an ImageConfig puts
in place of the public ones; `deploy/control-plane` applied verbatim.

The agent is installed with `kubectl apply -k deploy/agent` and run as a
process with the Deployment's arguments (`modelplane_e2e.agent`);
its heartbeats follow the suite's InferenceClusters' `spec.observation.maxAge`
(`agent.MAX_AGE`), which reaches it on every PoolObservation.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from modelplane_devtools import paths
from modelplane_e2e import agent, install, stack
from modelplane_e2e.kube import Kube

_workdirs: list = []


@pytest.fixture(scope="session")
def e2e_stack() -> Iterator[stack.Stack]:
    workdir = paths.ROOT / "out" / "e2e" / time.strftime("%Y%m%d-%H%M%S")
    workdir.mkdir(parents=True)
    _workdirs.append(workdir)
    began = time.monotonic()
    running = stack.start(workdir)
    try:
        assert running.control_plane and running.root_ca and running.workload
        running.agent = agent.start(running.workload.kube, running.supervisor, workdir)
        running.timings["agent"] = time.monotonic() - began
        running.installed = install.install(running)
        running.timings["installed"] = time.monotonic() - began
        (workdir / "timings.txt").write_text(
            "".join(f"{k}: {v:.1f}s\n" for k, v in running.timings.items())
        )
        yield running
    finally:
        for cluster in (running.control_plane, running.workload):
            if cluster:
                stack.dump(
                    cluster.kube,
                    ["managed", "composite", "objects.kubernetes.m.crossplane.io", "pods",
                     "nodes", "resourceclaims", "resourceslices", "functions",
                     "functionrevisions", "providers.pkg.crossplane.io", "providerrevisions",
                     "configurations", "configurationrevisions", "locks", "imageconfigs",
                     "managedresourcedefinitions", "events", "poolobservations.agent.modelplane.ai",
                     "replicaobservations.agent.modelplane.ai"],
                    workdir / "dump" / cluster.name,
                )  # fmt: skip
        running.supervisor.stop()


@pytest.fixture(scope="session")
def planes(e2e_stack: stack.Stack) -> tuple[Kube, Kube]:
    """The control plane's and the workload cluster's API clients."""
    assert e2e_stack.control_plane and e2e_stack.workload
    return e2e_stack.control_plane.kube, e2e_stack.workload.kube


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and _workdirs:
        lines = [f"logs and object dumps: {_workdirs[-1]}"]
        running = item.funcargs.get("e2e_stack") if hasattr(item, "funcargs") else None
        if running is not None:
            for process in running.supervisor.exited():
                lines.append(f"{process.name} exited:\n{process.tail()}")
            if running.agent is not None:
                lines.append(f"the agent's log, last lines:\n{running.agent.tail()}")
        report.sections.append(("e2e", "\n".join(lines)))
