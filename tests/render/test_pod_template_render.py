"""Pod templates that cannot run, or would leave the cluster's scheduler, through the real CLI.

A ModelDeployment whose template sets `nodeName` or a `schedulerName`
other than default-scheduler, takes devices outside `nodeSelector.devices`
(an extra `resourceClaims` entry, an extended resource in a container's or
initContainer's limits or requests), names a ServiceAccount other than
`default`, carries oversized labels, lives in a reserved namespace, or is
no pod template, is refused with ReplicasScheduled False/InvalidDeployment
naming the field and the value, and no ModelReplica is placed (so nothing
is charged). A ModelReplica written with such a template some other way
composes no workload. A replica whose cluster does not approve its
template's priorityClassName, or reserves its namespace, is not admitted
and composes no workload (nor, for the namespace, the Namespace). The rules
are `modelplane_common.pod_template` and
`modelplane_common.workload_namespace` (design/tenancy.md).
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from modelplane_common import labels
from modelplane_common.timeutil import format_time
from modelplane_devtools import render
from modelplane_testkit.rendered import by_kind, composite, condition, results

ROOT = render.ROOT
FLEET = [ROOT / "examples/fleet/clusters.yaml", ROOT / "examples/fleet/replicas.yaml"]
DEPLOYMENT = ROOT / "apis/modeldeployment/composition.yaml"
REPLICA = ROOT / "apis/modelreplica/composition.yaml"
MEMBER = "spec.template.spec.engines[0].members[0].template"


def _deployment() -> dict:
    return yaml.safe_load((ROOT / "examples/deployments/single-gpu-throughput.yaml").read_text())


def _with_pod_spec(xr: dict, change: dict) -> dict:
    xr = copy.deepcopy(xr)
    member = xr["spec"]["template"]["spec"]["engines"][0]["members"][0]
    member["template"]["spec"].update(change)
    return xr


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(
            {"nodeName": "gpu-east-h100-0"},
            f"{MEMBER}.spec.nodeName: is not allowed: it binds pods without the cluster's "
            "scheduler, outside the pool they were placed and charged on "
            '(got "gpu-east-h100-0")',
            id="nodeName is refused, naming the node",
        ),
        pytest.param(
            {"schedulerName": "my-scheduler"},
            f"{MEMBER}.spec.schedulerName: must be default-scheduler or unset: another "
            'scheduler would place pods the fleet scheduler did not charge (got "my-scheduler")',
            id="another schedulerName is refused, naming it",
        ),
        pytest.param(
            {"containers": []},
            f"{MEMBER} has no containers",
            id="a template without containers is refused",
        ),
        pytest.param(
            {
                "containers": [{"name": "vllm", "image": "vllm"}],
                "resourceClaims": [{"name": "more", "resourceClaimTemplateName": "mine"}],
            },
            f"{MEMBER}.spec.resourceClaims[0]: is not allowed: devices come only from the "
            "member's nodeSelector.devices, the claim the fleet scheduler charges "
            '(got "more")',
            id="an extra resourceClaims entry is refused, naming it",
        ),
        pytest.param(
            {
                "containers": [
                    {
                        "name": "vllm",
                        "image": "vllm",
                        "resources": {"limits": {"nvidia.com/gpu": 8}},
                    }
                ]
            },
            f'{MEMBER}.spec.containers[0].resources.limits["nvidia.com/gpu"]: is not allowed: '
            "only cpu, memory, ephemeral-storage and hugepages-* may be set; devices come "
            'only from the member\'s nodeSelector.devices (got "nvidia.com/gpu")',
            id="an extended-resource limit in a container is refused",
        ),
        pytest.param(
            {
                "containers": [{"name": "vllm", "image": "vllm"}],
                "initContainers": [
                    {"name": "warm", "image": "x", "resources": {"requests": {"nvidia.com/gpu": 1}}}
                ],
            },
            f'{MEMBER}.spec.initContainers[0].resources.requests["nvidia.com/gpu"]: is not '
            "allowed: only cpu, memory, ephemeral-storage and hugepages-* may be set; devices "
            'come only from the member\'s nodeSelector.devices (got "nvidia.com/gpu")',
            id="an extended-resource request in an initContainer is refused",
        ),
        pytest.param(
            {
                "containers": [{"name": "vllm", "image": "vllm"}],
                "serviceAccountName": "modelplane-agent",
            },
            f"{MEMBER}.spec.serviceAccountName: must be default or unset: another "
            "ServiceAccount on the workload cluster is not the namespace's to use "
            '(got "modelplane-agent")',
            id="a ServiceAccount other than default is refused, naming it",
        ),
        pytest.param(
            {"containers": [{"name": "a", "image": "x"}, {"name": "a", "image": "y"}]},
            f'{MEMBER}.spec.containers[1].name: repeats another container\'s name (got "a")',
            id="two containers with one name are refused",
        ),
    ],
)
def test_a_template_that_bypasses_scheduling_or_cannot_run_places_nothing(
    functions, change, message
):
    rendered = functions.render(_with_pod_spec(_deployment(), change), DEPLOYMENT, required=FLEET)
    scheduled = condition(composite(rendered), "ReplicasScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "InvalidDeployment")
    assert scheduled["message"] == message
    assert by_kind(rendered, "ModelReplica") == []
    assert any(message in r.get("message", "") for r in results(rendered))


def test_the_default_scheduler_named_explicitly_is_placed(functions):
    xr = _with_pod_spec(_deployment(), {"schedulerName": "default-scheduler"})
    rendered = functions.render(xr, DEPLOYMENT, required=FLEET)
    assert condition(composite(rendered), "ReplicasScheduled")["status"] == "True"
    assert len(by_kind(rendered, "ModelReplica")) == 6


def test_a_replica_written_with_a_node_name_composes_no_workload(functions):
    xr = yaml.safe_load((ROOT / "examples/replicas/single-gpu.yaml").read_text())
    # Written by hand (inline, not by digest): the replica's own check refuses it.
    member = xr["spec"]["engines"][0]["members"][0]
    del member["templateDigest"]
    member["template"] = {
        "spec": {"nodeName": "gpu-east-l40s-0", "containers": [{"name": "vllm", "image": "vllm"}]}
    }
    rendered = functions.render(xr, REPLICA, required=[ROOT / "examples/fleet/clusters.yaml"])
    composed = condition(composite(rendered), "WorkloadsComposed")
    assert (composed["status"], composed["reason"]) == ("False", "InvalidSpec")
    assert "template.spec.nodeName: is not allowed" in composed["message"]
    assert '(got "gpu-east-l40s-0")' in composed["message"]
    manifests = [o["spec"]["forProvider"]["manifest"]["kind"] for o in by_kind(rendered, "Object")]
    assert "Deployment" not in manifests


def test_a_template_with_more_labels_than_the_agent_may_keep_places_nothing(functions):
    xr = _deployment()
    template = xr["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"]
    template.setdefault("metadata", {})["labels"] = {f"k{i}": "v" * 60 for i in range(200)}
    rendered = functions.render(xr, DEPLOYMENT, required=FLEET)
    scheduled = condition(composite(rendered), "ReplicasScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "InvalidDeployment")
    # k0..k199: 10 keys of 2 bytes, 90 of 3, 100 of 4, and 200 values of 60.
    assert (
        f"{MEMBER}.metadata.labels: must hold at most 8192 bytes of keys and values "
        in (scheduled["message"])
    )
    assert "(got 12690)" in scheduled["message"]
    assert by_kind(rendered, "ModelReplica") == []


@pytest.mark.parametrize("namespace", ["kube-system", "modelplane-system", "default"])
def test_a_deployment_in_a_reserved_namespace_places_nothing(functions, namespace):
    xr = _deployment()
    xr["metadata"]["namespace"] = namespace
    rendered = functions.render(xr, DEPLOYMENT, required=FLEET)
    scheduled = condition(composite(rendered), "ReplicasScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "InvalidDeployment")
    assert scheduled["message"] == (
        "metadata.namespace: is reserved on every workload cluster (default, modelplane-system "
        f'and kube-*): a tenant\'s pods may not run in a system namespace (got "{namespace}")'
    )
    assert by_kind(rendered, "ModelReplica") == []


# --- What the replica's cluster decides: approved priority classes, reserved namespaces ---


def _clusters(tenancy: dict | None) -> list[dict]:
    """The example fleet's clusters, published a moment ago, gpu-east with `tenancy`."""
    text = render.fill_time_tokens(
        (ROOT / "examples/fleet/clusters.yaml").read_text(), datetime.now(UTC)
    )
    docs = [d for d in yaml.safe_load_all(text) if d]
    for doc in docs:
        if doc["metadata"]["name"] == "gpu-east" and tenancy is not None:
            doc["spec"]["tenancy"] = tenancy
    return docs


