"""The agent's live tests run on a real workload cluster: the e2e's own
(`modelplane_devtools.e2e.stack.start_workload`, which its module docstring
describes), alone, one per test module, in the module's temporary folder.

`cluster` is that `stack.Cluster`: tests start their agents with its
`supervisor`, so those are stopped by PID with the cluster; `apiserver` is its
kube-apiserver, to kill and start again. A failing test prints the tail of
every process's log.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from modelplane_devtools.e2e import stack


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[stack.Cluster]:
    running = stack.start_workload(tmp_path_factory.mktemp("agent-live"))
    try:
        yield running
    finally:
        running.supervisor.stop()


@pytest.fixture
def apiserver(cluster: stack.Cluster) -> stack.ApiServer:
    return cluster.apiserver


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    running = getattr(item, "funcargs", {}).get("cluster")
    if report.failed and running is not None:
        report.sections.append(("workload cluster logs", running.supervisor.tails()))
