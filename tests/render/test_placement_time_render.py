"""The placement time admission queues by, through the real CLI (design/admission.md).

- The scheduler stamps `modelplane.ai/placed-at` to the microsecond, and a
  replica placed before that (a stamp to the second) keeps its stamp verbatim,
  so the verdict recorded for it still binds.
- A stamp outside [creationTimestamp - 60s, now + 60s] is not believed: the
  replica is queued at its creationTimestamp and says so, naming the stamp.
  A forged early stamp no longer jumps the queue.
- A replica whose cluster label is not its spec.clusterName is not judged:
  its cluster's other replicas, which select by that label, cannot see it.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest
from modelplane_common import labels
from modelplane_common.timeutil import format_placement_time, format_time, parse_time
from modelplane_devtools import render
from modelplane_testkit.rendered import by_kind, composite, condition, results

from tests.render.test_admission_render import (
    composed,
    deployment,
    deployments_of,
    fleet,
    place,
)

REPLICA = render.ROOT / "apis/modelreplica/composition.yaml"
FORGED = "2000-01-01T00:00:00Z"


def existing(replica: dict, placed_at: str, created: datetime, status: dict | None = None) -> dict:
    """A composed ModelReplica as the API server holds it: its stamp and creation time."""
    body = copy.deepcopy(replica)
    body["metadata"]["annotations"][labels.PLACED_AT] = placed_at
    body["metadata"]["creationTimestamp"] = format_time(created)
    if status is not None:
        body["status"] = status
    return body


def placed(functions, name: str, namespace: str, observed=None) -> dict:
    (replica,) = by_kind(
        place(functions, deployment(name, namespace), observed=observed), "ModelReplica"
    )
    return replica


def admit(functions, replica: dict, both: list[dict]) -> list[dict]:
    return functions.render(replica, REPLICA, required=[*fleet(), *both, *deployments_of(both)])


def warnings(rendered: list[dict]) -> list[str]:
    return [r["message"] for r in results(rendered) if r.get("severity") == "Warning"]


def test_the_scheduler_stamps_placed_at_to_the_microsecond(functions):
    before = datetime.now(UTC)
    replica = placed(functions, "alpha", "team-a")
    after = datetime.now(UTC)
    stamp = replica["metadata"]["annotations"][labels.PLACED_AT]
    # A stamp cut to the second would lie before `before` (unless the render began on a
    # whole second): the stamp is the pass's own time, to the microsecond.
    assert before <= parse_time(stamp) <= after, (before, stamp, after)
    assert stamp == format_placement_time(parse_time(stamp))


def test_a_replica_placed_with_a_second_precision_stamp_keeps_it_and_its_verdict(functions):
    now = datetime.now(UTC)
    old_stamp = format_time(now - timedelta(minutes=5))
    replica = placed(functions, "alpha", "team-a")
    admitted = {"admission": {"placedAt": old_stamp, "verdict": "Admitted"}}
    observed = existing(replica, old_stamp, now - timedelta(minutes=5), admitted)

    again = placed(functions, "alpha", "team-a", observed=[observed])
    assert again["metadata"]["annotations"][labels.PLACED_AT] == old_stamp

    rendered = admit(functions, observed, [observed])
    assert condition(composite(rendered), "Admitted")["status"] == "True"
    assert composite(rendered)["status"]["admission"]["placedAt"] == old_stamp


def _race(functions, forged_stamp: str) -> tuple[list[dict], list[dict]]:
    """Honest (placed and created 60 s ago) and forger (created 30 s ago, stamped
    `forged_stamp`) race for east/h100's one free node; both rendered."""
    now = datetime.now(UTC)
    honest_at = now - timedelta(seconds=60)
    honest = existing(
        placed(functions, "honest", "team-a"), format_placement_time(honest_at), honest_at
    )
    forger = existing(
        placed(functions, "forger", "team-b"), forged_stamp, now - timedelta(seconds=30)
    )
    both = [honest, forger]
    return admit(functions, honest, both), admit(functions, forger, both)


@pytest.mark.parametrize(
    "stamp",
    [
        pytest.param(FORGED, id="a-stamp-before-its-creation-is-queued-at-its-creation"),
        pytest.param(
            format_time(datetime.now(UTC) + timedelta(hours=1)),
            id="a-stamp-from-the-future-is-queued-at-its-creation",
        ),
    ],
)
def test_an_implausible_placed_at_is_replaced_by_the_creation_time_and_reported(functions, stamp):
    honest, forger = _race(functions, stamp)
    assert condition(composite(honest), "Admitted")["status"] == "True"
    assert composed(honest) == [
        "east/observation",
        "east/serve/claims-standalone",
        "east/serve/workload",
    ]

    refused = condition(composite(forger), "Admitted")
    assert refused["reason"] == "Overcommitted", refused
    note = (
        'metadata.annotations["modelplane.ai/placed-at"]: outside [creationTimestamp - 60s, '
        "now + 60s]: queued at its creationTimestamp"
    )
    assert note in refused["message"] and f'(got "{stamp}")' in refused["message"], refused
    assert any(note in w and stamp in w for w in warnings(forger)), warnings(forger)
    assert composed(forger) == ["east/observation"]


def test_a_plausible_stamp_is_believed_and_reported_nowhere(functions):
    honest, _ = _race(functions, format_placement_time(datetime.now(UTC) - timedelta(seconds=35)))
    message = condition(composite(honest), "Admitted")["message"]
    assert "outside" not in message and not any("outside" in w for w in warnings(honest))


def test_a_replica_labelled_for_another_cluster_is_not_judged_and_says_why(functions):
    now = datetime.now(UTC)
    replica = existing(
        placed(functions, "alpha", "team-a"),
        format_placement_time(now - timedelta(minutes=1)),
        now - timedelta(minutes=1),
    )
    replica["metadata"]["labels"][labels.CLUSTER] = "west"
    rendered = admit(functions, replica, [replica])

    waiting = condition(composite(rendered), "Admitted")
    expected = (
        'not judged: metadata.labels["modelplane.ai/cluster"]: must equal spec.clusterName '
        "'east', the cluster whose queue it is judged in (got \"west\")"
    )
    assert (waiting["status"], waiting["reason"], waiting["message"]) == (
        "False",
        "WaitingForAdmission",
        expected,
    )
    assert composed(rendered) == ["east/observation"]
    assert any('metadata.labels["modelplane.ai/cluster"]' in w for w in warnings(rendered))
