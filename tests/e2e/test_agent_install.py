"""An InferenceCluster that installs its own agent, on the real control plane and workload cluster.

`spec.observation.agent.install: true` makes compose-inference-cluster
compose deploy/agent's manifests as provider-kubernetes Objects; here
provider-kubernetes must apply them on the workload cluster, and the agent
run with exactly the arguments of the Deployment it applied must observe the
cluster's pool. The session already installed the agent with `kubectl apply
-k deploy/agent` (the same objects), so the cluster names an image of its
own: finding that image in the workload cluster's Deployment proves the
composed Object was applied. No kubelet runs, so the agent runs as a process
(`modelplane_e2e.agent`) in place of the Deployment's pod: the
session's agent is stopped meanwhile (one writer per observation) and
restarted afterwards.

Self-contained and idempotent like the burst module: its own Secret
namespace, cluster and pool, all removed at the end, after checking that
deleting the cluster leaves the agent installed (the install Objects never
delete).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from modelplane_e2e import agent, fleet, install, manifests
from modelplane_e2e.kube import Kube, condition, eventually
from modelplane_e2e.stack import Stack

pytestmark = pytest.mark.e2e

CLUSTER = "gpu-self-installed"
# Not the story's or the burst's namespaces: modules may run in any order in one session.
SECRETS = "self-installed-system"
IMAGE = "registry.example.test/modelplane-agent:e2e"
POOL = fleet.Pool(
    "self-installed",
    2,
    (fleet.DeviceKind("gpu", "gpu.nvidia.com", 8, {"productName": {"string": "NVIDIA-A100"}}, {}),),
)
OBJECTS = "objects.kubernetes.m.crossplane.io"
DEPLOYMENT_OBJECT = f"{CLUSTER}-agent-deployment-modelplane-agent"
# What deploy/agent installs, as the workload cluster must hold it.
INSTALLED = [
    ("customresourcedefinition", "poolobservations.agent.modelplane.ai", None),
    ("customresourcedefinition", "replicaobservations.agent.modelplane.ai", None),
    ("namespace", agent.NAMESPACE, None),
    ("serviceaccount", agent.SERVICE_ACCOUNT, agent.NAMESPACE),
    ("clusterrole", "modelplane-agent", None),
    ("clusterrolebinding", "modelplane-agent", None),
    ("deployment", agent.DEPLOYMENT, agent.NAMESPACE),
]


def inference_cluster() -> dict:
    cluster = fleet.inference_cluster(
        CLUSTER, [POOL], labels={"modelplane.ai/e2e": "agent-install"}, secrets=SECRETS,
        max_age=agent.MAX_AGE,
    )  # fmt: skip
    cluster["spec"]["observation"]["agent"] = {"install": True, "image": IMAGE}
    return cluster


def set_up(control: Kube, workload: Kube, provider: Kube) -> None:
    """The platform's part, idempotent: the pool's nodes, the Secret, the APIs, the cluster."""
    fleet.add_nodes(workload, [POOL])
    fleet.await_ready(workload, [POOL])
    control.apply(manifests.namespace(SECRETS))
    control.apply(fleet.kubeconfig_secret(CLUSTER, SECRETS, provider))
    # The APIs are the Configuration's, installed by the session.
    eventually(
        lambda: install.apis_served_by_the_configuration(control), "the Configuration's APIs"
    )
    control.apply(inference_cluster())


def _holds(obj: dict | None, kind: str) -> dict:
    c = condition(obj, kind)
    assert c and c["status"] == "True", f"{kind}: {c}"
    assert obj is not None
    return obj


def tear_down(control: Kube, workload: Kube) -> None:
    """The cluster, its nodes and slices go; the session's install is re-applied as it was."""
    control.delete("inferencecluster", CLUSTER)
    eventually(
        lambda: control.get("inferencecluster", CLUSTER) is None,
        f"InferenceCluster {CLUSTER} gone",
        timeout=180,
    )
    for node in POOL.node_names():
        for kind in POOL.devices:
            workload.delete("resourceslice", f"{node}-{kind.name}")
        workload.delete("node", node)
    workload.kubectl("apply", "-k", str(agent.KUSTOMIZATION))


@pytest.fixture(scope="module")
def cluster(planes: tuple[Kube, Kube], e2e_stack: Stack) -> Iterator[tuple[Kube, Kube]]:
    control, workload = planes
    assert e2e_stack.provider is not None
    set_up(control, workload, e2e_stack.provider)
    try:
        yield control, workload
    finally:
        tear_down(control, workload)


def _composed_deployment(control: Kube) -> dict:
    obj = control.get(OBJECTS, DEPLOYMENT_OBJECT, SECRETS)
    assert obj is not None, f"no Object {SECRETS}/{DEPLOYMENT_OBJECT}"
    return obj["spec"]["forProvider"]["manifest"]


def _container(deployment: dict) -> dict:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_a_the_install_objects_are_applied_on_the_workload_cluster(cluster):
    control, workload = cluster
    xr = eventually(
        lambda: _holds(control.get("inferencecluster", CLUSTER), "AgentInstalled"),
        "AgentInstalled True: every install Object applied",
        timeout=180,
    )
    assert condition(xr, "AgentInstalled")["message"] == f"image {IMAGE}"
    for kind, name, where in INSTALLED:
        assert workload.get(kind, name, where) is not None, f"{kind} {name} on the workload cluster"
    remote = eventually(
        lambda: (
            (d := workload.get("deployment", agent.DEPLOYMENT, agent.NAMESPACE))
            and _container(d)["image"] == IMAGE
            and d
        ),
        f"the workload cluster's agent Deployment running {IMAGE}",
    )
    composed = _composed_deployment(control)
    assert _container(remote)["args"] == _container(composed)["args"]
    assert remote["spec"]["template"]["spec"]["serviceAccountName"] == agent.SERVICE_ACCOUNT


def test_b_the_agent_with_the_composed_arguments_observes_the_clusters_pool(
    cluster, e2e_stack: Stack
):
    control, workload = cluster
    args = tuple(_container(_composed_deployment(control))["args"])
    session_agent = e2e_stack.agent
    assert session_agent is not None
    workdir = e2e_stack.workdir / "agent-install"
    workdir.mkdir(exist_ok=True)
    session_agent.stop()
    installed = agent.Agent(
        e2e_stack.supervisor, agent.Installed(agent.identity(workload, workdir), args)
    )
    try:
        installed.start()

        def observed() -> dict:
            status = (control.get("inferencecluster", CLUSTER) or {}).get("status") or {}
            pools = {p["name"]: p for p in status.get("gpuPools") or []}
            assert "nodesByFreeDevices" in pools.get(POOL.name, {}), f"gpuPools: {pools}"
            return pools[POOL.name]

        pool = eventually(observed, f"pool {POOL.name} observed", timeout=120)
        assert pool["nodesByFreeDevices"] == [{"free": {"gpu": 8}, "nodes": 2}]
        assert pool["observedNodes"] == POOL.nodes
        _holds(control.get("inferencecluster", CLUSTER), "CapacityObserved")
    finally:
        if installed.process is not None:
            installed.stop()
        session_agent.start()


def test_c_deleting_the_cluster_leaves_the_agent_installed(cluster):
    control, workload = cluster
    control.delete("inferencecluster", CLUSTER)
    eventually(
        lambda: not control.list(OBJECTS, SECRETS),
        f"the cluster's Objects in {SECRETS} gone",
        timeout=180,
    )
    for kind, name, where in INSTALLED:
        assert workload.get(kind, name, where) is not None, f"{kind} {name} was deleted"
