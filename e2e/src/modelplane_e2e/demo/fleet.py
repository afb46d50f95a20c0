"""The demo's stack and its fleet: bring it up, apply the examples, wait until placed.

The imperative shell around `example`: every write is a README install
command (`install_steps`) or the harness's own (`modelplane_e2e`);
every wait is `eventually`, whose failure says what was last seen.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from modelplane_common import labels
from modelplane_devtools.processes import Supervisor

from modelplane_e2e import fleet, functions, install, install_steps, stack
from modelplane_e2e.demo import example, scraped
from modelplane_e2e.kube import Kube, condition, eventually
from modelplane_e2e.scale import bring_up as scale_bring_up
from modelplane_e2e.scale import run

# Crossplane's poll interval, as the e2e runs it.
POLL_INTERVAL = "5s"
# Generous for a loaded 2-core machine; a quiet one places everything in about a minute.
PLACED_WITHIN = 600


@dataclass(frozen=True)
class Workload:
    """A workload cluster and the example InferenceCluster it plays."""

    cluster: example.Example
    admin: Kube  # the platform's client
    provider: Kube  # provider-kubernetes' least-privilege client (its kubeconfig: the Secret)


@dataclass
class Demo:
    running: stack.Stack
    workloads: list[Workload]
    deployments: list[example.Example]

    @property
    def control(self) -> Kube:
        assert self.running.control_plane is not None
        return self.running.control_plane.kube

    def function_metrics(self) -> dict[str, list[str]]:
        """Each installed Function's metrics addresses (host:port), one per process."""
        assert self.running.installed is not None
        processes = self.running.supervisor.processes
        return {
            name: functions.metrics_addresses(processes, name)
            for name in sorted(self.running.installed.functions)
        }


def start(workdir: Path) -> Demo:
    """The stack (control plane, Modelplane installed, a workload cluster per example cluster)."""
    running = stack.Stack(workdir, Supervisor(workdir / "logs"))
    clusters = example.clusters()
    try:
        admins, providers = scale_bring_up.bring_up(running, len(clusters), POLL_INTERVAL)
    except BaseException:
        running.supervisor.stop()
        raise
    workloads = [Workload(*w) for w in zip(clusters, admins, providers, strict=True)]
    return Demo(running, workloads, example.deployments())


def add_gpu_nodes(workload: Workload) -> None:
    """The cluster's declared pools as kwok nodes with their ResourceSlices, Ready, then
    tainted as the cluster declares (its deployments tolerate that)."""
    pools = example.pools(workload.cluster.manifest)
    run.add_nodes(workload.admin, pools)
    run.await_nodes(workload.admin, {n for p in pools for n in p.node_names()})
    for taint in example.taint_arguments(workload.cluster.manifest):
        workload.admin.kubectl("taint", "nodes", "-l", fleet.POOL_LABEL, taint)


class ProcessExited(RuntimeError):
    """A server of the stack died: waiting longer cannot help (`eventually` lets this through)."""


def all_running(demo: Demo) -> None:
    exited = demo.running.supervisor.exited()
    if exited:
        raise ProcessExited(
            "\n".join(
                f"{p.name} exited ({p.popen.returncode}); log {p.log}:\n{p.tail(5)}" for p in exited
            )
        )


def _cluster_ready(demo: Demo, cluster: example.Example) -> bool:
    all_running(demo)
    ic = demo.control.get("inferencecluster", cluster.name)
    wanted = ["Ready"]
    if cluster.manifest["spec"]["observation"]["mode"] == "Observed":
        wanted.append("CapacityObserved")
    for kind in wanted:
        found = condition(ic, kind) or {}
        assert found.get("status") == "True", f"InferenceCluster {cluster.name} {kind}: {found}"
    return True


def apply_clusters(demo: Demo) -> None:
    """Install step 4 for each cluster: its kubeconfig Secret, its InferenceCluster."""
    eventually(
        lambda: install.apis_served_by_the_configuration(demo.control), "the Configuration's APIs"
    )
    install_steps.run(demo.control, install_steps.SECRETS_NAMESPACE)
    for workload in demo.workloads:
        install_steps.run(
            demo.control,
            install_steps.KUBECONFIG_SECRET,
            CLUSTER=workload.cluster.stem,
            KUBECONFIG_FILE=str(workload.provider.kubeconfig),
        )
        install_steps.run(
            demo.control, install_steps.INFERENCE_CLUSTER, CLUSTER=workload.cluster.stem
        )
    for workload in demo.workloads:
        eventually(
            partial(_cluster_ready, demo, workload.cluster),
            f"InferenceCluster {workload.cluster.name} ready",
            timeout=300,
            every=2,
        )


