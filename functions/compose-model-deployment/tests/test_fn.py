"""RunFunction end to end: requests in, desired ModelReplicas, status, conditions, events out.

These use the real CEL matcher (matching.py), so they also prove the shell and
the matcher agree on the interface.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
import structlog
from compose_model_deployment import fn
from compose_model_deployment.model import UNSCHEDULABLE_GRACE
from modelplane_common import labels, template_digest
from modelplane_common.timeutil import format_time
from modelplane_testkit import deployment_builders as t
from modelplane_testkit import wire
from modelplane_testkit.wire import conditions, desired
from modelplane_testkit.wire import desired_status as xr_status

MATCHER = fn.default_matcher()
FULL = {"gpu": 8}


def run(req):
    return fn.run_function(req, t.NOW, MATCHER)


def events(rsp, severity=None):
    """Messages of the function's results, of one severity ("Normal", "Warning") or all."""
    return [m for s, m in wire.events(rsp) if severity is None or s == severity]


CLUSTERS = [
    t.cluster("a", [t.pool("p", 2, histogram=[(FULL, 2)])], cluster_labels={"tier": "1"}),
    t.cluster("b", [t.pool("p", 1, histogram=[(FULL, 1)])], cluster_labels={"tier": "1"}),
]
RUNNING = t.running_replica(0, "b")
OWN = {"replica-0": RUNNING}
BAD_SELECTOR = t.deployment(
    replicas=2, engines=[t.standalone(gpus=1, selectors=["device.driver =="])]
)

TEN = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"
# Three comprehensions nested over ten elements: 10^3 iterations, an estimate over the limit.
HOSTILE_SELECTOR = f"{TEN}.all(a, {TEN}.all(b, {TEN}.all(c, a + b + c >= 0)))"
HOSTILE = t.deployment(
    replicas=2,
    engines=[
        t.standalone(gpus=1, selectors=["device.driver == 'gpu.nvidia.com'", HOSTILE_SELECTOR])
    ],
)

# (request, expected ReplicasScheduled (status, reason), a warning is expected)
UNRESOLVED = [
    pytest.param(
        t.request(t.deployment(replicas=2), None, [], OWN),
        ("Unknown", "WaitingForInputs"),
        False,
        id="clusters not fetched yet keeps every replica unchanged",
    ),
    pytest.param(
        t.request(t.deployment(replicas=2), CLUSTERS, None, OWN),
        ("Unknown", "WaitingForInputs"),
        False,
        id="replicas not fetched yet keeps every replica unchanged",
    ),
    pytest.param(
        t.request(t.deployment(replicas=2), [], [], OWN),
        ("False", "NoClusters"),
        True,
        id="an empty cluster list keeps every replica unchanged",
    ),
    pytest.param(
        t.request(BAD_SELECTOR, CLUSTERS, [], OWN),
        ("False", "InvalidSelector"),
        True,
        id="a selector that does not compile keeps every replica unchanged",
    ),
    pytest.param(
        t.request(HOSTILE, CLUSTERS, [], OWN),
        ("False", "InvalidSelector"),
        True,
        id="a selector over the cost limit keeps every replica unchanged",
    ),
    pytest.param(
        t.request(
            {
                **t.deployment(replicas=2),
                "spec": {"replicas": 2, "template": {"spec": {"engines": []}}},
            },
            CLUSTERS,
            [],
            OWN,
        ),
        ("False", "InvalidDeployment"),
        True,
        id="an invalid deployment keeps every replica unchanged",
    ),
]


@pytest.mark.parametrize(("req", "expected", "warns"), UNRESOLVED)
def test_bad_or_missing_input_never_deletes_a_running_replica(req, expected, warns):
    rsp = run(req)
    out = desired(rsp)
    assert list(out) == ["replica-0"]
    assert out["replica-0"]["spec"] == RUNNING["spec"]
    # Every label is kept; the charge label turns pending, since nothing was judged.
    assert out["replica-0"]["metadata"]["labels"] == {
        **RUNNING["metadata"]["labels"],
        labels.CHARGE: labels.CHARGE_PENDING,
    }
    assert "status" not in out["replica-0"]
    assert conditions(rsp)[fn.SCHEDULED][:2] == expected
    assert bool(events(rsp, "Warning")) is warns
    assert xr_status(rsp)["replicas"]["scheduled"] == 1


