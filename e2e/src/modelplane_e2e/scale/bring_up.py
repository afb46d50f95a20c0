"""The stack of a fleet-scale run: the e2e control plane and several workload clusters.

The control plane as the e2e suite runs it (Crossplane core, the registry,
Modelplane installed from its packages: MODELPLANE_E2E_PACKAGES, as `make e2e`
sets it) and `count` workload clusters, each with kube-scheduler, kwok, the
LeaderWorkerSet controller and the real agent. The caller owns the Stack and
stops its Supervisor, so every process is stopped by its PID whatever fails.
"""

from __future__ import annotations

from modelplane_devtools import registry

from modelplane_e2e import agent, binaries, install, kwok, lws, pki, stack
from modelplane_e2e.cluster import Cluster
from modelplane_e2e.kube import Kube


def workload(running: stack.Stack, index: int, credentials: pki.ClusterCredentials) -> Cluster:
    name = f"workload-{index}"
    cluster = stack.start_cluster(
        running.supervisor, running.workdir, name, credentials, stack.WORKLOAD, node_lifecycle=True
    )
    kwok.start(
        running.supervisor,
        cluster.kubeconfig,
        running.workdir,
        binary=binaries.binary("kwok"),
        source=binaries.module_dir("workloads", kwok.MODULE),
        name=f"{name}-kwok",
    )
    lws.start(
        cluster,
        running.workdir,
        credentials.ca,
        binary=binaries.binary("lws"),
        source=binaries.module_dir("workloads", lws.MODULE),
        name=f"{name}-lws",
    )
    agent.start(cluster.kube, running.supervisor, running.workdir, name=f"{name}-modelplane-agent")
    return cluster


def bring_up(running: stack.Stack, count: int, poll_interval: str) -> tuple[list[Kube], list[Kube]]:
    """Start everything on `running` and install Modelplane; returns each workload
    cluster's admin client and provider-kubernetes' client of it, in the same order."""
    stack.check_ports_free()
    credentials = pki.cluster_credentials(running.workdir / "pki", "e2e-ca")
    running.control_plane = stack.start_cluster(
        running.supervisor, running.workdir, "control-plane", credentials, stack.CONTROL_PLANE
    )
    clusters = [workload(running, i, credentials) for i in range(count)]
    running.workload = clusters[0]
    running.registry = registry.start(running.supervisor)
    running.root_ca = stack.start_crossplane(
        running, running.control_plane, poll_interval=poll_interval
    )
    running.installed = install.install(running)
    providers = [stack.provider_identity(c, credentials) for c in clusters]
    return [c.kube for c in clusters], providers
