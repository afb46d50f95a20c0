"""Admission re-checks the namespace's device quota at its commit point (quota_gate.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from compose_model_replica.fn import FunctionRunner
from compose_model_replica.readers import (
    CLUSTER_REQUIREMENT,
    NAMESPACE_REPLICAS_REQUIREMENT,
    QUOTAS_REQUIREMENT,
    REPLICAS_REQUIREMENT,
)
from modelplane_common.capacity.admission import ADMITTED, OVERCOMMITTED, WAITING
from modelplane_testkit import admission_builders as a
from modelplane_testkit import deployment_builders as t
from modelplane_testkit.wire import conditions, desired_status, request, run

NOW = t.NOW
OLD = NOW - timedelta(minutes=1)
OLDER = NOW - timedelta(minutes=2)
GPU = "gpu.example.com"
ROOMY = t.cluster(
    "east", [t.pool("h100", 4, histogram=[({"gpu": 8}, 4)], observed_at=t.ago(seconds=1))]
)
QUOTA_8 = t.device_quota({GPU: 8})


def call(me, quotas, namespace_replicas=None):
    required = {CLUSTER_REQUIREMENT: [ROOMY], REPLICAS_REQUIREMENT: [me]}
    if quotas is not None:
        required[QUOTAS_REQUIREMENT] = quotas
    if namespace_replicas is not None:
        required[NAMESPACE_REPLICAS_REQUIREMENT] = [me, *namespace_replicas]
    return run(FunctionRunner(clock=lambda: NOW), request(me, {}, required))


def admitted(rsp):
    _, reason, message = conditions(rsp)["Admitted"]
    return reason, message


@pytest.mark.parametrize(
    ("namespace_replicas", "verdict"),
    [
        pytest.param([], ADMITTED, id="alone under the quota: admitted"),
        pytest.param(
            [a.in_flight("x-0", OLDER, cluster="west")],
            OVERCOMMITTED,
            id="an earlier in-flight replica of the namespace on another cluster goes first",
        ),
        pytest.param(
            [a.in_flight("x-0", NOW - timedelta(seconds=30), cluster="west")],
            ADMITTED,
            id="one placed later waits behind it",
        ),
        pytest.param(
            [a.in_flight("x-0", NOW, cluster="west", verdict=ADMITTED)],
            OVERCOMMITTED,
            id="an admitted replica of the namespace counts whenever it was placed",
        ),
        pytest.param(
            [a.in_flight("x-0", OLDER, cluster="west", verdict=OVERCOMMITTED)],
            ADMITTED,
            id="an overcommitted one holds nothing",
        ),
        pytest.param(
            [a.in_flight("x-0", OLDER, cluster="west", namespace="team-b")],
            ADMITTED,
            id="another namespace's replicas do not count",
        ),
    ],
)
def test_the_quota_is_replayed_in_queue_order_fleet_wide(namespace_replicas, verdict):
    me = a.in_flight("me-0", OLD)
    reason, message = admitted(call(me, [QUOTA_8], namespace_replicas))
    assert reason == verdict
    if verdict == OVERCOMMITTED:
        assert message == (
            "QuotaExceeded: namespace team-a quota devices allows 8 gpu.example.com device(s): "
            "8 used, a replica requests 8"
        )


def orphan(**fields) -> dict:
    """x-0, on another cluster, orphaned (its deployment deleted with --cascade=orphan)."""
    return a.in_flight("x-0", OLDER, cluster="west", pods_created="Orphaned", **fields)


@pytest.mark.parametrize(
    "fellow",
    [
        pytest.param(orphan(), id="an orphan still waiting for its verdict"),
        pytest.param(orphan(verdict=ADMITTED), id="an admitted orphan"),
        pytest.param(
            orphan(copies=2, verdict=ADMITTED, charged_copies=1, grown_at=OLDER),
            id="an orphan admitted at 1 copy whose growth to 2 is in flight",
        ),
        pytest.param(
            a.in_flight(
                "x-0",
                OLDER,
                cluster="west",
                verdict=ADMITTED,
                charged_copies=1,
                pods_created="NotCreated",
            ),
            id="an admitted replica whose pods were refused past the grace",
        ),
    ],
)
def test_a_released_replica_holds_none_of_its_namespaces_quota(fellow):
    assert admitted(call(a.in_flight("me-0", OLD), [QUOTA_8], [fellow]))[0] == ADMITTED


def test_an_orphan_within_its_grace_reads_as_charged_until_it_says_it_is_orphaned():
    """The premise of the cases above: the same fellow without its PodsCreated is charged."""
    fellow = a.in_flight("x-0", OLDER, cluster="west", pods_created="Creating")
    assert admitted(call(a.in_flight("me-0", OLD), [QUOTA_8], [fellow]))[0] == OVERCOMMITTED


def test_the_overcommitted_verdict_is_recorded_with_the_quota():
    me = a.in_flight("me-0", OLD)
    rsp = call(me, [QUOTA_8], [a.in_flight("x-0", OLDER, cluster="west")])
    record = desired_status(rsp)["admission"]
    assert record["verdict"] == OVERCOMMITTED
    assert record["message"] == (
        "QuotaExceeded: namespace team-a quota devices allows 8 gpu.example.com device(s): "
        "8 used, a replica requests 8"
    )


@pytest.mark.parametrize(
    ("quotas", "namespace_replicas", "why"),
    [
        pytest.param(
            None, None, "the namespace's ResourceQuotas are not fetched yet", id="quotas unfetched"
        ),
        pytest.param(
            [QUOTA_8],
            None,
            "the namespace's ModelReplicas are not fetched yet",
            id="under a quota, the namespace's replicas unfetched",
        ),
    ],
)
def test_admission_waits_for_the_quota_inputs(quotas, namespace_replicas, why):
    reason, message = admitted(call(a.in_flight("me-0", OLD), quotas, namespace_replicas))
    assert reason == WAITING
    assert why in message


def test_without_a_device_quota_the_namespace_replicas_are_not_needed():
    assert admitted(call(a.in_flight("me-0", OLD), [], None))[0] == ADMITTED


def test_a_decided_verdict_is_not_rejudged_when_the_quota_drops():
    me = a.in_flight("me-0", OLD, verdict=ADMITTED)
    crowd = [a.in_flight(f"x-{i}", OLDER, cluster="west", verdict=ADMITTED) for i in range(3)]
    assert admitted(call(me, [QUOTA_8], crowd))[0] == ADMITTED


@pytest.mark.parametrize(
    ("quotas", "required"),
    [
        pytest.param(None, {QUOTAS_REQUIREMENT}, id="first the ResourceQuotas"),
        pytest.param([], {QUOTAS_REQUIREMENT}, id="no device quota: nothing more"),
        pytest.param(
            [QUOTA_8],
            {QUOTAS_REQUIREMENT, NAMESPACE_REPLICAS_REQUIREMENT},
            id="under a device quota, the namespace's replicas too",
        ),
    ],
)
def test_requirements_in_two_steps(quotas, required):
    rsp = call(a.in_flight("me-0", OLD), quotas, None)
    wanted = set(rsp.requirements.resources) & {QUOTAS_REQUIREMENT, NAMESPACE_REPLICAS_REQUIREMENT}
    assert wanted == required
    for name in wanted:
        assert rsp.requirements.resources[name].namespace == "team-a"


def test_a_decided_replica_requires_no_quota_input():
    rsp = call(a.in_flight("me-0", OLD, verdict=ADMITTED), [QUOTA_8], [])
    assert QUOTAS_REQUIREMENT not in rsp.requirements.resources
    assert NAMESPACE_REPLICAS_REQUIREMENT not in rsp.requirements.resources


# --- a verdict binds the shape it charged (design/admission.md, "A verdict binds its shape") ---

GROWTH_NOT_ADMITTED = "GrowthNotAdmitted"
QUOTA_16 = t.device_quota({GPU: 16})


def grown(copies, charged_copies, **fields):
    """me-0, Admitted for its placement at `charged_copies` copies of 8 GPUs, its spec
    now at `copies`."""
    return a.in_flight(
        "me-0", OLDER, copies=copies, verdict=ADMITTED, charged_copies=charged_copies, **fields
    )


@pytest.mark.parametrize(
    ("me", "quotas", "namespace_replicas", "verdict", "says"),
    [
        pytest.param(
            grown(3, 1, grown_at=OLD),
            [QUOTA_8],
            [],
            GROWTH_NOT_ADMITTED,
            "QuotaExceeded: namespace team-a quota devices allows 8 gpu.example.com device(s): "
            "8 used, a replica requests 16",
            id="a replica grown past its quota keeps its admitted shape and is refused the growth",
        ),
        pytest.param(
            grown(2, 1, grown_at=OLD),
            [QUOTA_16],
            [],
            ADMITTED,
            "admitted: it fits",
            id="a growth that fits the quota is admitted",
        ),
        pytest.param(
            grown(2, 1, grown_at=OLD),
            [QUOTA_16],
            [a.in_flight("x-0", OLDER - timedelta(minutes=1), cluster="west")],
            GROWTH_NOT_ADMITTED,
            "QuotaExceeded",
            id="a growth is behind a replica placed before the growth was seen",
        ),
        pytest.param(
            grown(2, 1, grown_at=OLD),
            [QUOTA_16],
            [a.in_flight("x-0", NOW - timedelta(seconds=30), cluster="west")],
            ADMITTED,
            "admitted: it fits",
            id="a replica placed after the growth was seen is behind it",
        ),
        pytest.param(
            grown(2, 1),
            [QUOTA_16],
            [],
            GROWTH_NOT_ADMITTED,
            "no placement time",
            id="a growth first seen is not judged before its queue time is recorded",
        ),
        pytest.param(
            grown(2, 1, grown_at=NOW - timedelta(seconds=3)),
            [QUOTA_16],
            [],
            GROWTH_NOT_ADMITTED,
            "settling",
            id="a growth waits the commit delay after it was seen",
        ),
        pytest.param(
            grown(2, 1, grown_at=OLD),
            [QUOTA_16],
            None,
            GROWTH_NOT_ADMITTED,
            "the namespace's ModelReplicas are not fetched yet",
            id="a growth whose quota inputs are not fetched keeps its admitted shape",
        ),
        pytest.param(
            grown(1, 2),
            [QUOTA_8],
            None,
            ADMITTED,
            "admitted",
            id="a shrink keeps its verdict without reading the quota",
        ),
    ],
)
def test_a_verdict_binds_the_shape_it_charged(me, quotas, namespace_replicas, verdict, says):
    rsp = call(me, quotas, namespace_replicas)
    status, reason, message = conditions(rsp)["Admitted"]
    assert (status, reason) == ("True", verdict)
    assert says in message


def test_a_growth_first_seen_records_when_and_keeps_the_charged_shape():
    me = grown(2, 1)
    rsp = call(me, [QUOTA_16], [])
    record = desired_status(rsp)["admission"]
    assert record["grownAt"] == "2025-06-01T12:00:00Z"
    assert record["charged"] == me["status"]["admission"]["charged"]
    assert record["verdict"] == ADMITTED


def test_an_admitted_growth_records_the_new_shape_and_forgets_when_it_grew():
    me = grown(2, 1, grown_at=OLD)
    rsp = call(me, [QUOTA_16], [])
    record = desired_status(rsp)["admission"]
    assert [e["copies"] for e in record["charged"]["engines"]] == [2]
    assert "grownAt" not in record
    assert record["decidedAt"] == "2025-06-01T12:00:00Z"


def test_a_shrink_lowers_the_recorded_shape():
    rsp = call(grown(1, 2), [QUOTA_8], None)
    assert [e["copies"] for e in desired_status(rsp)["admission"]["charged"]["engines"]] == [1]


@pytest.mark.parametrize(
    ("fellow", "verdict"),
    [
        pytest.param(
            grown(2, 1, grown_at=OLDER, cluster="west"),
            OVERCOMMITTED,
            id="a fellow's growth seen before I was placed goes first",
        ),
        pytest.param(
            grown(2, 1, grown_at=NOW - timedelta(seconds=30), cluster="west"),
            ADMITTED,
            id="a fellow's growth seen after I was placed waits behind me",
        ),
        pytest.param(
            grown(2, 1, cluster="west"),
            ADMITTED,
            id="a fellow's growth not yet seen is queued last",
        ),
        pytest.param(
            grown(3, 2, grown_at=NOW - timedelta(seconds=30), cluster="west"),
            OVERCOMMITTED,
            id="a grown fellow is charged at least the shape its verdict charged",
        ),
        pytest.param(
            grown(1, 2, cluster="west"),
            OVERCOMMITTED,
            id="a fellow's shrink not yet recorded is charged what its verdict charged",
        ),
    ],
)
def test_fellows_charge_a_grown_replica_its_held_shape_and_queue_its_growth(fellow, verdict):
    fellow["metadata"]["name"] = "g-0"
    me = a.in_flight("x-0", OLD)
    assert admitted(call(me, [QUOTA_16], [fellow]))[0] == verdict
