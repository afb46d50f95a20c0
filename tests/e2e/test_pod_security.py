"""Pod Security on a workload cluster, and no phantom reservations (design/tenancy.md).

One pool of one 8-GPU node. Deployment `privileged` asks for the whole node
with a privileged container; the deployment composes its workload namespace
(one Object for the cluster; the replica composes none) labelled with the
cluster's Pod Security level (the default, baseline), so
the workload cluster's API server refuses its pods. The refusal reaches the
ModelReplica's and the ModelDeployment's PodsCreated conditions, and while
the replica waits within its grace it is charged: deployment `fits`, which
asks for the same node, finds no room. Past the grace the replica holds
nothing, so `fits` is placed on the node and its pod runs (kwok runs it).
provider-kubernetes applies everything as the least-privilege user of
deploy/workload-cluster (`stack.provider_identity`).
"""

from __future__ import annotations

import pytest
from modelplane_e2e import agent, fleet, install, manifests
from modelplane_e2e.kube import Kube, condition, eventually
from modelplane_e2e.stack import Stack

pytestmark = pytest.mark.e2e

CLUSTER = "gpu-psa"
# Not the story's namespaces: this module may run before it in one session.
SECRETS = "psa-system"
TEAM = "team-psa"
GPU = fleet.H100_80GB
POOL = fleet.Pool("psa", 1, (GPU,))
GRACE = "150s"
REPLICA = "modelplane.ai/replica"


def deployment(name: str, *, privileged: bool) -> dict:
    container: dict = {"name": "engine", "image": "example.invalid/engine:v1"}
    if privileged:
        container["securityContext"] = {"privileged": True}
    return manifests.model_deployment(
        name,
        namespace=TEAM,
        engines=[manifests.standalone_engine(container=container, gpus=8)],
        cluster_labels={"modelplane.ai/e2e": "psa"},
        healing={"missingPodsGracePeriod": GRACE},
    )


def set_up_the_fleet(e2e_stack: Stack, control: Kube, workload: Kube) -> None:
    """The platform's part: the node, the cluster's kubeconfig Secret holding
    provider-kubernetes' least-privilege identity. No tenant namespace on the
    workload cluster: the replicas compose it."""
    assert e2e_stack.provider is not None
    fleet.add_nodes(workload, [POOL])
    fleet.await_ready(workload, [POOL])
    control.apply([manifests.namespace(SECRETS), manifests.namespace(TEAM)])
    control.apply(fleet.kubeconfig_secret(CLUSTER, SECRETS, e2e_stack.provider))
    eventually(
        lambda: install.apis_served_by_the_configuration(control), "the Configuration's APIs"
    )
    control.apply(
        fleet.inference_cluster(
            CLUSTER, [POOL], labels={"modelplane.ai/e2e": "psa"}, secrets=SECRETS,
            max_age=agent.MAX_AGE,
        )
    )  # fmt: skip


def _free_node_published(control: Kube) -> bool:
    status = (control.get("inferencecluster", CLUSTER) or {}).get("status") or {}
    pools = {p["name"]: p for p in status.get("gpuPools") or []}
    buckets = pools.get(POOL.name, {}).get("nodesByFreeDevices")
    assert buckets, f"no histogram yet for {POOL.name}: {sorted(pools)}"
    assert any(b["free"].get("gpu") == GPU.count for b in buckets), buckets
    return True


def _condition(control: Kube, kind: str, name: str, type_: str) -> dict:
    found = condition(control.get(kind, name, TEAM), type_)
    assert found, f"{kind} {name} has no {type_} condition"
    return found


def _refused_by_pod_security(message: str) -> None:
    assert "violates PodSecurity" in message and "privileged" in message, message


def test_a_privileged_template_is_refused_and_its_replica_stops_holding_the_node(e2e_stack, planes):
    control, workload = planes
    set_up_the_fleet(e2e_stack, control, workload)
    eventually(lambda: _free_node_published(control), "the free node published", timeout=240)
    try:
        control.apply(deployment("privileged", privileged=True))
        check_the_refusal_and_the_release(control, workload)
    finally:
        leave_nothing_behind(control)


def _labelled_namespace(workload: Kube) -> dict:
    labels = ((workload.get("namespace", TEAM) or {}).get("metadata") or {}).get("labels") or {}
    assert labels.get("pod-security.kubernetes.io/enforce") == "baseline", labels
    return labels


