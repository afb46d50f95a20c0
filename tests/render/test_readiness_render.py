"""Each kind's own `Ready`, as Crossplane's reconciler writes it, through the real CLI.

`crossplane composition render` runs Crossplane's composite reconciler, so
the XR it prints carries the `Ready` condition `kubectl get` shows and
`kubectl wait --for=condition=Ready` waits on (design/readiness.md): True
with reason Available, or False with reason Creating. Deployments are
rendered twice where it matters: the first render places the replicas, and
those replicas, given the status compose-model-replica publishes once they
serve, are the observed resources of the second, as on Crossplane's next
reconcile.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest
import yaml
from modelplane_devtools import render
from modelplane_testkit.rendered import by_kind, composite, condition

ROOT = render.ROOT
FLEET = [ROOT / "examples/fleet/clusters.yaml", ROOT / "examples/fleet/replicas.yaml"]
DEPLOYMENT = ROOT / "apis/modeldeployment/composition.yaml"
CASES = {c["name"]: c for c in render.example_cases()}
READY = ("True", "Available")
NOT_READY = ("False", "Creating")


def ready(xr: dict) -> tuple[str, str]:
    got = condition(xr, "Ready")
    return got["status"], got["reason"]


def deployment(name: str, replicas: int | str | None = None) -> dict:
    xr = yaml.safe_load((ROOT / "examples/deployments" / name).read_text())
    if replicas is not None:
        xr["spec"]["replicas"] = replicas
    return xr


def serving(replica: dict) -> dict:
    """A placed replica as Crossplane observes it once its pods run and its workloads serve."""
    body = copy.deepcopy(replica)
    body["metadata"].pop("ownerReferences", None)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body["status"] = {
        "scheduledAt": now,
        "conditions": [
            {
                "type": "PodsScheduled",
                "status": "True",
                "reason": "AllPodsScheduled",
                "lastTransitionTime": now,
            },
            {"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": now},
        ],
    }
    return body


def placed_and_serving(functions, xr: dict) -> list[dict]:
    """The replicas a first render places, each observed serving."""
    first = functions.render(xr, DEPLOYMENT, required=FLEET)
    return [serving(r) for r in by_kind(first, "ModelReplica")]


# --- ModelDeployment ------------------------------------------------------------------------


def test_all_ready_every_replica_placed_and_serving_is_ready(functions):
    xr = deployment("single-gpu-throughput.yaml")
    observed = placed_and_serving(functions, xr)
    assert len(observed) == 6
    rendered = functions.render(xr, DEPLOYMENT, observed=observed, required=FLEET)
    out = composite(rendered)
    assert out["status"]["replicas"] == {"desired": 6, "scheduled": 6, "ready": 6}
    assert ready(out) == READY
    assert condition(out, "ReplicasReady")["reason"] == "AllReplicasReady"


def test_just_placed_replicas_are_not_ready_until_they_serve(functions):
    rendered = functions.render(
        deployment("single-gpu-throughput.yaml"), DEPLOYMENT, required=FLEET
    )
    out = composite(rendered)
    assert out["status"]["replicas"] == {"desired": 6, "scheduled": 6, "ready": 0}
    assert ready(out) == NOT_READY


def test_short_the_placed_replicas_serve_but_the_rest_fit_nowhere_is_not_ready(functions):
    # 20 whole H100 nodes asked for, 13 exist (test_deployment_render.py): the
    # 13 placed ones serving must not make the deployment Ready.
    xr = deployment("eight-gpu-single-node.yaml", replicas=20)
    observed = placed_and_serving(functions, xr)
    assert len(observed) == 13
    rendered = functions.render(xr, DEPLOYMENT, observed=observed, required=FLEET)
    out = composite(rendered)
    assert out["status"]["replicas"] == {"desired": 20, "scheduled": 13, "ready": 13}
    assert condition(out, "ReplicasScheduled")["reason"] == "InsufficientCapacity"
    assert ready(out) == NOT_READY
    replicas_ready = condition(out, "ReplicasReady")
    assert (replicas_ready["status"], replicas_ready["message"]) == (
        "False",
        "13 of 20 replicas ready",
    )


def test_none_placed_composes_nothing_and_is_not_ready(functions):
    # Crossplane alone would call an XR without composed resources Available.
    xr = deployment("eight-gpu-single-node.yaml", replicas=3)
    xr["spec"]["template"]["spec"]["engines"][0]["members"][0]["nodeSelector"]["devices"][0][
        "count"
    ] = 16
    rendered = functions.render(xr, DEPLOYMENT, required=FLEET)
    out = composite(rendered)
    assert by_kind(rendered, "ModelReplica") == []
    assert out["status"]["replicas"] == {"desired": 3, "scheduled": 0, "ready": 0}
    assert ready(out) == NOT_READY


def test_scale_to_zero_removes_every_replica_and_is_ready(functions):
    observed = placed_and_serving(functions, deployment("single-gpu-throughput.yaml"))
    xr = deployment("single-gpu-throughput.yaml", replicas=0)
    rendered = functions.render(xr, DEPLOYMENT, observed=observed, required=FLEET)
    out = composite(rendered)
    assert by_kind(rendered, "ModelReplica") == []
    assert ready(out) == READY
    assert condition(out, "ReplicasReady")["reason"] == "ScaledToZero"


def test_no_cluster_selected_a_serving_deployment_stays_ready(functions):
    observed = placed_and_serving(functions, deployment("single-gpu-throughput.yaml"))
    xr = deployment("single-gpu-throughput.yaml")
    xr["spec"]["template"]["spec"]["clusterSelector"] = {
        "matchLabels": {"modelplane.ai/tier": "gone"}
    }
    rendered = functions.render(xr, DEPLOYMENT, observed=observed, required=FLEET)
    out = composite(rendered)
    assert condition(out, "ReplicasScheduled")["reason"] == "NoClusters"
    assert len(by_kind(rendered, "ModelReplica")) == 6
    assert ready(out) == READY


@pytest.mark.parametrize(
    ("previous", "expected"),
    [
        pytest.param("True", READY, id="Ready before and every kept replica serving stays Ready"),
        pytest.param(None, NOT_READY, id="never Ready before is not claimed"),
    ],
)
def test_unreadable_replica_count_carries_the_previous_readiness(functions, previous, expected):
    observed = placed_and_serving(functions, deployment("single-gpu-throughput.yaml"))
    xr = deployment("single-gpu-throughput.yaml", replicas="six")
    if previous is not None:
        xr["status"] = {
            "conditions": [
                {
                    "type": "Ready",
                    "status": previous,
                    "reason": "Available",
                    "lastTransitionTime": "2026-11-29T09:00:00Z",
                }
            ]
        }
    rendered = functions.render(xr, DEPLOYMENT, observed=observed, required=FLEET)
    out = composite(rendered)
    assert condition(out, "ReplicasScheduled")["reason"] == "InvalidDeployment"
    assert len(by_kind(rendered, "ModelReplica")) == 6
    assert condition(out, "ReplicasReady")["reason"] == "DesiredReplicasUnknown"
    assert ready(out) == expected


# --- InferenceCluster and ModelReplica --------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "expected", "capacity_observed"),
    [
        pytest.param("cluster-observed", READY, "True", id="observed, every Object Ready"),
        pytest.param("cluster-declared", READY, "False", id="Declared is Ready whole-node"),
        pytest.param(
            "cluster-malformed-observation",
            READY,
            "False",
            id="rejected and stale reports: CapacityObserved False, still Ready",
        ),
    ],
)
def test_a_cluster_is_ready_whatever_its_capacity_data(
    functions, case, expected, capacity_observed
):
    out = composite(render.render_case(functions, CASES[case]))
    assert ready(out) == expected
    assert condition(out, "CapacityObserved")["status"] == capacity_observed


def test_a_cluster_whose_pool_object_is_not_ready_is_not_ready(functions):
    case = CASES["cluster-observed"]
    observed = render.load_all(render.fill_time_tokens((ROOT / case["observed"]).read_text()))
    for doc in observed:
        name = doc["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
        if name == "pool-h100":
            for c in doc["status"]["conditions"]:
                if c["type"] == "Ready":
                    c.update(status="False", reason="Creating")
    rendered = functions.render(ROOT / case["xr"], ROOT / case["composition"], observed=observed)
    assert ready(composite(rendered)) == NOT_READY


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        pytest.param("replica-leader-workers-scheduled", READY, id="every workload available"),
        pytest.param("replica-single-gpu", NOT_READY, id="nothing created yet"),
        pytest.param(
            "replica-prefill-decode-unschedulable", NOT_READY, id="one engine not available"
        ),
    ],
)
def test_a_replica_is_ready_exactly_when_its_workloads_are(functions, case, expected):
    out = composite(render.render_case(functions, CASES[case]))
    assert ready(out) == expected
    assert condition(out, "WorkloadsReady")["status"] == expected[0]
