"""The agent's live tests run on a real workload cluster: the e2e's own
(`modelplane_e2e.stack.start_workload`, which its module docstring
describes), alone, one per test module, in the module's temporary folder, on the
Kubernetes version `MODELPLANE_KUBE_VERSION` names (`e2e.kube_versions`: v1.35.4,
v1.36.3 or v1.37.2; default v1.35.4). A binary of that version that is not built
fails the module's tests with the command that builds it; nothing is skipped.

`cluster` is that `modelplane_e2e.cluster.Cluster`: tests start their agents with its
`supervisor`, so those are stopped by PID with the cluster; `apiserver` is its
kube-apiserver, to kill and start again; `kube_version` is its version. A failing
test prints the tail of every process's log.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from modelplane_devtools import paths
from modelplane_e2e import kube_versions, stack
from modelplane_e2e.cluster import ApiServer, Cluster


@pytest.fixture(scope="session")
def kube_version() -> kube_versions.KubeVersion:
    try:
        return kube_versions.selected()
    except ValueError as error:
        raise pytest.fail.Exception(str(error), pytrace=False) from None


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, kube_version: kube_versions.KubeVersion
) -> Iterator[Cluster]:
    try:
        running = stack.start_workload(tmp_path_factory.mktemp("agent-live"), kube=kube_version)
    except paths.ToolMissing as missing:
        why = f"Kubernetes {kube_version.version}: {missing}"
        raise pytest.fail.Exception(why, pytrace=False) from None
    try:
        yield running
    finally:
        running.supervisor.stop()


@pytest.fixture
def apiserver(cluster: Cluster) -> ApiServer:
    return cluster.apiserver


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    running = getattr(item, "funcargs", {}).get("cluster")
    if report.failed and running is not None:
        report.sections.append(("workload cluster logs", running.supervisor.tails()))