def test_a_selector_over_the_cost_limit_is_named_by_its_field_and_the_limit():
    rsp = run(t.request(HOSTILE, CLUSTERS, [], OWN))
    message = conditions(rsp)[fn.SCHEDULED][2]
    field = "spec.template.spec.engines[0].members[0].nodeSelector.devices[0].selectors[1]"
    assert message.startswith(f"engine serve: {field}.cel.expression: CEL selector "), message
    assert "exceeds the limit of 10000 steps" in message
    assert "\n" not in message
    assert any(field in m for m in events(rsp, "Warning"))


def test_requirements_select_clusters_by_labels_and_the_pending_replicas_everywhere():
    rsp = run(t.request(t.deployment(match_labels={"tier": "1"}), None, None))
    clusters = rsp.requirements.resources[fn.CLUSTERS]
    replicas = rsp.requirements.resources[fn.PENDING_REPLICAS]
    assert (clusters.kind, dict(clusters.match_labels.labels)) == (
        "InferenceCluster",
        {"tier": "1"},
    )
    assert replicas.kind == "ModelReplica"
    assert dict(replicas.match_labels.labels) == {labels.CHARGE: labels.CHARGE_PENDING}
    assert replicas.namespace == ""


def replica_requirements(rsp) -> dict[str, tuple[str, dict]]:
    """The ModelReplica requirements by name: (namespace, match labels)."""
    return {
        name: (s.namespace, dict(s.match_labels.labels))
        for name, s in rsp.requirements.resources.items()
        if s.kind == "ModelReplica"
    }


PENDING = {"pending-replicas": ("", {labels.CHARGE: labels.CHARGE_PENDING})}
STALE_B = t.cluster("b", [t.pool("p", 1, histogram=[(FULL, 1)], observed_at=t.ago(10))])
DECLARED_B = t.cluster("b", [t.pool("p", 1)], mode="Declared")


@pytest.mark.parametrize(
    ("clusters", "quotas", "expected"),
    [
        pytest.param(
            CLUSTERS,
            [],
            PENDING,
            id="on freshly observed clusters a placing pass reads only the pending replicas",
        ),
        pytest.param(
            [CLUSTERS[0], DECLARED_B],
            [],
            {**PENDING, "replicas-on-b": ("", {labels.CLUSTER: "b"})},
            id="a Declared cluster's replicas are read whole",
        ),
        pytest.param(
            [CLUSTERS[0], STALE_B],
            [],
            {**PENDING, "replicas-on-b": ("", {labels.CLUSTER: "b"})},
            id="a cluster whose observation is older than maxAge has its replicas read whole",
        ),
        pytest.param(
            CLUSTERS,
            [t.device_quota({"gpu.example.com": 8})],
            {**PENDING, "namespace-replicas": ("team-a", {})},
            id="under a device quota every replica of the namespace is read",
        ),
    ],
)
def test_a_placing_pass_requires_the_replicas_it_must_charge(clusters, quotas, expected):
    pending_only = {fn.CLUSTERS: clusters, fn.PENDING_REPLICAS: []}
    tenant = {"namespace": [t.namespace("team-a")], "resource-quotas": quotas}
    rsp = run(wire.request(t.deployment(replicas=2), {}, {**pending_only, **tenant}))
    assert replica_requirements(rsp) == expected
    if len(expected) > 1:  # it waits for the rest before it plans
        assert conditions(rsp)[fn.SCHEDULED][:2] == ("Unknown", "WaitingForInputs")
        assert not desired(rsp)


def test_a_pending_replica_and_its_whole_cluster_set_are_charged_once():
    """A replica fetched both as pending and in its cluster's whole set holds its node once:
    one free node, one other replica on it; the deployment's replica finds no room."""
    declared = t.cluster("b", [t.pool("p", 2)], mode="Declared")
    other = t.running_replica(0, "b")
    other["metadata"]["namespace"] = "team-b"
    required = {
        fn.CLUSTERS: [declared],
        fn.PENDING_REPLICAS: [other],
        "replicas-on-b": [other],
        "namespace": [t.namespace("team-a")],
        "resource-quotas": [],
    }
    rsp = run(wire.request(t.deployment(replicas=2), {}, required))
    assert xr_status(rsp)["replicas"]["scheduled"] == 1


