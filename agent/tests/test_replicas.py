"""Table-driven specs of what the agent reports on a replica's pods (design/model-replica.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from compose_model_replica.pods_scheduled import AgentReport, Previous, judge, parse_report
from modelplane_agent.snapshot import pod_from
from modelplane_agent.state import CLAIMS, PODS, REPLICAS, ClusterState
from modelplane_agent.status import replica_status
from modelplane_testkit import agent_builders as t

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
KEY = ("team", "r")


KIND_OF = {"Pod": PODS, "ReplicaObservation": REPLICAS, "ResourceClaim": CLAIMS}


def run(*objects, events=()) -> ClusterState:
    state = ClusterState()
    for obj in objects:
        state.apply(KIND_OF[obj["kind"]], "ADDED", obj)
    for event, obj in events:
        state.apply(KIND_OF[obj["kind"]], event, obj)
    return state


def allocated(name: str, namespace: str = "team") -> dict:
    return t.claim(name, [("n1", "gpu-0")], namespace=namespace)


def pending(name: str, namespace: str = "team") -> dict:
    return t.claim(name, [], namespace=namespace)


def outcome(state: ClusterState):
    report = state.replica_report(KEY)
    c = report.condition
    return report.pods, report.scheduled_pods, c.status, c.reason, c.message


R = t.replica_observation()
HELD_BACK = "pod r-0 is bound; its ResourceClaim r-0-gpu is not seen allocated yet"
CASES = {
    "no matching pod yet is Pending, saying so": (
        [R],
        (0, 0, "False", "Pending", "no pod matches the selector"),
    ),
    "every pod bound is AllPodsBound": (
        [R, t.pod("r-0", node_name="n1"), t.pod("r-1", node_name="n2")],
        (2, 2, "True", "AllPodsBound", "every pod the selector matches is bound to a node"),
    ),
    "a pod not bound yet is Pending": (
        [R, t.pod("r-0", node_name="n1"), t.pod("r-1")],
        (2, 1, "False", "Pending", "some pods are not bound to a node yet"),
    ),
    "an unschedulable pod is quoted with its name, which names its workload": (
        [R, t.pod("r-lws-0", unschedulable="0/4 nodes are available: 4 Insufficient gpu.")],
        (
            1,
            0,
            "False",
            "Unschedulable",
            "pod r-lws-0: 0/4 nodes are available: 4 Insufficient gpu.",
        ),
    ),
    "among unschedulable pods the first by name is quoted": (
        [R, t.pod("r-b", unschedulable="b says"), t.pod("r-a", unschedulable="a says")],
        (2, 0, "False", "Unschedulable", "pod r-a: a says"),
    ),
    "Unschedulable wins over bound pods": (
        [R, t.pod("r-0", node_name="n1"), t.pod("r-1", unschedulable="no")],
        (2, 1, "False", "Unschedulable", "pod r-1: no"),
    ),
    "finished pods are not counted": (
        [R, t.pod("r-0", node_name="n1"), t.pod("r-old", node_name="n2", phase="Failed")],
        (1, 1, "True", "AllPodsBound", "every pod the selector matches is bound to a node"),
    ),
    "a replica of the same name in another namespace is not counted": (
        [R, t.pod("r-0", node_name="n1"), t.pod("r-x", namespace="other")],
        (1, 1, "True", "AllPodsBound", "every pod the selector matches is bound to a node"),
    ),
    "pods of another replica are not counted": (
        [R, t.pod("r-0", node_name="n1"), t.pod("s-0", replica="s")],
        (1, 1, "True", "AllPodsBound", "every pod the selector matches is bound to a node"),
    ),
    "a bound pod whose claim is not seen allocated yet is not counted scheduled": (
        [R, t.pod("r-0", node_name="n1", claims=["r-0-gpu"]), pending("r-0-gpu")],
        (1, 0, "False", "Pending", HELD_BACK),
    ),
    "a bound pod whose claim is not seen at all is not counted scheduled": (
        [R, t.pod("r-0", node_name="n1", claims=["r-0-gpu"])],
        (1, 0, "False", "Pending", HELD_BACK),
    ),
    "a bound pod whose every claim is seen allocated is scheduled": (
        [R, t.pod("r-0", node_name="n1", claims=["r-0-gpu"]), allocated("r-0-gpu")],
        (1, 1, "True", "AllPodsBound", "every pod the selector matches is bound to a node"),
    ),
    "a claim of the same name in another namespace does not count": (
        [R, t.pod("r-0", node_name="n1", claims=["r-0-gpu"]), allocated("r-0-gpu", "other")],
        (1, 0, "False", "Pending", HELD_BACK),
    ),
    "a template claim the pod's status names counts once allocated": (
        [
            R,
            t.pod("r-0", node_name="n1", template_claims={"gpu": "r-0-gpu-x7"}),
            allocated("r-0-gpu-x7"),
        ],
        (1, 1, "True", "AllPodsBound", "every pod the selector matches is bound to a node"),
    ),
    "a template claim the pod's status does not name yet holds the pod back": (
        [R, t.pod("r-0", node_name="n1", template_claims={"gpu": None})],
        (
            1,
            0,
            "False",
            "Pending",
            "pod r-0 is bound; its ResourceClaim for gpu is not seen allocated yet",
        ),
    ),
    "pods created before the observation are found": (
        [t.pod("r-0", node_name="n1"), R],
        (1, 1, "True", "AllPodsBound", "every pod the selector matches is bound to a node"),
    ),
}


@pytest.mark.parametrize(("objects", "expected"), list(CASES.values()), ids=list(CASES))
def test_replica_report(objects, expected):
    assert outcome(run(*objects)) == expected


def test_a_deleted_pod_is_no_longer_counted():
    state = run(R, t.pod("r-0", node_name="n1"), t.pod("r-1"), events=[("DELETED", t.pod("r-1"))])
    assert outcome(state)[:4] == (1, 1, "True", "AllPodsBound")


def test_a_pod_relabelled_away_is_no_longer_counted():
    state = run(
        R,
        t.pod("r-0", node_name="n1"),
        t.pod("r-1"),
        events=[("MODIFIED", t.pod("r-1", replica="s"))],
    )
    assert outcome(state)[:2] == (1, 1)


def test_a_claim_allocated_after_the_binding_touches_the_replica_and_schedules_it():
    state = run(R, t.pod("r-0", node_name="n1", claims=["r-0-gpu"]), pending("r-0-gpu"))
    touched = state.apply(CLAIMS, "MODIFIED", allocated("r-0-gpu"))
    assert touched.replicas == {KEY}
    assert outcome(state)[:4] == (1, 1, "True", "AllPodsBound")


def test_a_claim_event_that_leaves_it_allocated_touches_no_replica():
    state = run(R, t.pod("r-0", node_name="n1", claims=["r-0-gpu"]), allocated("r-0-gpu"))
    moved = t.claim("r-0-gpu", [("n1", "gpu-1")], namespace="team")
    assert not state.apply(CLAIMS, "MODIFIED", moved).replicas


def test_a_selector_without_labels_is_an_invalid_spec():
    bad = t.replica_observation()
    bad["spec"]["selector"]["matchLabels"] = {}
    assert outcome(run(bad, t.pod("r-0")))[:4] == (0, 0, "Unknown", "InvalidSpec")


def test_a_selector_naming_a_label_the_agent_does_not_keep_is_an_invalid_spec_not_zero_pods():
    bad = t.replica_observation()
    bad["spec"]["selector"]["matchLabels"]["app"] = "engine"
    pod = t.pod("r-0", node_name="n1")
    pod["metadata"]["labels"]["app"] = "engine"
    count, bound, status, reason, message = outcome(run(bad, pod))[:5]
    assert (count, bound, status, reason) == (0, 0, "Unknown", "InvalidSpec")
    assert message == (
        "spec.selector.matchLabels may name only modelplane.ai/replica and "
        "modelplane.ai/replica-namespace (the pod labels the agent keeps), got app"
    )


def test_a_pod_keeps_only_the_labels_a_replica_selects_by():
    pod = t.pod("r-0", node_name="n1")
    pod["metadata"]["labels"]["tenant.example.com/blob"] = "x" * 63
    assert pod_from(pod).labels == {
        "modelplane.ai/replica": "r",
        "modelplane.ai/replica-namespace": "team",
    }


# --------------------------------------------------------------------------- the replica function


def scheduled_since(status) -> str:
    return status["conditions"][0]["lastTransitionTime"]


def test_the_replica_function_reads_all_bound_as_all_pods_scheduled():
    state = run(R, t.pod("r-0", node_name="n1"), t.pod("r-1", node_name="n2"))
    status = replica_status(state.replica_report(KEY), NOW, None, 1)
    parsed = parse_report(status)
    flipped = NOW + timedelta(seconds=1)  # past the second it was seen in
    assert parsed == AgentReport(NOW, 2, 2, "True", "AllPodsBound", parsed.message, flipped)  # type: ignore[union-attr]
    verdict = judge(parsed, 2, NOW, timedelta(minutes=5), Previous(), lambda _: None)
    assert (verdict.condition.status, verdict.condition.reason) == ("True", "AllPodsScheduled")
    assert verdict.scheduled_at == flipped


def test_the_replica_function_reads_unschedulable_and_finds_the_engine():
    state = run(R, t.pod("r-team-lws-0", unschedulable="0/3 nodes are available"))
    status = replica_status(state.replica_report(KEY), NOW, None, 1)
    verdict = judge(
        parse_report(status),
        2,
        NOW,
        timedelta(minutes=5),
        Previous(),
        lambda m: "lws" if "r-team-lws" in m else None,
    )
    assert (verdict.condition.status, verdict.condition.reason) == ("False", "Unschedulable")
    assert verdict.condition.message == "engine lws: pod r-team-lws-0: 0/3 nodes are available"


def test_the_replica_function_reads_no_pods_as_waiting():
    status = replica_status(run(R).replica_report(KEY), NOW, None, 1)
    verdict = judge(parse_report(status), 1, NOW, timedelta(minutes=5), Previous(), lambda _: None)
    assert verdict.condition.reason == "WaitingForPods"


def test_scheduled_keeps_its_time_while_true_and_takes_the_flip_time():
    state = run(R, t.pod("r-0", node_name="n1"))
    first = replica_status(state.replica_report(KEY), NOW, None, 1)
    state.apply(PODS, "ADDED", t.pod("r-1", node_name="n2"))
    later = NOW + timedelta(seconds=30)
    second = replica_status(state.replica_report(KEY), later, first, 1)
    assert scheduled_since(second) == "2026-11-30T12:00:01Z"
    state.apply(PODS, "ADDED", t.pod("r-2"))
    third = replica_status(state.replica_report(KEY), later, second, 1)
    assert scheduled_since(third) == "2026-11-30T12:00:31Z"


@pytest.mark.parametrize(
    ("seen", "since"),
    [
        pytest.param("12:00:05.000001", "12:00:06", id="a flip seen inside a second is after it"),
        pytest.param("12:00:05.999999", "12:00:06", id="a flip seen late in a second too"),
        pytest.param("12:00:05", "12:00:06", id="a flip seen on a whole second is after it"),
    ],
)
def test_a_replica_flip_is_stamped_after_the_second_its_snapshot_was_taken_in(seen, since):
    # A pool's observedAt rounds down to its second: a pool whose snapshot was taken
    # earlier in that second, before the binding, must read older than the flip.
    moment = datetime.fromisoformat(f"2026-11-30T{seen}+00:00")
    state = run(R, t.pod("r-0", node_name="n1"))
    status = replica_status(state.replica_report(KEY), moment, None, 1)
    assert (status["observedAt"], scheduled_since(status)) == (
        "2026-11-30T12:00:05Z",
        f"2026-11-30T{since}Z",
    )