def _inline_replica(namespace: str = "inference", **pod_spec: object) -> dict:
    """The example replica, placed a minute ago, with an inline template."""
    xr = yaml.safe_load((ROOT / "examples/replicas/single-gpu.yaml").read_text())
    xr["metadata"]["namespace"] = namespace
    xr["metadata"]["labels"][labels.DEPLOYMENT_NAMESPACE] = namespace
    placed = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    xr["metadata"]["annotations"][labels.PLACED_AT] = format_time(placed)
    member = xr["spec"]["engines"][0]["members"][0]
    del member["templateDigest"]
    member["template"] = {"spec": {"containers": [{"name": "vllm", "image": "vllm"}], **pod_spec}}
    return xr


def _manifests(rendered: list[dict]) -> list[dict]:
    return [o["spec"]["forProvider"]["manifest"] for o in by_kind(rendered, "Object")]


@pytest.mark.parametrize(
    ("xr", "tenancy", "reason", "message"),
    [
        pytest.param(
            _inline_replica(priorityClassName="system-node-critical"),
            None,
            "PriorityClassNotApproved",
            "engine serve: members[0] (Standalone).template.spec.priorityClassName: is not "
            "approved on this cluster (spec.tenancy.priorityClassNames: none) "
            '(got "system-node-critical")',
            id="a priority class on a cluster that approves none",
        ),
        pytest.param(
            _inline_replica(priorityClassName="system-node-critical"),
            {"priorityClassNames": ["inference-high"]},
            "PriorityClassNotApproved",
            "engine serve: members[0] (Standalone).template.spec.priorityClassName: is not "
            "approved on this cluster (spec.tenancy.priorityClassNames: inference-high) "
            '(got "system-node-critical")',
            id="a priority class off the cluster's list",
        ),
        pytest.param(
            _inline_replica(namespace="gpu-operator"),
            {"reservedNamespaces": ["gpu-operator", "lws-system"]},
            "NamespaceReserved",
            "metadata.namespace: is reserved on this workload cluster "
            '(spec.tenancy.reservedNamespaces) (got "gpu-operator")',
            id="a namespace the cluster reserves",
        ),
        pytest.param(
            _inline_replica(namespace="modelplane-system"),
            None,
            "NamespaceReserved",
            "metadata.namespace: is reserved on every workload cluster (default, "
            "modelplane-system and kube-*): a tenant's pods may not run in a system namespace "
            '(got "modelplane-system")',
            id="the agent's namespace, reserved on every cluster",
        ),
    ],
)
def test_a_replica_its_cluster_refuses_is_not_admitted_and_runs_nothing(
    functions, xr, tenancy, reason, message
):
    rendered = functions.render(xr, REPLICA, required=_clusters(tenancy))
    xr_out = composite(rendered)
    composed = condition(xr_out, "WorkloadsComposed")
    assert (composed["status"], composed["reason"]) == ("False", reason)
    assert composed["message"].startswith(message)
    admitted = condition(xr_out, "Admitted")
    assert (admitted["status"], admitted["reason"]) == ("False", "WaitingForAdmission")
    assert admitted["message"] == f"not judged: {message}"
    kinds = [m["kind"] for m in _manifests(rendered)]
    assert "Deployment" not in kinds
    # The deployment composes the Namespace, where the cluster accepts it
    # (test_workload_namespace_render.py); the replica never does.
    assert "Namespace" not in kinds
    assert any(message in r.get("message", "") for r in results(rendered))


def test_a_priority_class_the_cluster_approves_reaches_the_pods(functions):
    xr = _inline_replica(priorityClassName="inference-high")
    rendered = functions.render(
        xr, REPLICA, required=_clusters({"priorityClassNames": ["inference-high"]})
    )
    assert condition(composite(rendered), "Admitted")["status"] == "True"
    (deployment,) = [m for m in _manifests(rendered) if m["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["priorityClassName"] == "inference-high"