LONG_CLUSTER = "gpu-east-" + "a" * 244  # 253 characters: an InferenceCluster name may be


def test_a_replica_on_a_cluster_with_a_long_name_gets_a_valid_cluster_label():
    observed = t.cluster(LONG_CLUSTER, [t.pool("p", 1, histogram=[(FULL, 1)])])
    rsp = run(t.request(t.deployment(replicas=1), [observed], []))
    replica = desired(rsp)["replica-0"]
    assert replica["spec"]["clusterName"] == LONG_CLUSTER
    value = replica["metadata"]["labels"][labels.CLUSTER]
    assert value == labels.label_value(LONG_CLUSTER)
    assert len(value) == labels.VALUE_MAX


def test_the_replicas_of_a_long_named_cluster_are_read_by_the_label_they_are_written_with():
    declared = t.cluster(LONG_CLUSTER, [t.pool("p", 1)], mode="Declared")
    tenant = {"namespace": [t.namespace("team-a")], "resource-quotas": []}
    required = {fn.CLUSTERS: [declared], fn.PENDING_REPLICAS: [], **tenant}
    rsp = run(wire.request(t.deployment(replicas=1), {}, required))
    selectors = [m for _, m in replica_requirements(rsp).values() if labels.CLUSTER in m]
    assert selectors == [{labels.CLUSTER: labels.label_value(LONG_CLUSTER)}]


def test_a_composed_replica_carries_identity_pools_and_device_classes():
    xr = t.deployment(
        replicas=1,
        engines=[t.gang(leader_gpus=0, worker_gpus=8, workers=1)],
        tolerations=[{"key": "gpu", "operator": "Exists"}],
        template_labels={"app": "llm", labels.CLUSTER: "spoofed", labels.CHARGE: "counted"},
    )
    rsp = run(t.request(xr, CLUSTERS, []))
    replica = desired(rsp)["replica-0"]
    assert replica["metadata"]["name"] == "llm-0"
    assert replica["metadata"]["namespace"] == "team-a"
    assert replica["metadata"]["labels"] == {
        "app": "llm",
        labels.DEPLOYMENT: "llm",
        labels.DEPLOYMENT_NAMESPACE: "team-a",
        labels.CLUSTER: "a",
        labels.REPLICA_INDEX: "0",
        labels.CHARGE: labels.CHARGE_PENDING,
    }
    assert replica["metadata"]["annotations"] == {labels.PLACED_AT: "2025-06-01T12:00:00Z"}
    spec = replica["spec"]
    assert spec["clusterName"] == "a"
    assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    (engine,) = spec["engines"]
    assert engine["name"] == "gang" and engine["copies"] == 1
    leader, worker = engine["members"]
    assert leader == {
        "role": "Leader",
        "nodePoolName": "p",
        "templateDigest": template_digest.of({"spec": {"containers": [{"name": "leader"}]}}),
    }
    assert worker["deviceRequests"] == [
        {"name": "gpu", "deviceClassName": "gpu.example.com", "count": 8}
    ]
    assert worker["worker"] == {"nodes": 1} and worker["nodePoolName"] == "p"


def _member_templates(xr):
    """(engine, position) -> the template the deployment gives that member."""
    return {
        (engine["name"], position): member["template"]
        for engine in xr["spec"]["template"]["spec"]["engines"]
        for position, member in enumerate(engine["members"])
    }


@pytest.mark.parametrize(
    "engines",
    [
        pytest.param([t.standalone(gpus=1)], id="a standalone member names its template by digest"),
        pytest.param(
            [t.gang(leader_gpus=0, worker_gpus=8, workers=1)],
            id="a leader and a worker each name their own template by digest",
        ),
        pytest.param(
            [t.standalone("prefill", gpus=1), t.standalone("decode", gpus=1)],
            id="each engine's member names its own engine's template",
        ),
    ],
)
def test_a_composed_replica_carries_template_digests_not_templates(engines):
    xr = t.deployment(replicas=1, engines=engines)
    expected = {at: template_digest.of(tpl) for at, tpl in _member_templates(xr).items()}
    replica = desired(run(t.request(xr, CLUSTERS, [])))["replica-0"]
    found = {}
    for engine in replica["spec"]["engines"]:
        for position, member in enumerate(engine["members"]):
            assert "template" not in member
            found[(engine["name"], position)] = member["templateDigest"]
    assert found == expected


