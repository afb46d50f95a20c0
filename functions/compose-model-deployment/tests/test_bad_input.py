"""Bad, unknown and missing inputs through RunFunction: never a crash, never lost work."""

from __future__ import annotations

import asyncio
import copy

import pytest
from compose_model_deployment import fn, readers
from modelplane_testkit import deployment_builders as t
from modelplane_testkit import wire
from modelplane_testkit.wire import conditions, desired
from modelplane_testkit.wire import desired_status as xr_status

MATCHER = fn.default_matcher()
FULL = {"gpu": 8}
A = t.cluster("a", [t.pool("p", 2, histogram=[(FULL, 2)])], cluster_labels={"tier": "1"})
B = t.cluster("b", [t.pool("p", 1, histogram=[(FULL, 1)])], cluster_labels={"tier": "1"})
ON_B = t.running_replica(0, "b")
ON_A = t.running_replica(1, "a")
OWN = {"replica-0": ON_B}
TWO = {"replica-0": ON_B, "replica-1": ON_A}


def run(req):
    return fn.run_function(req, t.NOW, MATCHER)


def deployment(replicas=1, **status):
    xr = t.deployment(replicas=replicas, match_labels={"tier": "1"})
    if status:
        xr["status"] = status
    return xr


def test_a_replica_on_a_missing_cluster_is_held_within_the_grace_period():
    rsp = run(t.request(deployment(replicas=2), [A], [], TWO))
    assert desired(rsp)["replica-0"]["spec"] == ON_B["spec"]
    status, reason, message = conditions(rsp)[fn.SCHEDULED]
    assert (status, reason) == ("False", "ClusterUnavailable")
    assert "InferenceCluster b is missing" in message
    assert xr_status(rsp)["replicas"]["scheduled"] == 1
    assert xr_status(rsp)["replicas"]["ready"] == 1
    assert xr_status(rsp)["missingClusters"] == [{"name": "b", "since": t.ago(0)}]
    assert any("replica llm-0 is kept on b" in m for s, m in wire.events(rsp) if s == "Warning")


def test_a_replica_on_a_cluster_missing_past_the_grace_period_moves():
    xr = deployment(replicas=2, missingClusters=[{"name": "b", "since": t.ago(6)}])
    rsp = run(t.request(xr, [A], [], TWO))
    assert desired(rsp)["replica-0"]["spec"]["clusterName"] == "a"
    assert conditions(rsp)[fn.SCHEDULED][:2] == ("True", "AllReplicasScheduled")
    assert xr_status(rsp)["missingClusters"] == []


def test_the_grace_period_is_configurable():
    xr = deployment(replicas=2, missingClusters=[{"name": "b", "since": t.ago(6)}])
    xr["spec"]["healing"] = {"missingClusterGracePeriod": "10m"}
    rsp = run(t.request(xr, [A], [], TWO))
    assert desired(rsp)["replica-0"]["spec"] == ON_B["spec"]


def test_nothing_moves_when_every_cluster_the_deployment_uses_is_missing():
    spare = t.cluster("c", [t.pool("p", 2, histogram=[(FULL, 2)])], cluster_labels={"tier": "1"})
    xr = deployment(missingClusters=[{"name": "b", "since": t.ago(600)}])
    rsp = run(t.request(xr, [spare], [], OWN))
    assert desired(rsp)["replica-0"]["spec"] == ON_B["spec"]
    assert (
        "every InferenceCluster this deployment runs on is missing (b)"
        in (conditions(rsp)[fn.SCHEDULED][2])
    )


def test_a_replica_on_a_cluster_whose_spec_is_invalid_is_held_and_the_defect_named():
    broken = copy.deepcopy(B)
    broken["spec"]["nodePools"][0]["nodeCount"] = -3
    rsp = run(t.request(deployment(), [A, broken], [], OWN))
    assert desired(rsp)["replica-0"]["spec"] == ON_B["spec"]
    assert conditions(rsp)[fn.SCHEDULED][1] == "ClusterUnavailable"
    status, reason, message = conditions(rsp)[fn.INPUTS]
    assert (status, reason) == ("False", "DegradedInputs")
    assert (
        "InferenceCluster b is invalid: spec.nodePools[0].nodeCount: "
        "Input should be greater than or equal to 0 (got -3)" in message
    )


