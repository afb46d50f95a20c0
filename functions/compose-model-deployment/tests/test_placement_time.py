"""When a move counts as placed (placement_time.py; design/scheduler.md): one rule per case."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from compose_model_deployment.placement import Change
from modelplane_common.timeutil import parse_time
from modelplane_testkit import deployment_builders as t

FULL = {"gpu": 8}
EMPTY = {"gpu": 8}
GRACE = {"unschedulableGracePeriod": "2m", "avoidFor": "30m"}


def fleet(*, b_taints=(), observed_at: str | None = None) -> list[dict]:
    """Cluster a: one empty 8-GPU node; cluster b: one node, full (our replica runs there)."""
    return [
        t.cluster("a", [t.pool("p", 1, histogram=[(EMPTY, 1)], observed_at=observed_at)]),
        t.cluster(
            "b",
            [t.pool("p", 1, histogram=[({"gpu": 0}, 1)], observed_at=observed_at)],
            taints=list(b_taints),
        ),
    ]


def on_b(**status) -> dict:
    """Our replica on b/p, placed an hour ago unless said otherwise."""
    return {"replica-0": t.running_replica(0, "b", **status)}


def stuck(since: str, placed_at: str = t.ago(60)) -> dict:
    return on_b(
        pods_scheduled="False",
        reason="Unschedulable",
        since=since,
        ready=False,
        placed_at=placed_at,
    )


def overcommitted(decided_at: str, placed_at: str) -> dict:
    own = on_b(pods_scheduled="Unknown", reason="NotAdmitted", ready=False, placed_at=placed_at)
    own["replica-0"]["status"]["admission"] = {
        "placedAt": placed_at,
        "verdict": "Overcommitted",
        "decidedAt": decided_at,
    }
    return own


def at(text: str) -> datetime:
    return parse_time(text)


SECOND = timedelta(seconds=1)
TEN = timedelta(seconds=10)

CASES = [
    pytest.param(
        stuck(since=t.ago(2, seconds=5)),
        fleet(),
        at(t.ago(2, seconds=5)) + timedelta(minutes=2) + TEN,
        id="unschedulable: ten seconds after its grace ran out, not when the pass ran",
    ),
    pytest.param(
        stuck(since=t.ago(60), placed_at=t.ago(61)),
        fleet(),
        at(t.ago(1)),
        id="moved long after its failure fell due: no earlier than the view's newest observation",
    ),
    pytest.param(
        overcommitted(decided_at=t.ago(0.5), placed_at=t.ago(1)),
        fleet(),
        at(t.ago(0.5)) + TEN,
        id="overcommitted: ten seconds after the verdict",
    ),
    pytest.param(
        overcommitted(decided_at=t.ago(seconds=40), placed_at=t.ago(seconds=20)),
        fleet(),
        at(t.ago(seconds=20)) + SECOND,
        id="never at or before the placement it replaces, whatever the verdict's time says",
    ),
    pytest.param(
        on_b(placed_at=t.ago(60)),
        fleet(b_taints=[{"key": "drain", "value": "now", "effect": "NoExecute"}]),
        at(t.ago(1)) + TEN,
        id="drained NoExecute: ten seconds after the view's newest observation",
    ),
]


@pytest.mark.parametrize(("own", "clusters", "stamp"), CASES)
def test_a_move_is_dated_from_the_view(own, clusters, stamp):
    xr = t.deployment(replicas=1, engines=[t.standalone(gpus=8)], healing=GRACE)
    (replica,) = t.schedule(xr, clusters, own).replicas
    assert (replica.cluster, replica.change) == ("a", Change.MOVED)
    assert replica.placed_at == stamp
    later = t.schedule(xr, clusters, own, now=t.NOW + timedelta(seconds=30))
    assert later.replicas[0].placed_at == stamp, "the same view decided later"


def test_a_heartbeat_between_two_timely_heals_of_one_failure_keeps_the_stamp():
    xr = t.deployment(replicas=1, engines=[t.standalone(gpus=8)], healing=GRACE)
    own = stuck(since=t.ago(2, seconds=5))
    first = t.schedule(xr, fleet(observed_at=t.ago(seconds=50)), own)
    second = t.schedule(xr, fleet(observed_at=t.ago(seconds=1)), own)
    assert first.replicas[0].placed_at == second.replicas[0].placed_at


def test_a_moved_replica_still_showing_the_old_unschedulable_condition_stays():
    """With a grace under a second, the stamp is still after the condition that moved it, so
    the next pass reads that condition as the old placement's."""
    xr = t.deployment(
        replicas=1,
        engines=[t.standalone(gpus=8)],
        healing={"unschedulableGracePeriod": "500ms", "avoidFor": "30m"},
    )
    own = stuck(since=t.ago(seconds=30))
    (moved,) = t.schedule(xr, fleet(), own).replicas
    assert moved.cluster == "a"
    body = own["replica-0"]
    body["spec"]["clusterName"] = "a"
    body["metadata"]["labels"]["modelplane.ai/cluster"] = "a"
    body["metadata"]["annotations"]["modelplane.ai/placed-at"] = moved.placed_at.isoformat()
    plan = t.schedule(xr, fleet(), own)
    assert not plan.healed
    assert (plan.replicas[0].cluster, plan.replicas[0].placed_at) == ("a", moved.placed_at)


def test_a_kept_replica_without_a_placement_time_is_given_its_creation_time():
    own = on_b(placed_at=None)
    own["replica-0"]["metadata"]["creationTimestamp"] = t.ago(90)
    xr = t.deployment(replicas=1, engines=[t.standalone(gpus=8)])
    (kept,) = t.schedule(xr, fleet(), own).replicas
    assert (kept.change, kept.placed_at) == (Change.KEPT, at(t.ago(90)))


def test_replicas_drained_by_one_taint_share_one_stamp():
    """One cause, one time, as replicas placed in one pass always had: admission's queue
    (capacity.admission.queue_order) then orders them by namespace and name."""
    own = {f"replica-{i}": t.running_replica(i, "b", placed_at=t.ago(60 - i)) for i in range(2)}
    roomy = [
        t.cluster("a", [t.pool("p", 2, histogram=[(EMPTY, 2)])]),
        t.cluster("b", [t.pool("p", 2)], taints=[{"key": "d", "value": "", "effect": "NoExecute"}]),
    ]
    xr = t.deployment(replicas=2, engines=[t.standalone(gpus=8)])
    plan = t.schedule(xr, roomy, own)
    assert [(r.name, r.cluster, r.change) for r in plan.replicas] == [
        ("llm-0", "a", Change.MOVED),
        ("llm-1", "a", Change.MOVED),
    ]
    assert plan.replicas[0].placed_at == plan.replicas[1].placed_at == at(t.ago(1)) + TEN