def test_an_edited_template_rewrites_the_running_replica_with_the_new_digest():
    xr = t.deployment(replicas=1, engines=[t.standalone(gpus=8)])
    before = desired(run(t.request(xr, CLUSTERS, [])))["replica-0"]
    member = xr["spec"]["template"]["spec"]["engines"][0]["members"][0]
    member["template"]["spec"]["containers"][0]["image"] = "vllm:v2"
    observed = {"replica-0": {**before, "status": t.running_replica(0, "a")["status"]}}
    after = desired(run(t.request(xr, CLUSTERS, [], own=observed)))["replica-0"]
    digest = after["spec"]["engines"][0]["members"][0]["templateDigest"]
    assert digest == template_digest.of(member["template"])
    assert digest != before["spec"]["engines"][0]["members"][0]["templateDigest"]


@pytest.mark.parametrize(
    ("replicas", "scheduled", "condition"),
    [
        pytest.param(3, 3, ("True", "AllReplicasScheduled"), id="all placed reads True"),
        pytest.param(
            4,
            3,
            ("False", "InsufficientCapacity"),
            id="a partial shortfall reads False InsufficientCapacity",
        ),
    ],
)
def test_replicas_scheduled_reports_every_shortfall(replicas, scheduled, condition):
    xr = t.deployment(replicas=replicas, engines=[t.standalone(gpus=8)])
    rsp = run(t.request(xr, CLUSTERS, []))
    assert len(desired(rsp)) == scheduled
    assert xr_status(rsp)["replicas"] == {"desired": replicas, "scheduled": scheduled, "ready": 0}
    status, reason, message = conditions(rsp)[fn.SCHEDULED]
    assert (status, reason) == condition
    if status == "False":
        assert message == (
            f"3 of {replicas} replicas placed: 2 pools checked, 2 too few free devices"
        )
        assert f"InsufficientCapacity: {message}" in events(rsp, "Warning")


def test_placements_are_announced_as_normal_events_once():
    xr = t.deployment(replicas=1, engines=[t.standalone(gpus=8)])
    rsp = run(t.request(xr, CLUSTERS, []))
    assert events(rsp, "Normal") == ["placed replica llm-0 on a/p"]
    steady = run(t.request(xr, CLUSTERS, [], OWN))
    assert events(steady) == []
    assert conditions(steady)[fn.READY][:2] == ("True", "AllReplicasReady")


def test_identity_includes_the_namespace():
    # Same deployment name and replica name, other namespace: someone else's replica,
    # charged against its pool and never adopted or emitted.
    stranger = t.model_replica(
        "llm-0",
        "team-b",
        "b",
        [t.replica_engine("serve", "p", gpus=8)],
        deployment_name="llm",
        index=0,
        pods_scheduled="False",
        reason="PodsPending",
    )
    xr = t.deployment(replicas=2, engines=[t.standalone(gpus=8)])
    rsp = run(t.request(xr, CLUSTERS, [stranger, RUNNING], OWN))
    out = desired(rsp)
    assert sorted(out) == ["replica-0", "replica-1"]
    assert out["replica-0"]["spec"]["clusterName"] == "b"
    assert out["replica-1"]["spec"]["clusterName"] == "a"
    assert conditions(rsp)[fn.INPUTS][0] == "True"


def test_contradictory_labels_are_reported_and_the_replica_is_kept():
    wrong = t.running_replica(
        0,
        "b",
        placed_at=None,
        extra_labels={labels.CLUSTER: "a", labels.REPLICA_INDEX: "7"},
    )
    rsp = run(
        t.request(
            t.deployment(replicas=1, engines=[t.standalone(gpus=8)]),
            CLUSTERS,
            [],
            {"replica-0": wrong},
        )
    )
    out = desired(rsp)["replica-0"]
    assert out["spec"]["clusterName"] == "b"
    assert out["metadata"]["labels"][labels.CLUSTER] == "b"
    status, reason, message = conditions(rsp)[fn.INPUTS]
    assert (status, reason) == ("False", "DegradedInputs")
    assert "contradicts" in message


