"""How the scheduler reads admission (design/admission.md): one rule per case."""

from __future__ import annotations

from datetime import timedelta

import pytest
from compose_model_deployment import fn
from compose_model_deployment.placement import Change
from modelplane_testkit import deployment_builders as t
from modelplane_testkit.wire import conditions
from modelplane_testkit.wire import desired_status as xr_status

FULL = {"gpu": 8}
PLACED = t.ago(1)


def clusters():
    return [
        t.cluster("a", [t.pool("p", 1, histogram=[(FULL, 1)])]),
        t.cluster("b", [t.pool("p", 1, histogram=[(FULL, 1)])]),
    ]


def mine(verdict=None, *, placed_at=PLACED, record_for=None, waiting=False, decided_at=None):
    """Our replica on a/p, in flight, with what its cluster said about its admission."""
    body = t.model_replica(
        "llm-0",
        "team-a",
        "a",
        [t.replica_engine("serve", "p", gpus=8)],
        deployment_name="llm",
        index=0,
        pods_scheduled="False",
        reason="WaitingForPods",
        since=placed_at,
        ready=False,
        placed_at=placed_at,
    )
    if verdict is not None:
        body["status"]["admission"] = {
            "placedAt": record_for or placed_at,
            "verdict": verdict,
            "message": "engine serve does not fit pool p",
        }
        if decided_at is not None:
            body["status"]["admission"]["decidedAt"] = decided_at
    if waiting:
        body["status"]["conditions"].append(
            {"type": "Admitted", "status": "False", "reason": "WaitingForAdmission"}
        )
    return {"replica-0": body}


CASES = [
    pytest.param(mine("Overcommitted"), "b", True, 1, id="overcommitted: re-placed at once"),
    pytest.param(
        mine("Overcommitted", record_for=t.ago(5)),
        "a",
        False,
        1,
        id="an overcommitted verdict for an earlier placement is not acted on",
    ),
    pytest.param(mine("Admitted"), "a", False, 1, id="admitted: kept and scheduled"),
    pytest.param(mine(waiting=True), "a", False, 0, id="waiting: kept, placed but not scheduled"),
    pytest.param(mine(), "a", False, 1, id="nothing said yet: kept and scheduled"),
]


@pytest.mark.parametrize(("own", "cluster", "healed", "scheduled"), CASES)
def test_admission_verdicts(own, cluster, healed, scheduled):
    plan = t.schedule(t.deployment(replicas=1, engines=[t.standalone(gpus=8)]), clusters(), own)
    assert [r.cluster for r in plan.replicas] == [cluster]
    assert bool(plan.healed) is healed
    assert plan.scheduled == scheduled


def test_an_overcommitted_replica_remembers_its_pool_without_a_grace_period():
    plan = t.schedule(
        t.deployment(replicas=1, engines=[t.standalone(gpus=8)]), clusters(), mine("Overcommitted")
    )
    (failure,) = plan.failed_placements
    assert (failure.cluster, failure.pool, failure.expires_at) == (
        "a",
        "p",
        t.NOW + timedelta(minutes=30),
    )
    assert failure.reason == "was not admitted on its cluster: engine serve does not fit pool p"
    assert plan.replicas[0].change is Change.MOVED


def other(verdict):
    body = t.model_replica(
        "other-0",
        "team-b",
        "a",
        [t.replica_engine("serve", "p", gpus=8)],
        deployment_name="other",
        pods_scheduled="False",
        reason="WaitingForPods",
        ready=False,
        placed_at=PLACED,
    )
    if verdict is not None:
        body["status"]["admission"] = {"placedAt": PLACED, "verdict": verdict}
    return body


@pytest.mark.parametrize(
    ("verdict", "cluster"),
    [
        pytest.param(None, "b", id="another deployment's waiting replica is charged"),
        pytest.param("Admitted", "b", id="another deployment's admitted replica is charged"),
        pytest.param("Overcommitted", "a", id="another deployment's overcommitted one is not"),
    ],
)
def test_other_replicas_are_charged_unless_overcommitted(verdict, cluster):
    plan = t.schedule(
        t.deployment(replicas=1, engines=[t.standalone(gpus=8)]),
        clusters(),
        others=[other(verdict)],
    )
    assert [r.cluster for r in plan.replicas] == [cluster]


def test_a_deployment_whose_replica_waits_says_so():
    xr = t.deployment(replicas=1, engines=[t.standalone(gpus=8)])
    rsp = fn.run_function(
        t.request(xr, clusters(), [], mine(waiting=True)), t.NOW, t.stand_in_matcher
    )
    status, reason, message = conditions(rsp)["ReplicasScheduled"]
    assert (status, reason) == ("False", "WaitingForAdmission")
    assert message == (
        "1 replica(s) placed and waiting for their cluster to admit them; 0 of 1 scheduled"
    )
    assert xr_status(rsp)["replicas"]["scheduled"] == 0


@pytest.mark.parametrize(
    ("decided", "change", "avoided"),
    [
        pytest.param(t.ago(1), Change.STRANDED, True, id="refused a minute ago: avoided, left"),
        pytest.param(
            t.ago(31),
            Change.MOVED,
            False,
            id="refused longer than avoidFor ago: its pool is tried again, with a new placement",
        ),
    ],
)
def test_an_overcommitted_replica_with_nowhere_else_to_go_returns_once_avoidance_ends(
    decided, change, avoided
):
    only_a = clusters()[:1]
    own = mine("Overcommitted", placed_at=t.ago(40), decided_at=decided)
    plan = t.schedule(t.deployment(replicas=1, engines=[t.standalone(gpus=8)]), only_a, own)
    (replica,) = plan.replicas
    assert (replica.cluster, replica.change) == ("a", change)
    assert bool(plan.failed_placements) is avoided
    if change is Change.MOVED:
        # A new placement, so its admission starts over: dated from the view, never from
        # the clock. Its verdict is 31 minutes old, so it is stamped at the view's newest
        # observation (a minute ago), not at the verdict (placement_time.py).
        assert replica.placed_at == t.NOW - timedelta(minutes=1)