def test_a_cluster_without_a_name_is_skipped_not_called_none():
    nameless = copy.deepcopy(A)
    nameless["metadata"]["name"] = None
    rsp = run(t.request(deployment(), [nameless, B], [], OWN))
    assert desired(rsp)["replica-0"]["spec"]["clusterName"] == "b"
    message = conditions(rsp)[fn.INPUTS][2]
    assert "InferenceCluster metadata.name: must be a non-empty string (got null)" in message
    assert "None" not in str(xr_status(rsp))


def test_an_own_replica_whose_spec_is_invalid_keeps_every_replica():
    broken = copy.deepcopy(ON_B)
    broken["spec"]["engines"][0]["members"] = []
    rsp = run(t.request(deployment(), [A, B], [], {"replica-0": broken}))
    assert desired(rsp)["replica-0"]["spec"] == broken["spec"]
    status, reason, message = conditions(rsp)[fn.SCHEDULED]
    assert (status, reason) == ("False", "InvalidReplica")
    assert message.startswith(
        "replica-0.spec.engines[0].members: List should have at least 1 item after validation"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"replicas": -1},
            "spec.replicas: Input should be greater than or equal to 0 (got -1)",
        ),
        (
            {"replicas": "two"},
            "spec.replicas: Input should be a valid integer, unable to parse string as an "
            'integer (got "two")',
        ),
    ],
    ids=["a negative replica count", "a replica count that is a word"],
)
def test_an_invalid_deployment_says_field_path_reason_and_value(change, message):
    xr = deployment()
    xr["spec"].update(change)
    rsp = run(t.request(xr, [A, B], [], OWN))
    status, reason, text = conditions(rsp)[fn.SCHEDULED]
    assert (status, reason) == ("False", "InvalidDeployment")
    assert text == message
    assert "https://" not in text
    assert desired(rsp)["replica-0"]["spec"] == ON_B["spec"]


def test_a_lower_case_rfc3339_condition_time_still_heals():
    stuck = t.running_replica(
        0,
        "b",
        pods_scheduled="False",
        reason="Unschedulable",
        since=t.ago(10).lower(),
        placed_at=t.ago(60).replace("T", "t"),
    )
    rsp = run(t.request(deployment(), [A, B], [], {"replica-0": stuck}))
    assert desired(rsp)["replica-0"]["spec"]["clusterName"] == "a"


def test_a_composite_whose_spec_is_not_an_object_is_fatal():
    xr = {**deployment(), "spec": ["replicas", 2]}
    runner = fn.FunctionRunner(matcher=MATCHER, clock=lambda: t.NOW)
    rsp = asyncio.run(runner.RunFunction(t.request(xr, [A, B], [], OWN), None))
    assert wire.events(rsp) == [
        ("Fatal", 'cannot read the composite: spec: must be an object (got ["replicas", 2])')
    ]


@pytest.mark.parametrize(
    "selector",
    [
        pytest.param({"cel": {}}, id="cel without an expression is an invalid deployment"),
        pytest.param(
            {"cel": "device.driver == 'gpu.nvidia.com'"},
            id="cel as a plain string, not DRA's {expression}, is an invalid deployment",
        ),
        pytest.param("device.driver == 'x'", id="a bare string selector is an invalid deployment"),
    ],
)
def test_a_selector_not_in_dra_shape_is_named_and_keeps_every_replica(selector):
    # The matcher takes typed requests; the DRA shape is checked where the deployment is read.
    xr = deployment()
    engine = xr["spec"]["template"]["spec"]["engines"][0]
    engine["members"][0]["nodeSelector"]["devices"][0]["selectors"] = [selector]
    rsp = run(t.request(xr, [A, B], [], OWN))
    status, reason, text = conditions(rsp)[fn.SCHEDULED]
    assert (status, reason) == ("False", "InvalidDeployment")
    assert text.startswith(
        "spec.template.spec.engines[0].members[0].nodeSelector.devices[0].selectors[0]"
    ), text
    assert desired(rsp)["replica-0"]["spec"] == ON_B["spec"]


DEVICES = "spec.template.spec.engines[0].members[0].nodeSelector.devices"
CLAIM_LIMIT = (
    "the counts sum to at most 32: a pod's one ResourceClaim allocates at most 32 devices, "
    "and kube-scheduler refuses more"
)