def test_a_replica_claiming_our_labels_from_outside_is_reported():
    impostor = t.model_replica(
        "llm-9", "team-a", "a", [t.replica_engine("serve", "p")], deployment_name="llm", index=9
    )
    rsp = run(t.request(t.deployment(replicas=1), CLUSTERS, [impostor]))
    assert "not composed by it" in conditions(rsp)[fn.INPUTS][2]


def test_a_rejected_histogram_is_reported_and_that_pool_falls_back():
    clusters = [t.cluster("a", [t.pool("p", 2, histogram=[({"gpu": 99}, 2)])])]
    rsp = run(t.request(t.deployment(replicas=2, engines=[t.standalone(gpus=1)]), clusters, []))
    assert len(desired(rsp)) == 2  # two whole nodes, not 16 GPUs' worth
    rsp3 = run(t.request(t.deployment(replicas=3, engines=[t.standalone(gpus=1)]), clusters, []))
    assert len(desired(rsp3)) == 2
    assert "histogram rejected" in conditions(rsp3)[fn.INPUTS][2]
    assert any("histogram rejected" in m for m in events(rsp3, "Warning"))


def test_healing_writes_the_failure_memory_and_moves_the_replica():
    stuck = t.running_replica(
        0,
        "b",
        pods_scheduled="False",
        reason="Unschedulable",
        since=t.ago(10),
        ready=False,
        placed_at=t.ago(20),
    )
    xr = t.deployment(replicas=1, engines=[t.standalone(gpus=8)])
    rsp = run(t.request(xr, CLUSTERS, [], {"replica-0": stuck}))
    assert desired(rsp)["replica-0"]["spec"]["clusterName"] == "a"
    assert xr_status(rsp)["failedPlacements"] == [
        {
            "cluster": "b",
            "pool": "p",
            "replica": "llm-0",
            # avoidFor (30m) from when the failure fell due: since (11:50) + the 2m grace.
            "expiresAt": "2025-06-01T12:22:00Z",
            "reason": "unschedulable since 2025-06-01T11:50:00Z",
        },
    ]
    assert any("avoiding b/p" in m for m in events(rsp, "Warning"))
    assert any(m.startswith("moved replica llm-0 from b/p to a/p") for m in events(rsp))


def test_scale_down_is_announced():
    xr = t.deployment(replicas=0, engines=[t.standalone(gpus=8)])
    rsp = run(t.request(xr, CLUSTERS, [], OWN))
    assert desired(rsp) == {}
    assert events(rsp) == ["removed replica llm-0 from b (scale down)"]


def test_the_grpc_runner_uses_its_injected_clock_and_matcher():
    runner = fn.FunctionRunner(matcher=t.stand_in_matcher, clock=lambda: t.NOW)
    rsp = asyncio.run(runner.RunFunction(t.request(t.deployment(), CLUSTERS, []), None))
    assert list(desired(rsp)) == ["replica-0"]


def test_each_request_logs_the_plan_summary_and_timings_at_debug_bound_to_tag_and_xr():
    runner = fn.FunctionRunner(matcher=t.stand_in_matcher, clock=lambda: t.NOW)
    req = t.request(t.deployment(replicas=4, engines=[t.standalone(gpus=8)]), CLUSTERS, [])
    req.meta.tag = "abc"
    with structlog.testing.capture_logs() as captured:
        asyncio.run(runner.RunFunction(req, None))
    (planned,) = [line for line in captured if line["event"] == "planned"]
    assert planned["log_level"] == "debug"
    assert (planned["tag"], planned["xr_kind"], planned["xr_namespace"], planned["xr_name"]) == (
        "abc",
        "ModelDeployment",
        "team-a",
        "llm",
    )
    assert (planned["desired"], planned["scheduled"], planned["changes"]) == (4, 3, {"Placed": 3})
    assert planned["unplaced"] == "2 pools checked, 2 too few free devices"
    assert {"read_ms", "schedule_ms", "write_ms"} <= set(planned)


