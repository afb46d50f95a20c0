"""Cluster access and device quotas on a real control plane (design/tenancy.md).

One Declared InferenceCluster whose spec.access.namespaceSelector admits only
namespaces labelled `modelplane.ai/e2e-access: granted`, reached through the
workload cluster's kubeconfig. Crossplane fetches every tenant input itself
(the deployment's Namespace, the namespace's ResourceQuotas and ModelReplicas),
with the read-only ClusterRole deploy/control-plane ships:

- a deployment in a namespace the cluster does not admit gets no replica and
  ReplicasScheduled False, the diagnosis counting the cluster;
- in an admitted namespace whose ResourceQuota allows 8 devices of the
  class, a deployment of three 4-device replicas gets two, says QuotaExceeded
  with the quota, the used and the requested, and both replicas are admitted
  (admission re-checked the quota behind the namespace's replicas);
- the access selector's evaluator (modelplane_common.selectors) selects the
  same namespaces as the API server's own label selection, operator by
  operator.
"""

from __future__ import annotations

import pytest
from modelplane_common.selectors import parse_label_selector
from modelplane_e2e import fleet, install, manifests
from modelplane_e2e.kube import Kube, condition, eventually

pytestmark = pytest.mark.e2e

CLUSTER = "gpu-access"
SECRETS = "access-system"
DENIED = "team-denied"
LIMITED = "team-limited"
GRANTED = {"modelplane.ai/e2e-access": "granted"}
GPU = fleet.H100_80GB
POOL = fleet.Pool("access", 3, (GPU,))
QUOTA_KEY = f"{GPU.driver}.deviceclass.resource.k8s.io/devices"


def restricted_cluster() -> dict:
    cluster = fleet.inference_cluster(
        CLUSTER, [POOL], labels={"modelplane.ai/e2e": "access"}, secrets=SECRETS, max_age="2m"
    )
    cluster["spec"]["observation"] = {"mode": "Declared"}
    cluster["spec"]["access"] = {
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "modelplane.ai/e2e-access", "operator": "In", "values": ["granted"]}
            ]
        }
    }
    return cluster


def deployment(name: str, namespace_name: str, replicas: int, gpus: int) -> dict:
    engine = manifests.standalone_engine(
        container={"name": "engine", "image": "example.invalid/e:v1"}, gpus=gpus
    )
    return manifests.model_deployment(
        name,
        namespace=namespace_name,
        engines=[engine],
        replicas=replicas,
        cluster_labels={"modelplane.ai/e2e": "access"},
    )


def device_quota(count: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "devices", "namespace": LIMITED},
        "spec": {"hard": {QUOTA_KEY: str(count)}},
    }


def scheduled(control: Kube, name: str, namespace_name: str) -> dict:
    xr = control.get("modeldeployment.modelplane.ai", name, namespace_name)
    found = condition(xr, "ReplicasScheduled")
    assert found is not None and found.get("status") == "False", f"{name}: {found}"
    return found


def replicas_of(control: Kube, namespace_name: str) -> list[dict]:
    return control.list("modelreplicas.modelplane.ai", namespace_name)


def test_access_and_quota(e2e_stack, planes):
    control, _ = planes
    control.apply(
        [
            manifests.namespace(SECRETS),
            manifests.namespace(DENIED),
            manifests.namespace(LIMITED, labels=GRANTED),
        ]
    )
    assert e2e_stack.provider is not None
    control.apply(fleet.kubeconfig_secret(CLUSTER, SECRETS, e2e_stack.provider))
    eventually(
        lambda: install.apis_served_by_the_configuration(control), "the Configuration's APIs"
    )
    control.apply(restricted_cluster())
    control.apply(device_quota(8))
    control.apply([deployment("denied", DENIED, 1, 4), deployment("limited", LIMITED, 3, 4)])
    try:
        denied = eventually(
            lambda: _not_admitted(control), "the denied namespace diagnosed", timeout=180
        )
        assert (denied["reason"], denied["message"]) == (
            "InsufficientCapacity",
            "0 of 1 replicas placed: 1 pool checked, 1 namespace not admitted (1 cluster)",
        )
        assert replicas_of(control, DENIED) == []

        # Until admission decides, the two placed replicas wait and are not counted.
        eventually(lambda: _both_admitted(control), "both replicas admitted", timeout=180)
        eventually(lambda: _quota_exceeded(control), "QuotaExceeded, 2 of 3", timeout=180)
    finally:
        leave_nothing_behind(control)


def _not_admitted(control: Kube) -> dict:
    found = scheduled(control, "denied", DENIED)
    assert "namespace not admitted" in found.get("message", ""), found
    return found


def _quota_exceeded(control: Kube) -> dict:
    found = scheduled(control, "limited", LIMITED)
    assert (found.get("reason"), found.get("message")) == (
        "QuotaExceeded",
        "2 of 3 replicas placed: 1 pool checked, 1 namespace quota exceeded; "
        f"namespace {LIMITED} quota devices allows 8 {GPU.driver} device(s): "
        "8 used, a replica requests 4",
    ), found
    assert len(replicas_of(control, LIMITED)) == 2
    return found


def _both_admitted(control: Kube) -> bool:
    reasons = [
        (condition(r, "Admitted") or {}).get("reason") for r in replicas_of(control, LIMITED)
    ]
    assert reasons == ["Admitted", "Admitted"], reasons
    return True


def leave_nothing_behind(control: Kube) -> None:
    fleet.remove_deployments_then_cluster(control, CLUSTER, DENIED, LIMITED)


# -- the selector's semantics, against the API server's own ------------------------------------

ORACLE_NAMESPACES = {
    "sel-vision-prod": {"team": "vision", "tier": "prod"},
    "sel-vision-dev": {"team": "vision", "tier": "dev"},
    "sel-speech": {"team": "speech"},
    "sel-bare": {},
}
SELECTORS = [
    {"matchLabels": {"team": "vision"}},
    {"matchLabels": {"team": "vision", "tier": "prod"}},
    {"matchExpressions": [{"key": "team", "operator": "In", "values": ["vision", "speech"]}]},
    {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["vision"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
    {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
    {
        "matchLabels": {"team": "vision"},
        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["prod"]}],
    },
]


def _as_query(selector: dict) -> str:
    """The selector in the API server's query syntax, which it parses and evaluates itself."""
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for e in selector.get("matchExpressions") or []:
        values = ",".join(e.get("values") or [])
        terms.append(
            {
                "In": f"{e['key']} in ({values})",
                "NotIn": f"{e['key']} notin ({values})",
                "Exists": e["key"],
                "DoesNotExist": f"!{e['key']}",
            }[e["operator"]]
        )
    return ",".join(terms)


def test_the_access_selector_selects_what_the_api_server_selects(planes):
    control, _ = planes
    control.apply(
        [manifests.namespace(n, labels=labels) for n, labels in ORACLE_NAMESPACES.items()]
    )
    for selector in SELECTORS:
        listed = control.kubectl(
            "get", "namespaces", "-l", _as_query(selector), "-o", "name"
        ).split()
        by_server = sorted(n.removeprefix("namespace/") for n in listed if "/sel-" in n)
        ours = sorted(
            n
            for n, labels in ORACLE_NAMESPACES.items()
            if parse_label_selector(selector, "s").matches(labels)
        )
        assert ours == by_server, selector