@pytest.mark.parametrize(
    ("counts", "message"),
    [
        pytest.param([16, 17], f"{DEVICES}: {CLAIM_LIMIT} (got [16, 17])", id="33 across two"),
        pytest.param(
            [33],
            f"{DEVICES}[0].count: Input should be less than or equal to 32 (got 33)",
            id="one entry of 33",
        ),
    ],
)
def test_a_member_claiming_more_than_32_devices_places_nothing_and_keeps_every_replica(
    counts, message
):
    # kube-scheduler never binds it: placed, it would hold capacity others could use.
    xr = deployment(replicas=2)
    member = xr["spec"]["template"]["spec"]["engines"][0]["members"][0]
    member["nodeSelector"]["devices"] = [
        {"name": f"d{i}", "count": c} for i, c in enumerate(counts)
    ]
    rsp = run(t.request(xr, [A, B], [], OWN))
    assert conditions(rsp)[fn.SCHEDULED] == ("False", "InvalidDeployment", message)
    assert sorted(desired(rsp)) == ["replica-0"]
    assert desired(rsp)["replica-0"]["spec"] == ON_B["spec"]


def test_a_member_claiming_32_devices_in_total_is_read():
    xr = deployment()
    member = xr["spec"]["template"]["spec"]["engines"][0]["members"][0]
    member["nodeSelector"]["devices"] = [{"name": "a", "count": 16}, {"name": "b", "count": 16}]
    ((shape,),) = [e.members for e in readers.read_deployment(xr).spec.engines]
    assert [r.count for r in shape.requests] == [16, 16]


MEMBER = "spec.template.spec.engines[0].members[0].template"


@pytest.mark.parametrize(
    ("pod_spec", "message"),
    [
        pytest.param(
            {"resourceClaims": [{"name": "more", "resourceClaimTemplateName": "mine"}]},
            f"{MEMBER}.spec.resourceClaims[0]: is not allowed: devices come only from the "
            "member's nodeSelector.devices, the claim the fleet scheduler charges "
            '(got "more")',
            id="an extra resourceClaims entry",
        ),
        pytest.param(
            {"containers": [{"name": "vllm", "resources": {"limits": {"nvidia.com/gpu": 8}}}]},
            f'{MEMBER}.spec.containers[0].resources.limits["nvidia.com/gpu"]: is not allowed: '
            "only cpu, memory, ephemeral-storage and hugepages-* may be set; devices come "
            'only from the member\'s nodeSelector.devices (got "nvidia.com/gpu")',
            id="an extended-resource limit",
        ),
        pytest.param(
            {"serviceAccountName": "modelplane-agent"},
            f"{MEMBER}.spec.serviceAccountName: must be default or unset: another "
            "ServiceAccount on the workload cluster is not the namespace's to use "
            '(got "modelplane-agent")',
            id="another ServiceAccount",
        ),
    ],
)
def test_a_template_taking_devices_or_an_identity_is_refused_and_keeps_every_replica(
    pod_spec, message
):
    xr = deployment()
    template = xr["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"]
    template["spec"] = {**template["spec"], **pod_spec}
    rsp = run(t.request(xr, [A, B], [], OWN))
    assert conditions(rsp)[fn.SCHEDULED] == ("False", "InvalidDeployment", message)
    assert desired(rsp)["replica-0"]["spec"] == ON_B["spec"]


@pytest.mark.parametrize("namespace", ["kube-system", "default", "modelplane-system"])
def test_a_deployment_in_a_reserved_namespace_places_nothing_and_keeps_every_replica(namespace):
    xr = t.deployment(namespace=namespace, replicas=2, match_labels={"tier": "1"})
    rsp = run(t.request(xr, [A, B], [], OWN))
    status, reason, text = conditions(rsp)[fn.SCHEDULED]
    assert (status, reason) == ("False", "InvalidDeployment")
    assert text == (
        "metadata.namespace: is reserved on every workload cluster (default, modelplane-system "
        f'and kube-*): a tenant\'s pods may not run in a system namespace (got "{namespace}")'
    )
    assert sorted(desired(rsp)) == ["replica-0"]
    assert desired(rsp)["replica-0"]["spec"] == ON_B["spec"]


def test_an_unknown_cluster_spreading_is_refused_naming_it_and_keeps_every_replica():
    xr = t.deployment(replicas=2, cluster_spreading="Packed")
    rsp = run(t.request(xr, [A, B], [], OWN))
    status, reason, text = conditions(rsp)[fn.SCHEDULED]
    assert (status, reason) == ("False", "InvalidDeployment")
    assert text.startswith("spec.clusterSpreading: ") and '"Packed"' in text
    assert "\n" not in text
    assert sorted(desired(rsp)) == ["replica-0"]
    assert desired(rsp)["replica-0"]["spec"] == ON_B["spec"]
