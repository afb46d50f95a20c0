"""A ModelDeployment's own Ready: the rule, and what RunFunction tells Crossplane."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from compose_model_deployment import fn, readiness
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_testkit import deployment_builders as t
from modelplane_testkit.wire import conditions, desired
from modelplane_testkit.wire import desired_status as xr_status

MATCHER = fn.default_matcher()
FULL = {"gpu": 8}
# Three whole 8-GPU nodes in all: room for three 8-GPU replicas.
CLUSTERS = [
    t.cluster("a", [t.pool("p", 2, histogram=[(FULL, 2)])]),
    t.cluster("b", [t.pool("p", 1, histogram=[(FULL, 1)])]),
]
EIGHT_GPUS = [t.standalone(gpus=8)]


def running(index: int, *, ready: bool = True) -> dict[str, dict]:
    """Our replica `index`, on cluster b, observed with its pods scheduled and `ready`."""
    return {f"replica-{index}": t.running_replica(index, "b", ready=ready)}


def was(ready: str | None, xr: dict) -> dict:
    """The deployment as Crossplane last wrote it, its own Ready condition `ready`."""
    if ready is not None:
        xr.setdefault("status", {})["conditions"] = [
            {"type": "Ready", "status": ready, "reason": "Available"}
        ]
    return xr


def unreadable_replicas(ready: str | None) -> dict:
    xr = was(ready, t.deployment(engines=EIGHT_GPUS))
    xr["spec"]["replicas"] = "two"
    return xr


# --- the rule --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("desired", "ready", "expected"),
    [
        pytest.param(0, 0, (True, readiness.SCALED_TO_ZERO), id="scaled to zero is ready"),
        pytest.param(3, 3, (True, readiness.ALL_READY), id="every replica ready is ready"),
        pytest.param(1, 1, (True, readiness.ALL_READY), id="a single ready replica is ready"),
        pytest.param(3, 2, (False, readiness.NOT_READY), id="one replica short is not ready"),
        pytest.param(3, 0, (False, readiness.NOT_READY), id="no replica ready is not ready"),
        pytest.param(1, 0, (False, readiness.NOT_READY), id="one wanted none ready is not ready"),
    ],
)
def test_ready_exactly_when_the_ready_replicas_reach_the_desired_count(desired, ready, expected):
    judged = readiness.of_replicas(desired, ready)
    assert (judged.ready, judged.reason) == expected
    assert f"{ready} of {desired} replicas ready" in judged.message


class Carried(NamedTuple):
    """The desired count is unreadable: the previous Ready, as far as the kept replicas allow."""

    spec: str
    previously_ready: bool
    kept: int
    kept_ready: int
    ready_after: bool


@pytest.mark.parametrize(
    "case",
    [
        Carried(
            spec="ready before and every kept replica ready stays ready",
            previously_ready=True,
            kept=2,
            kept_ready=2,
            ready_after=True,
        ),
        Carried(
            spec="ready before but a kept replica is not: not ready",
            previously_ready=True,
            kept=2,
            kept_ready=1,
            ready_after=False,
        ),
        Carried(
            spec="never ready before is never claimed",
            previously_ready=False,
            kept=2,
            kept_ready=2,
            ready_after=False,
        ),
        Carried(
            spec="ready before with nothing kept (scaled to zero) stays",
            previously_ready=True,
            kept=0,
            kept_ready=0,
            ready_after=True,
        ),
    ],
    ids=lambda case: case.spec,
)
def test_an_unknown_desired_count_carries_the_previous_readiness_as_far_as_replicas_allow(
    case: Carried,
):
    judged = readiness.carried(case.previously_ready, case.kept, case.kept_ready)
    assert (judged.ready, judged.reason) == (case.ready_after, readiness.DESIRED_UNKNOWN)
    assert judged.message.startswith("spec.replicas is unreadable")


class Held(NamedTuple):
    """Some replicas are held: the previous Ready, as far as their own last Ready allows."""

    spec: str
    previously_ready: bool
    desired: int
    ready: int  # replicas ready among those planned
    held: int
    held_ready: int  # held replicas whose last Ready was True
    ready_after: bool


@pytest.mark.parametrize(
    "case",
    [
        Held(
            spec="ready before, held replica last ready: stays",
            previously_ready=True,
            desired=2,
            ready=1,
            held=1,
            held_ready=1,
            ready_after=True,
        ),
        Held(
            spec="ready before, every replica held and ready",
            previously_ready=True,
            desired=1,
            ready=0,
            held=1,
            held_ready=1,
            ready_after=True,
        ),
        Held(
            spec="ready before, held replica was not: not ready",
            previously_ready=True,
            desired=2,
            ready=1,
            held=1,
            held_ready=0,
            ready_after=False,
        ),
        Held(
            spec="never ready before is never claimed",
            previously_ready=False,
            desired=2,
            ready=1,
            held=1,
            held_ready=1,
            ready_after=False,
        ),
        Held(
            spec="ready before but short even with held ones",
            previously_ready=True,
            desired=3,
            ready=1,
            held=1,
            held_ready=1,
            ready_after=False,
        ),
    ],
    ids=lambda case: case.spec,
)
def test_held_replicas_carry_the_previous_readiness_as_far_as_evidence_allows(case: Held):
    judged = readiness.while_held(
        case.previously_ready, case.desired, case.ready, case.held, case.held_ready
    )
    assert (judged.ready, judged.reason) == (case.ready_after, readiness.HELD)
    assert f"{case.held_ready} of {case.held} held" in judged.message


# --- RunFunction: desired.composite.ready and ReplicasReady say the same ---------------------

TRUE, FALSE = fnv1.READY_TRUE, fnv1.READY_FALSE

CASES = [
    pytest.param(
        t.request(t.deployment(replicas=1, engines=EIGHT_GPUS), CLUSTERS, [], running(0)),
        (TRUE, "AllReplicasReady"),
        id="all ready: every replica placed and ready",
    ),
    pytest.param(
        t.request(t.deployment(replicas=2, engines=EIGHT_GPUS), CLUSTERS, [], running(0)),
        (FALSE, "ReplicasNotReady"),
        id="short: one ready, the other just placed",
    ),
    pytest.param(
        t.request(
            t.deployment(replicas=1, engines=EIGHT_GPUS), CLUSTERS, [], running(0, ready=False)
        ),
        (FALSE, "ReplicasNotReady"),
        id="placed but its workloads not ready",
    ),
    pytest.param(
        t.request(t.deployment(replicas=2, engines=[t.standalone(gpus=16)]), CLUSTERS, []),
        (FALSE, "ReplicasNotReady"),
        id="none placed: nothing fits, nothing composed",
    ),
    pytest.param(
        t.request(t.deployment(replicas=0, engines=EIGHT_GPUS), CLUSTERS, []),
        (TRUE, "ScaledToZero"),
        id="scale to zero with nothing running",
    ),
    pytest.param(
        t.request(t.deployment(replicas=0, engines=EIGHT_GPUS), CLUSTERS, [], running(0)),
        (TRUE, "ScaledToZero"),
        id="scale to zero removing the last replica",
    ),
    pytest.param(
        t.request(t.deployment(replicas=1, engines=EIGHT_GPUS), None, None, running(0)),
        (TRUE, "AllReplicasReady"),
        id="inputs not fetched yet: a running deployment stays ready",
    ),
    pytest.param(
        t.request(t.deployment(replicas=2, engines=EIGHT_GPUS), None, None, running(0)),
        (FALSE, "ReplicasNotReady"),
        id="inputs not fetched yet: a short deployment stays not ready",
    ),
    pytest.param(
        t.request(t.deployment(replicas=1, engines=EIGHT_GPUS), None, None),
        (FALSE, "ReplicasNotReady"),
        id="inputs not fetched yet on the first call: not ready",
    ),
    pytest.param(
        t.request(t.deployment(replicas=1, engines=EIGHT_GPUS), [], [], running(0)),
        (TRUE, "AllReplicasReady"),
        id="no cluster selected: the running replica keeps the deployment ready",
    ),
    pytest.param(
        t.request(
            t.deployment(
                replicas=1, engines=[t.standalone(gpus=1, selectors=["device.driver =="])]
            ),
            CLUSTERS,
            [],
            running(0),
        ),
        (TRUE, "AllReplicasReady"),
        id="a selector that does not compile: the running replica keeps it ready",
    ),
    pytest.param(
        t.request(
            {**t.deployment(), "spec": {"replicas": 1, "template": {"spec": {"engines": []}}}},
            CLUSTERS,
            [],
            running(0),
        ),
        (TRUE, "AllReplicasReady"),
        id="an invalid template with a readable count is judged on the kept replicas",
    ),
    pytest.param(
        t.request(
            was("True", t.deployment(replicas=1, engines=EIGHT_GPUS)),
            CLUSTERS[:1],
            [],
            running(0),
        ),
        (TRUE, "ReplicasHeld"),
        id="its cluster momentarily missing: a running deployment stays ready",
    ),
    pytest.param(
        t.request(t.deployment(replicas=1, engines=EIGHT_GPUS), CLUSTERS[:1], [], running(0)),
        (FALSE, "ReplicasHeld"),
        id="its cluster missing and never ready before: not ready",
    ),
    pytest.param(
        t.request(unreadable_replicas("True"), CLUSTERS, [], running(0)),
        (TRUE, "DesiredReplicasUnknown"),
        id="unreadable spec.replicas, ready before and still serving: stays ready",
    ),
    pytest.param(
        t.request(unreadable_replicas(None), CLUSTERS, [], running(0)),
        (FALSE, "DesiredReplicasUnknown"),
        id="unreadable spec.replicas, never ready before: not ready",
    ),
    pytest.param(
        t.request(unreadable_replicas("True"), CLUSTERS, [], running(0, ready=False)),
        (FALSE, "DesiredReplicasUnknown"),
        id="unreadable spec.replicas, ready before but a kept replica is not: not ready",
    ),
]


@pytest.mark.parametrize(("req", "expected"), CASES)
def test_the_composite_ready_and_replicas_ready_agree(req, expected):
    rsp = fn.run_function(req, t.NOW, MATCHER)
    ready, reason = expected
    assert rsp.desired.composite.ready == ready
    status, got_reason, _ = conditions(rsp)[fn.READY]
    assert (status, got_reason) == ("True" if ready == TRUE else "False", reason)


def test_none_placed_composes_nothing_and_still_reads_not_ready():
    # Without an explicit answer Crossplane would call a deployment with no
    # composed resources Available.
    xr = t.deployment(replicas=2, engines=[t.standalone(gpus=16)])
    rsp = fn.run_function(t.request(xr, CLUSTERS, []), t.NOW, MATCHER)
    assert desired(rsp) == {}
    assert xr_status(rsp)["replicas"] == {"desired": 2, "scheduled": 0, "ready": 0}
    assert rsp.desired.composite.ready == FALSE