def test_a_pass_that_plans_nothing_logs_why_at_debug():
    runner = fn.FunctionRunner(matcher=t.stand_in_matcher, clock=lambda: t.NOW)
    with structlog.testing.capture_logs() as captured:
        asyncio.run(runner.RunFunction(t.request(t.deployment(), [], []), None))
    (kept,) = [line for line in captured if line["event"] == "nothing planned, every replica kept"]
    assert (kept["log_level"], kept["reason"]) == ("debug", "NoClusters")


STEADY_XR = t.deployment(replicas=1, engines=[t.standalone(gpus=8)])


def failing_until(expires_at):
    """The steady deployment remembering a failed placement on a pool until `expires_at`."""
    status = {
        "failedPlacements": [{"cluster": "a", "pool": "p", "expiresAt": format_time(expires_at)}]
    }
    return {**STEADY_XR, "status": status}


def unschedulable_for(since: timedelta) -> tuple:
    """The steady deployment whose one replica has been Unschedulable for `since`."""
    stuck = t.running_replica(
        0,
        "b",
        ready=False,
        pods_scheduled="False",
        reason="Unschedulable",
        since=format_time(t.NOW - since),
    )
    return (t.request(STEADY_XR, CLUSTERS, [stuck], {"replica-0": stuck}),)


@pytest.mark.parametrize(
    ("req", "seconds"),
    [
        pytest.param(
            t.request(STEADY_XR, CLUSTERS, [RUNNING], OWN),
            300,
            id="every replica placed and Ready, no deadline: the at-rest 5m cap",
        ),
        pytest.param(
            t.request(failing_until(t.NOW + timedelta(minutes=2)), CLUSTERS, [RUNNING], OWN),
            120,
            id="at rest, a failed placement remembered 2m more: called again when it expires",
        ),
        pytest.param(
            t.request(failing_until(t.NOW + timedelta(minutes=20)), CLUSTERS, [RUNNING], OWN),
            300,
            id="at rest, a failure memory past the cap: the 5m cap",
        ),
        pytest.param(
            t.request(STEADY_XR, CLUSTERS, []),
            60,
            id="a replica placed this pass, not Ready yet: its events drive it, 60s backs them",
        ),
        pytest.param(
            t.request(
                STEADY_XR,
                CLUSTERS,
                [t.running_replica(0, "b", ready=False)],
                {"replica-0": t.running_replica(0, "b", ready=False)},
            ),
            60,
            id="a placed replica not Ready yet: 60s",
        ),
        pytest.param(
            *unschedulable_for(UNSCHEDULABLE_GRACE - timedelta(seconds=20)),
            20,
            id="a replica Unschedulable until its grace runs out in 20s: called again then",
        ),
        pytest.param(
            *unschedulable_for(timedelta(seconds=30)),
            60,
            id="a replica Unschedulable, its grace far off: 60s, its events drive it",
        ),
        pytest.param(
            t.request(t.deployment(replicas=4, engines=[t.standalone(gpus=8)]), CLUSTERS, []),
            60,
            id="some placed and not Ready, the rest waiting for capacity: 60s",
        ),
        pytest.param(
            t.request(t.deployment(replicas=1, engines=[t.standalone(gpus=16)]), CLUSTERS, []),
            60,
            id="nothing placed, waiting for capacity: 60s, capacity is not watched",
        ),
        pytest.param(
            t.request(STEADY_XR, None, None, OWN),
            60,
            id="nothing planned: 60s",
        ),
    ],
)
def test_a_converging_deployment_asks_to_be_called_again_soon(req, seconds):
    assert run(req).meta.ttl.ToTimedelta().total_seconds() == seconds


@pytest.mark.parametrize(
    ("opened", "converging"),
    [pytest.param(*case[:2], id=case[2]) for case in wire.OPEN_CIRCUIT_TTLS],
)
def test_a_deployment_at_rest_with_an_open_circuit_is_called_again_soon_while_it_may_drop_events(
    opened, converging
):
    xr = {**STEADY_XR, "status": wire.open_circuit(t.NOW - opened)}
    rsp = run(t.request(xr, CLUSTERS, [RUNNING], OWN))
    assert rsp.meta.ttl.ToTimedelta().total_seconds() == (10 if converging else 300)
