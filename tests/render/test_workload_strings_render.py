"""What a workload cluster reports, through the real `crossplane composition render`.

- Strings a workload cluster writes are bounded (design/robustness.md,
  "Shared rules"): 64 pools whose reports list thousands of undeclared
  device keys give a CapacityObserved condition and events of at most 1,024
  characters each (before the rule the function's response was 8.4 MB here,
  which Crossplane refused at its 4 MiB gRPC limit, failing the reconcile).
- A report may only lower capacity (design/observation.md, "Valid report"):
  a pool declared at 3 nodes whose agent reports 5 with 1 free is rejected,
  published as a ceiling, and the scheduler places one 8-GPU replica there,
  not the three whole-node accounting would promise.
- A cluster name longer than a label value gives replicas a valid
  `modelplane.ai/cluster` label.
"""

from __future__ import annotations

import copy

from modelplane_common import labels
from modelplane_devtools import render
from modelplane_testkit import deployment_builders as t
from modelplane_testkit.rendered import by_kind, composite, condition, results

CLUSTER = render.ROOT / "apis/inferencecluster/composition.yaml"
DEPLOYMENT = render.ROOT / "apis/modeldeployment/composition.yaml"
MAX_MESSAGE = 1024
GPU = {
    "name": "gpu",
    "driver": "gpu.nvidia.com",
    "deviceClassName": "gpu.nvidia.com",
    "count": 8,
}


def cluster_xr(name: str, pools: list[dict]) -> dict:
    return {
        "apiVersion": labels.API_VERSION,
        "kind": "InferenceCluster",
        "metadata": {"name": name},
        "spec": {
            "credentials": {
                "secretRef": {"namespace": "modelplane-system", "name": name, "key": "kubeconfig"}
            },
            "nodePools": pools,
            "observation": {"mode": "Observed", "maxAge": "5m"},
        },
    }


def observed_objects(name: str, reports: dict[str, dict]) -> list[dict]:
    """The agent's CRD seen, and each pool's PoolObservation Object with its report."""

    def observed(resource: str, manifest: dict) -> dict:
        return {
            "apiVersion": labels.OBJECT_API_VERSION,
            "kind": "Object",
            "metadata": {
                "name": f"{name}-{resource}",
                "namespace": "modelplane-system",
                "annotations": {"crossplane.io/composition-resource-name": resource},
            },
            "spec": {"forProvider": {"manifest": {}}},
            "status": {
                "atProvider": {"manifest": manifest},
                "conditions": [{"type": "Ready", "status": "True", "reason": "Available"}],
            },
        }

    crd = observed("agent-crd", {"kind": "CustomResourceDefinition"})
    return [
        crd,
        *(
            observed(f"pool-{pool}", {"kind": "PoolObservation", "status": report})
            for pool, report in reports.items()
        ),
    ]


# --- bounded strings ---------------------------------------------------------------------------


def undeclared_keys_report(buckets: int) -> dict:
    return {
        "observedAt": "__NOW-1m__",
        "observedNodes": 4,
        "nodesByFreeDevices": [
            {"free": {f"{b:04d}-{k}-" + "k" * 50: 1 for k in range(8)}, "nodes": 1}
            for b in range(buckets)
        ],
    }


def test_64_pools_of_malformed_reports_give_bounded_conditions_and_events(functions):
    pools = [{"name": f"pool-{i:02d}", "nodeCount": 4, "devices": [GPU]} for i in range(64)]
    reports = {p["name"]: undeclared_keys_report(64) for p in pools}
    rendered = functions.render(
        cluster_xr("gpu-east", pools), CLUSTER, observed=observed_objects("gpu-east", reports)
    )
    capacity = condition(composite(rendered), "CapacityObserved")
    assert (capacity["status"], capacity["reason"]) == ("False", "NoPoolObserved")
    assert len(capacity["message"]) <= MAX_MESSAGE
    assert capacity["message"].endswith(" and 61 more")
    warnings = [r["message"] for r in results(rendered) if r.get("severity") == "Warning"]
    assert len(warnings) == 64  # every pool still says why, each within the cap
    assert max(len(m) for m in warnings) <= MAX_MESSAGE


# --- a report may only lower capacity ----------------------------------------------------------

SURGE = {
    "observedAt": "__NOW-1m__",
    "observedNodes": 5,  # 3 declared, a surge margin of 1
    "nodesByFreeDevices": [{"free": {"gpu": 8}, "nodes": 1}, {"free": {"gpu": 0}, "nodes": 4}],
}


def published_cluster(functions: render.Functions) -> dict:
    """gpu-east as compose-inference-cluster publishes it for the SURGE report."""
    xr = cluster_xr("gpu-east", [{"name": "h100", "nodeCount": 3, "devices": [GPU]}])
    observed = observed_objects("gpu-east", {"h100": SURGE})
    published = copy.deepcopy(xr)
    published["status"] = composite(functions.render(xr, CLUSTER, observed=observed))["status"]
    return published


def test_a_surge_beyond_the_margin_is_published_as_a_ceiling_and_places_one_replica(functions):
    cluster = published_cluster(functions)
    (h100,) = cluster["status"]["gpuPools"]
    assert h100["observedNodes"] == 5
    assert h100["nodesByFreeDevices"][0] == {"free": {"gpu": 8}, "nodes": 1}
    assert cluster["status"]["observedPools"] == "0/1"

    xr = t.deployment("llm", "team-a", replicas=3, engines=[t.standalone(gpus=8)])
    rendered = functions.render(xr, DEPLOYMENT, required=[cluster, t.namespace("team-a")])
    replicas = by_kind(rendered, "ModelReplica")
    assert [r["spec"]["clusterName"] for r in replicas] == ["gpu-east"]
    assert condition(composite(rendered), "ReplicasScheduled")["message"].startswith(
        "1 of 3 replicas placed"
    )


# --- long cluster names ------------------------------------------------------------------------


def test_a_cluster_named_past_63_characters_gives_replicas_a_valid_cluster_label(functions):
    name = "gpu-east-" + "a" * 244  # 253 characters
    cluster = t.cluster(name, [t.pool("h100", 2, histogram=[({"gpu": 8}, 2)])])
    xr = t.deployment("llm", "team-a", replicas=1)
    rendered = functions.render(xr, DEPLOYMENT, required=[cluster, t.namespace("team-a")])
    (replica,) = by_kind(rendered, "ModelReplica")
    assert replica["spec"]["clusterName"] == name
    value = replica["metadata"]["labels"][labels.CLUSTER]
    assert len(value) == 63 and value.startswith("gpu-east-aaa")
    assert value == labels.label_value(name)
