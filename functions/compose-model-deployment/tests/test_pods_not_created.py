"""Replicas whose workload cluster refused their pods (modelplane_common.pods_created).

A replica that reports PodsCreated False/NotCreated holds nothing: its own
deployment re-places it at once (avoiding its pools, with the cluster's
reason), and no other deployment charges it. Its reason reaches the
deployment's PodsCreated condition.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from compose_model_deployment import fn
from compose_model_deployment.placement import Change
from modelplane_testkit import deployment_builders as t
from modelplane_testkit.wire import conditions, desired

FULL = {"gpu": 8}
PLACED = t.ago(10)
REFUSED = (
    'the Deployment reports FailedCreate: pods "llm-0-x" is forbidden: violates PodSecurity '
    '"baseline:latest": privileged (container "serve" must not set securityContext.privileged=true)'
)


def clusters():
    return [
        t.cluster("a", [t.pool("p", 1, histogram=[(FULL, 1)])]),
        t.cluster("b", [t.pool("p", 1, histogram=[(FULL, 1)])]),
    ]


def _replica(name, namespace, deployment, reason, since, index=None):
    body = t.model_replica(
        name,
        namespace,
        "a",
        [t.replica_engine("serve", "p", gpus=8)],
        deployment_name=deployment,
        index=index,
        pods_scheduled="False",
        reason="WaitingForPods",
        since=PLACED,
        ready=False,
        placed_at=PLACED,
    )
    body["status"]["admission"] = {"placedAt": PLACED, "verdict": "Admitted"}
    if reason is not None:
        body["status"]["conditions"].append(
            {
                "type": "PodsCreated",
                "status": "False",
                "reason": reason,
                "message": REFUSED,
                "lastTransitionTime": since,
            }
        )
    return body


TWO_MINUTES_AGO = t.ago(2)


def mine(reason, since=TWO_MINUTES_AGO):
    return {"replica-0": _replica("llm-0", "team-a", "llm", reason, since, index=0)}


def _plan(own=None, others=()):
    deployment = t.deployment(replicas=1, engines=[t.standalone(gpus=8)])
    return t.schedule(deployment, clusters(), own, others=list(others))


@pytest.mark.parametrize(
    ("own", "cluster", "change"),
    [
        pytest.param(mine("NotCreated"), "b", Change.MOVED, id="released: re-placed at once"),
        pytest.param(mine("Creating"), "a", Change.KEPT, id="within the grace: kept"),
        pytest.param(
            mine("NotCreated", since=t.ago(20)),
            "a",
            Change.KEPT,
            id="a NotCreated older than the placement describes the previous one: kept",
        ),
        pytest.param(mine(None), "a", Change.KEPT, id="nothing said: kept"),
    ],
)
def test_a_replica_whose_pods_were_refused_past_the_grace_is_replaced(own, cluster, change):
    (replica,) = _plan(own).replicas
    assert (replica.cluster, replica.change) == (cluster, change)


def test_the_refused_pools_are_avoided_with_the_clusters_reason_from_the_refusal():
    plan = _plan(mine("NotCreated", since=t.ago(2)))
    (failure,) = plan.failed_placements
    assert (failure.cluster, failure.pool) == ("a", "p")
    assert failure.expires_at == t.NOW - timedelta(minutes=2) + timedelta(minutes=30)
    assert failure.reason == f"its pods were not created: {REFUSED}"


@pytest.mark.parametrize(
    ("reason", "cluster"),
    [
        pytest.param("NotCreated", "a", id="another deployment's released replica is not charged"),
        pytest.param("Orphaned", "a", id="an orphaned replica is not charged"),
        pytest.param("Creating", "b", id="another deployment's replica within the grace is"),
    ],
)
def test_a_released_replica_of_another_deployment_holds_nothing(reason, cluster):
    other = _replica("other-0", "team-b", "other", reason, t.ago(2))
    (replica,) = _plan(others=[other]).replicas
    assert replica.cluster == cluster


@pytest.mark.parametrize(
    ("own", "status", "reason", "message"),
    [
        pytest.param(
            mine("NotCreated"),
            "False",
            "NotCreated",
            f"replica llm-0 on a: its pods were not created: {REFUSED}",
            id="released: the deployment says which replica and the cluster's reason",
        ),
        pytest.param(
            mine("Creating"),
            "False",
            "Creating",
            f"replica llm-0: {REFUSED}",
            id="within the grace: the reason is relayed already",
        ),
        pytest.param(
            mine(None),
            "True",
            "Created",
            "no replica lacks pods its cluster refused",
            id="no refusal: True",
        ),
    ],
)
def test_the_deployment_condition_carries_the_workload_clusters_reason(
    own, status, reason, message
):
    xr = t.deployment(replicas=1, engines=[t.standalone(gpus=8)])
    rsp = fn.run_function(t.request(xr, clusters(), [], own), t.NOW, t.stand_in_matcher)
    assert conditions(rsp)["PodsCreated"] == (status, reason, message)


def test_every_replica_carries_the_deployments_grace():
    xr = t.deployment(replicas=1, engines=[t.standalone(gpus=8)])
    xr["spec"]["healing"] = {"missingPodsGracePeriod": "90s"}
    rsp = fn.run_function(t.request(xr, clusters(), [], {}), t.NOW, t.stand_in_matcher)
    assert desired(rsp)["replica-0"]["spec"]["missingPodsGracePeriod"] == "1m30s"
    default = t.deployment(replicas=1, engines=[t.standalone(gpus=8)])
    rsp = fn.run_function(t.request(default, clusters(), [], {}), t.NOW, t.stand_in_matcher)
    assert desired(rsp)["replica-0"]["spec"]["missingPodsGracePeriod"] == "5m"
