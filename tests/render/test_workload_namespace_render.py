"""The workload Namespace, one Object per (deployment, cluster), through the real CLI.

design/tenancy.md, "Workload namespaces": the ModelDeployment composes the
namespace its replicas run in, once on each cluster it has replicas on,
with the cluster's Pod Security level and no Delete policy; a cluster that
reserves the namespace gets none; a ModelReplica composes none, and drops
the one an earlier release composed per replica.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

from modelplane_common import labels
from modelplane_common.timeutil import format_time
from modelplane_devtools import render
from modelplane_testkit import deployment_builders as t
from modelplane_testkit.rendered import by_kind, composite, condition

DEPLOYMENT = render.ROOT / "apis/modeldeployment/composition.yaml"
REPLICA = render.ROOT / "apis/modelreplica/composition.yaml"
RESOURCE_NAME = "crossplane.io/composition-resource-name"
PSA = "pod-security.kubernetes.io/"


def cluster(name: str, nodes: int, pod_security: str | None = None, **fields) -> dict:
    """`name`/h100: `nodes` free 8-GPU nodes, observed ten seconds ago, its agent present."""
    body = t.cluster(
        name,
        [t.pool("h100", nodes, histogram=[({"gpu": 8}, nodes)], observed_at="__NOW-10s__")],
        **fields,
    )
    if pod_security is not None:
        body["spec"]["workloads"] = {"podSecurity": pod_security}
    # What compose-inference-cluster publishes once the cluster is up.
    body["status"]["providerConfigRef"] = {"name": f"{name}-provider"}
    body["status"]["agent"]["present"] = True
    return body


def deployment(replicas: int) -> dict:
    return t.deployment("llm", "team-a", replicas=replicas, engines=[t.standalone(gpus=8)])


def namespace_objects(rendered: list[dict]) -> dict[str, dict]:
    return {
        o["metadata"]["annotations"][RESOURCE_NAME]: o
        for o in by_kind(rendered, "Object")
        if o["spec"]["forProvider"]["manifest"]["kind"] == "Namespace"
    }


def test_seven_replicas_on_two_clusters_compose_two_namespace_objects(functions):
    fleet = [cluster("east", 4, pod_security="restricted"), cluster("west", 4)]
    rendered = functions.render(deployment(7), DEPLOYMENT, required=[*fleet, t.namespace("team-a")])
    replicas = by_kind(rendered, "ModelReplica")
    assert sorted({r["spec"]["clusterName"] for r in replicas}) == ["east", "west"]
    assert len(replicas) == 7
    found = namespace_objects(rendered)
    assert sorted(found) == ["namespace/east", "namespace/west"]
    for name, level in (("east", "restricted"), ("west", "baseline")):
        obj = found[f"namespace/{name}"]
        assert obj["metadata"]["namespace"] == "team-a"
        assert obj["spec"]["providerConfigRef"]["name"] == f"{name}-provider"
        assert "Delete" not in obj["spec"]["managementPolicies"]
        manifest = obj["spec"]["forProvider"]["manifest"]
        assert manifest["metadata"]["name"] == "team-a"
        assert manifest["metadata"]["labels"][PSA + "enforce"] == level
        assert manifest["metadata"]["labels"][PSA + "warn"] == level


def _observed(replica: dict) -> dict:
    """The replica as Crossplane observes it a minute after its placement, admitted (its
    deployment's controller reference kept: a replica without one is orphaned)."""
    body = copy.deepcopy(replica)
    placed = format_time(datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1))
    body["metadata"]["annotations"][labels.PLACED_AT] = placed
    body["status"] = {
        "admission": {"placedAt": placed, "verdict": "Admitted"},
        "conditions": [
            {"type": "PodsScheduled", "status": "True", "reason": "AllPodsScheduled"},
            {"type": "Ready", "status": "True", "reason": "Available"},
        ],
        "scheduledAt": placed,
    }
    return body


def without_owner(composed: dict) -> dict:
    """A composed resource as a deployment's render observes it (Crossplane's own
    reference to it left out, as the other render tests do)."""
    body = copy.deepcopy(composed)
    body["metadata"].pop("ownerReferences", None)
    return body


def test_a_cluster_that_reserves_the_namespace_keeps_the_replica_and_gets_no_namespace(
    functions,
):
    placed = functions.render(deployment(1), DEPLOYMENT, required=[cluster("east", 2)])
    (replica,) = by_kind(placed, "ModelReplica")
    namespace_object = without_owner(namespace_objects(placed)["namespace/east"])

    reserving = cluster("east", 2, reserved_namespaces=["team-a"])
    rendered = functions.render(
        deployment(1),
        DEPLOYMENT,
        observed=[without_owner(_observed(replica)), namespace_object],
        required=[reserving, t.namespace("team-a")],
    )
    (kept,) = by_kind(rendered, "ModelReplica")
    assert kept["spec"]["clusterName"] == "east"
    assert namespace_objects(rendered) == {}


def test_a_replica_composes_no_namespace_and_drops_the_one_an_earlier_release_composed(
    functions,
):
    fleet = [cluster("east", 2)]
    xr = deployment(1)
    (replica,) = by_kind(functions.render(xr, DEPLOYMENT, required=fleet), "ModelReplica")
    replica = _observed(replica)
    earlier = {
        "apiVersion": labels.OBJECT_API_VERSION,
        "kind": "Object",
        "metadata": {
            "name": "llm-0-east-namespace-123456",
            "namespace": "team-a",
            "annotations": {RESOURCE_NAME: "east/namespace"},
        },
        "spec": {
            "managementPolicies": ["Observe", "Create", "Update", "LateInitialize"],
            "providerConfigRef": {"kind": "ClusterProviderConfig", "name": "east-provider"},
            "forProvider": {"manifest": {"apiVersion": "v1", "kind": "Namespace"}},
        },
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]},
    }
    rendered = functions.render(replica, REPLICA, observed=[earlier], required=[*fleet, xr])
    assert condition(composite(rendered), "WorkloadsComposed")["status"] == "True"
    names = sorted(o["metadata"]["annotations"][RESOURCE_NAME] for o in by_kind(rendered, "Object"))
    assert "east/namespace" not in names
    assert "east/serve/workload" in names
    assert namespace_objects(rendered) == {}