def apply_deployments(demo: Demo) -> None:
    """Install step 4 for each team, then its example ModelDeployments."""
    for team in sorted({d.namespace for d in demo.deployments}):
        install_steps.run(demo.control, install_steps.TEAM_NAMESPACE, TEAM=team)
        install_steps.run(demo.control, install_steps.TEAM_BINDING, TEAM=team)
    for deployment in demo.deployments:
        install_steps.run(demo.control, install_steps.MODEL_DEPLOYMENT, DEPLOYMENT=deployment.stem)


def _deployment_placed(control: Kube, deployment: example.Example) -> bool:
    """Ready, with every replica ready; each of its replicas on a cluster, pods scheduled."""
    live = control.get("modeldeployment", deployment.name, deployment.namespace) or {}
    ready, replicas = condition(live, "Ready") or {}, deployment.manifest["spec"]["replicas"]
    counted = (live.get("status") or {}).get("ready")
    assert ready.get("status") == "True" and counted == f"{replicas}/{replicas}", (
        f"ModelDeployment {deployment.namespace}/{deployment.name}: Ready {ready}, ready {counted}"
    )
    selector = f"{labels.DEPLOYMENT}={deployment.name}"
    mine = control.list("modelreplicas.modelplane.ai", deployment.namespace, selector)
    assert len(mine) == replicas, f"{deployment.name}: {len(mine)} ModelReplicas of {replicas}"
    for replica in mine:
        scheduled = condition(replica, "PodsScheduled") or {}
        assert replica["spec"].get("clusterName") and scheduled.get("status") == "True", (
            f"ModelReplica {replica['metadata']['name']}: cluster "
            f"{replica['spec'].get('clusterName')!r}, PodsScheduled {scheduled}"
        )
    return True


def _bound_by_the_scheduler(pod: dict) -> bool:
    scheduled = condition(pod, "PodScheduled") or {}
    return bool(pod["spec"].get("nodeName")) and scheduled.get("status") == "True"


def _pods_bound(demo: Demo) -> bool:
    """Exactly the pods the deployments ask for, every one bound to a node."""
    teams = sorted({d.namespace for d in demo.deployments})
    pods = [p for w in demo.workloads for team in teams for p in w.admin.list("pods", team)]
    wanted = sum(example.pods_wanted(d.manifest) for d in demo.deployments)
    unbound = [p["metadata"]["name"] for p in pods if not _bound_by_the_scheduler(p)]
    assert len(pods) == wanted and not unbound, f"{len(pods)} pods of {wanted}; unbound {unbound}"
    return True


def placed(demo: Demo) -> bool:
    """Every example deployment placed and Ready, every pod bound (raises what is not yet)."""
    all_running(demo)
    for deployment in demo.deployments:
        _deployment_placed(demo.control, deployment)
    return _pods_bound(demo)


def placements_counted(demo: Demo) -> Counter[tuple[str, str]]:
    """What every function process's /metrics counted as placements, by (cluster, change);
    raises what is short of the replicas the control plane holds on each cluster."""
    addresses = [a for found in demo.function_metrics().values() for a in found]
    assert addresses, "no function serves metrics"
    counted = scraped.placements(scraped.scrape(a) for a in addresses)
    teams = sorted({d.namespace for d in demo.deployments})
    replicas = [r for team in teams for r in demo.control.list("modelreplicas.modelplane.ai", team)]
    short = scraped.uncounted(counted, [r["spec"].get("clusterName", "") for r in replicas])
    assert not short, f"{scraped.PLACEMENTS} short of the replicas placed: {'; '.join(short)}"
    return counted


def bring_up(workdir: Path) -> Demo:
    """Start the stack, build each cluster's nodes, apply the examples, wait until placed.
    On any failure everything started is stopped (by PID) before the error propagates."""
    began = time.monotonic()
    demo = start(workdir)
    try:
        for workload in demo.workloads:
            add_gpu_nodes(workload)
        apply_clusters(demo)
        apply_deployments(demo)
        eventually(
            partial(placed, demo), "every example deployment placed", timeout=PLACED_WITHIN, every=3
        )
    except BaseException:
        demo.running.supervisor.stop()
        raise
    demo.running.timings["placed"] = time.monotonic() - began
    return demo
