"""PodsCreated: the admitted replica's pods, and the workload cluster's reason when missing."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from compose_model_replica import pods_created
from compose_model_replica.pods_scheduled import NOT_REPORTED, AgentReport
from modelplane_common.capacity.admission import ADMITTED, OVERCOMMITTED, Record
from modelplane_common.composed import observed_object

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ADMITTED_AT = NOW - timedelta(minutes=10)
GRACE = timedelta(minutes=5)
POD_SECURITY = (
    'pods "r0-serve-5d-x" is forbidden: violates PodSecurity "baseline:latest": privileged '
    '(container "serve" must not set securityContext.privileged=true)'
)


def report(pods, observed_at=NOW):
    return AgentReport(observed_at, pods, 0, "False", "Pending", "", None)


def workload(kind, *, conditions=(), synced=True, synced_message="", applied=True, ready=False):
    status: dict = {
        "conditions": [
            {"type": "Synced", "status": "True" if synced else "False", "message": synced_message},
            {"type": "Ready", "status": "True" if ready else "False"},
        ]
    }
    if applied:
        remote = {"kind": kind, "status": {"conditions": list(conditions)}}
        status["atProvider"] = {"manifest": remote}
    body = {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "spec": {"forProvider": {"manifest": {"kind": kind}}},
        "status": status,
    }
    return observed_object(body)


REFUSED_DEPLOYMENT = workload(
    "Deployment",
    conditions=[
        {
            "type": "ReplicaFailure",
            "status": "True",
            "reason": "FailedCreate",
            "message": POD_SECURITY,
        }
    ],
)
NO_NAMESPACE = workload(
    "Deployment",
    synced=False,
    synced_message='cannot create object: namespaces "team-a" not found',
    applied=False,
)


ADMITTED_RECORD = Record("t", ADMITTED, ADMITTED_AT)


def evidence(
    source=None,
    *,
    expected=2,
    record=ADMITTED_RECORD,
    since=None,
    observed=None,
    grace=GRACE,
):
    return pods_created.Evidence(
        source=report(0) if source is None else source,
        expected=expected,
        record=record,
        previous_since=since,
        observed={"east/serve/workload": REFUSED_DEPLOYMENT} if observed is None else observed,
        grace=grace,
        max_age=timedelta(minutes=5),
        now=NOW,
        namespace="team-a",
    )


CASES = [
    pytest.param(
        evidence(record=None), "Unknown", "NotObserved", None, id="not admitted: no pods expected"
    ),
    pytest.param(
        evidence(record=Record("t", OVERCOMMITTED, ADMITTED_AT)),
        "Unknown",
        "NotObserved",
        None,
        id="overcommitted: nothing to count",
    ),
    pytest.param(evidence(expected=None), "Unknown", "NotObserved", None, id="invalid spec"),
    pytest.param(evidence(report(2)), "True", "Created", None, id="every pod exists"),
    pytest.param(
        evidence(report(3)), "True", "Created", None, id="more pods than expected: created"
    ),
    pytest.param(
        evidence(), "False", "Creating", NOW, id="first seen missing: since now, within the grace"
    ),
    pytest.param(
        evidence(since=NOW - timedelta(minutes=4)),
        "False",
        "Creating",
        NOW - timedelta(minutes=4),
        id="missing for less than the grace: Creating, since kept",
    ),
    pytest.param(
        evidence(since=NOW - timedelta(minutes=6)),
        "False",
        "NotCreated",
        NOW - timedelta(minutes=6),
        id="missing for longer than the grace: NotCreated",
    ),
    pytest.param(
        evidence(since=NOW - timedelta(minutes=6), grace=timedelta(minutes=10)),
        "False",
        "Creating",
        NOW - timedelta(minutes=6),
        id="the replica's own grace is honoured",
    ),
    pytest.param(
        evidence(since=ADMITTED_AT - timedelta(minutes=1)),
        "False",
        "Creating",
        NOW,
        id="a memory from before the verdict (the previous placement) starts again",
    ),
    pytest.param(
        evidence(NOT_REPORTED, since=NOW - timedelta(minutes=6)),
        "Unknown",
        "NotObserved",
        NOW - timedelta(minutes=6),
        id="no report: unknown, never released, the memory kept",
    ),
    pytest.param(
        evidence(report(0, observed_at=NOW - timedelta(minutes=20))),
        "Unknown",
        "NotObserved",
        None,
        id="a stale report counts nothing",
    ),
    pytest.param(
        evidence(
            replace(
                report(2, observed_at=NOW - timedelta(minutes=20)),
                cluster_current_until=NOW + timedelta(minutes=20),
            )
        ),
        "True",
        "Created",
        None,
        id="an unchanged report its cluster vouches for counts its pods",
    ),
    pytest.param(
        evidence(
            replace(
                report(2, observed_at=NOW - timedelta(minutes=20)),
                cluster_current_until=NOW - timedelta(seconds=1),
            )
        ),
        "Unknown",
        "NotObserved",
        None,
        id="a stale report whose cluster's word lapsed counts nothing",
    ),
    pytest.param(
        evidence(NOT_REPORTED, observed={"east/serve/workload": NO_NAMESPACE}),
        "False",
        "Creating",
        NOW,
        id="a workload the provider cannot apply has no pods, report or not",
    ),
]


@pytest.mark.parametrize(("given", "status", "reason", "since"), CASES)
def test_pods_created(given, status, reason, since):
    verdict = pods_created.judge(given)
    assert (verdict.condition.status, verdict.condition.reason) == (status, reason)
    assert verdict.missing_since == since


@pytest.mark.parametrize(
    ("observed", "why"),
    [
        pytest.param(
            {"east/serve/workload": REFUSED_DEPLOYMENT},
            f"the Deployment reports FailedCreate: {POD_SECURITY}",
            id="Pod Security, through the Deployment's ReplicaFailure",
        ),
        pytest.param(
            {"east/serve/workload": NO_NAMESPACE},
            'cannot apply the Deployment: cannot create object: namespaces "team-a" not found '
            "(namespace team-a is composed on the cluster by the replica's ModelDeployment, "
            "once it places a replica there)",
            id="a missing namespace, through the Object's Synced condition, naming who composes it",
        ),
        pytest.param(
            {
                "east/serve/workload": workload(
                    "Deployment",
                    synced=False,
                    synced_message='cannot create object: namespaces "team-b" not found',
                )
            },
            'cannot apply the Deployment: cannot create object: namespaces "team-b" not found',
            id="another namespace missing is quoted as the provider says it",
        ),
        pytest.param(
            {
                "east/namespace": workload(
                    "Namespace",
                    synced=False,
                    synced_message='admission webhook "deny.example" denied the request',
                ),
                "east/serve/workload": REFUSED_DEPLOYMENT,
            },
            'cannot apply the Namespace: admission webhook "deny.example" denied the request',
            id="an object the provider cannot apply comes first",
        ),
        pytest.param(
            {"east/model/workload": workload("LeaderWorkerSet")},
            pods_created.LWS_SAYS_NOTHING,
            id="a LeaderWorkerSet reports no cause, and the message says where it is",
        ),
        pytest.param(
            {"east/serve/workload": workload("Deployment")},
            "the workload cluster gives no cause",
            id="no cause anywhere",
        ),
    ],
)
def test_the_message_quotes_the_workload_clusters_reason(observed, why):
    creating = pods_created.judge(evidence(observed=observed))
    assert creating.condition.message == (
        f"waiting for the workload cluster to create the replica's pods: {why}"
    )
    released = pods_created.judge(evidence(observed=observed, since=NOW - timedelta(minutes=6)))
    assert released.condition.message == (
        "the workload cluster did not create the replica's pods within 5m, "
        f"so it holds no capacity: {why}"
    )


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param(
            evidence(report(0), since=NOW - timedelta(minutes=1)),
            NOW + timedelta(minutes=4, seconds=1),
            id="creating: the first instant past the grace",
        ),
        pytest.param(evidence(report(2)), None, id="created: no deadline"),
        pytest.param(
            evidence(report(0), since=NOW - timedelta(minutes=6)),
            None,
            id="not created already: no deadline",
        ),
    ],
)
def test_the_grace_deadline_is_when_a_creating_replica_turns_not_created(given, expected):
    verdict = pods_created.judge(given)
    assert pods_created.grace_expires_at(verdict, GRACE) == expected