def _one_namespace_object_by_the_deployment(control: Kube) -> bool:
    """The workload Namespace's Objects on the control plane: one, composed by the
    deployment (Crossplane labels a composed resource with its composite), none by its
    replica (design/tenancy.md, "Pod Security")."""
    objects = control.list("objects.kubernetes.m.crossplane.io", TEAM)
    composers = [
        (o["metadata"].get("labels") or {}).get("crossplane.io/composite")
        for o in objects
        if o["spec"]["forProvider"]["manifest"].get("kind") == "Namespace"
    ]
    assert composers == ["privileged"], composers
    return True


def _pods_created_false(control: Kube, reason: str) -> str:
    created = _condition(control, "modelreplica", "privileged-0", "PodsCreated")
    assert (created["status"], created["reason"]) == ("False", reason), created
    _refused_by_pod_security(created["message"])
    return created["message"]


def _deployment_relays_the_refusal(control: Kube) -> bool:
    relayed = _condition(control, "modeldeployment", "privileged", "PodsCreated")
    assert relayed["status"] == "False", relayed
    _refused_by_pod_security(relayed["message"])
    return True


def _fits_runs(control: Kube, workload: Kube) -> bool:
    scheduled = _condition(control, "modeldeployment", "fits", "ReplicasScheduled")
    assert scheduled["reason"] == "AllReplicasScheduled", scheduled
    pods = workload.list("pods", TEAM)
    mine = [p for p in pods if (p["metadata"].get("labels") or {}).get(REPLICA) == "fits-0"]
    assert mine and all(p.get("spec", {}).get("nodeName") for p in mine), pods
    return True


def check_the_refusal_and_the_release(control: Kube, workload: Kube) -> None:
    # The deployment composed its namespace, with the cluster's (default) level.
    eventually(lambda: _labelled_namespace(workload), "namespace team-psa labelled baseline")
    eventually(
        lambda: _one_namespace_object_by_the_deployment(control),
        "one Namespace Object, composed by deployment privileged",
    )
    # The API server refused the pods; the reason reaches the replica within the grace...
    eventually(
        lambda: _pods_created_false(control, "Creating"),
        "privileged-0 PodsCreated False/Creating",
        timeout=120,
    )
    # ...and the deployment, at its next reconcile (the replica's status change wakes
    # it, but that may come after this read: wait for it, never read it once).
    eventually(
        lambda: _deployment_relays_the_refusal(control),
        "deployment privileged relays PodsCreated False naming PodSecurity",
        timeout=60,
    )

    # Within the grace the refused replica is charged: the node is not free for another.
    control.apply(deployment("fits", privileged=False))
    eventually(
        lambda: (
            _condition(control, "modeldeployment", "fits", "ReplicasScheduled")["reason"]
            == "InsufficientCapacity"
        ),
        "fits finds no room while privileged-0 is charged",
        timeout=60,
    )
    assert _condition(control, "modelreplica", "privileged-0", "PodsCreated")["reason"] == (
        "Creating"
    ), "the grace ended before fits was judged: lengthen GRACE"

    # Past the grace it holds nothing, says why, and fits takes the node.
    eventually(
        lambda: _pods_created_false(control, "NotCreated"),
        "privileged-0 PodsCreated NotCreated",
        timeout=240,
    )
    eventually(
        lambda: (
            _condition(control, "modeldeployment", "privileged", "PodsCreated")["reason"]
            == "NotCreated"
        ),
        "privileged's PodsCreated False/NotCreated",
        timeout=120,
    )
    given_up = _condition(control, "modeldeployment", "privileged", "PodsCreated")
    assert given_up["message"].startswith("replica privileged-0 on gpu-psa: its pods were not")
    _refused_by_pod_security(given_up["message"])
    failed = (control.get("modeldeployment", "privileged", TEAM) or {})["status"]
    assert [f["pool"] for f in failed["failedPlacements"]] == [POOL.name]
    eventually(lambda: _fits_runs(control, workload), "fits placed and running", timeout=240)


def leave_nothing_behind(control: Kube) -> None:
    """The deployments, then the cluster, removed. The workload namespace stays: nothing
    deletes it."""
    fleet.remove_deployments_then_cluster(control, CLUSTER, TEAM)


def test_the_workload_namespace_outlives_its_replicas(planes):
    _, workload = planes
    assert _labelled_namespace(workload)
