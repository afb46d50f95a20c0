"""The fleet-scale run's definitions (`modelplane_e2e.scale.analysis`) on
hand-written records, and the profile's promise of one arrival sequence per seed."""

from __future__ import annotations

import dataclasses
import math

import pytest
from modelplane_common import labels
from modelplane_e2e.kube import KubectlFailed
from modelplane_e2e.scale import __main__ as scale_main
from modelplane_e2e.scale import analysis, cost, profile, record, report, run
from modelplane_e2e.scale.analysis import MODEL, RACE, STALE, PodRecord, ReplicaRecord

T0 = 1_000_000.0
ONE_GPU = profile.Shape("a", 0, 1, 1, (profile.Member("Standalone", 1, 0),))
OTHER = profile.Shape("b", 0, 1, 1, (profile.Member("Standalone", 1, 0),))


def _pod(name: str, replica: str, *, created: float, bound=None, refused=None, node="n0"):
    return PodRecord(
        key=name,
        replica=replica,
        role="Standalone",
        pool="p",
        created=created,
        node=node if bound else "",
        bound_at=bound,
        refused_at=refused,
    )


def _arm(*pods: PodRecord, observed=True, observations=(T0,), admitted=T0 + 5) -> analysis.Arm:
    return analysis.Arm(
        name="arm",
        observed=observed,
        max_age=60,
        shapes={"a": ONE_GPU, "b": OTHER},
        pods=list(pods),
        replicas={
            "a-0": ReplicaRecord("a-0", "a", [admitted]),
            "b-0": ReplicaRecord("b-0", "b", [T0 - 30]),
        },
        observations={"p": list(observations)},
        deployments={},
        background={},
        node_pools={"n0": "p"},
        nic_pools=frozenset(),
        end=T0 + 300,
    )


REFUSED = _pod("x", "a-0", created=T0 + 6, refused=T0 + 8)


@pytest.mark.parametrize(
    ("arm", "expected"),
    [
        pytest.param(_arm(REFUSED), MODEL, id="current-observation-and-nothing-moved-is-the-model"),
        pytest.param(
            _arm(REFUSED, _pod("y", "b-0", created=T0 + 1, bound=T0 + 7)),
            RACE,
            id="another-deployment-bound-in-the-pool-after-the-observation-is-a-race",
        ),
        pytest.param(
            _arm(REFUSED, _pod("y", "b-0", created=T0 - 20, bound=T0 - 10)),
            MODEL,
            id="a-bind-the-observation-already-saw-is-no-race",
        ),
        pytest.param(
            _arm(REFUSED, _pod("y", "a-0", created=T0 + 1, bound=T0 + 3)),
            STALE,
            id="a-change-between-observation-and-admission-is-stale",
        ),
        pytest.param(_arm(REFUSED, observations=()), STALE, id="no-observation-at-all-is-stale"),
        pytest.param(
            _arm(REFUSED, observations=(T0 - 120,)),
            STALE,
            id="an-observation-older-than-max-age-is-stale",
        ),
        pytest.param(
            _arm(REFUSED, _pod("y", "a-0", created=T0 + 1, bound=T0 + 3), observed=False),
            MODEL,
            id="declared-the-fallback-is-the-model-and-never-stale",
        ),
    ],
)
def test_a_never_bound_pod_has_one_cause(arm, expected):
    assert analysis.cause(arm, REFUSED) == expected


@pytest.mark.parametrize(
    ("values", "share", "expected"),
    [
        pytest.param([3.0, 1.0, 2.0], 0.5, 2.0, id="p50-of-three-is-the-middle"),
        pytest.param([1.0, 2.0, math.inf], 0.99, math.inf, id="p99-falling-on-never-is-never"),
        pytest.param([5.0], 0.99, 5.0, id="one-value-is-every-percentile"),
        pytest.param([], 0.5, None, id="no-values-no-percentile"),
    ],
)
def test_percentiles_are_nearest_rank(values, share, expected):
    assert analysis.percentile(values, share) == expected


def test_a_replica_is_placed_once_all_its_pods_are_bound_and_live():
    two = dataclasses.replace(ONE_GPU, copies=2)
    arm = dataclasses.replace(
        _arm(
            _pod("x", "a-0", created=T0, bound=T0 + 4),
            _pod("y", "a-0", created=T0, bound=T0 + 9),
            _pod("z", "b-0", created=T0, bound=T0 + 2),
        ),
        shapes={"a": two, "b": dataclasses.replace(OTHER, copies=2)},
    )
    assert analysis.placed_replicas(arm) == {"a-0": T0 + 9}


def _relayed_arm(*relayed: float, observed: bool = True) -> analysis.Arm:
    arm = _arm(_pod("x", "a-0", created=T0, bound=T0 + 10), observed=observed)
    arm.replicas["a-0"].relayed.extend(relayed)
    return arm


@pytest.mark.parametrize(
    ("arm", "expected"),
    [
        pytest.param(_relayed_arm(T0 + 14), [4.0], id="relayed-4-s-after-the-last-bind"),
        pytest.param(
            _relayed_arm(T0 + 2, T0 + 40, T0 + 25),
            [15.0],
            id="the-first-true-at-or-after-the-bind-counts-not-an-earlier-placement-s",
        ),
        pytest.param(_relayed_arm(T0 + 10), [0.0], id="relayed-in-the-second-of-the-bind-is-0"),
        pytest.param(_relayed_arm(), [math.inf], id="bound-but-never-relayed-is-never"),
        pytest.param(_relayed_arm(T0 + 14, observed=False), [], id="a-declared-arm-relays-nothing"),
        pytest.param(
            _arm(_pod("x", "a-0", created=T0, refused=T0 + 3)),
            [],
            id="a-replica-not-placed-has-no-relay-time",
        ),
    ],
)
def test_time_to_relay_runs_from_the_last_bind_to_the_replicas_pods_scheduled(arm, expected):
    assert analysis.times_to_relay(arm) == expected


def _replica_event(kind: str, status: str, at: str) -> dict:
    condition = {"type": "PodsScheduled", "status": status, "lastTransitionTime": at}
    return {
        "type": kind,
        "object": {
            "metadata": {"name": "a-0", "namespace": "team"},
            "status": {"conditions": [condition]},
        },
    }


def test_a_replicas_pods_scheduled_true_transitions_are_recorded_once_each():
    events = [
        _replica_event("ADDED", "Unknown", "2026-12-02T03:07:55Z"),
        _replica_event("MODIFIED", "True", "2026-12-02T03:22:16Z"),
        _replica_event("MODIFIED", "True", "2026-12-02T03:22:16Z"),
        _replica_event("MODIFIED", "Unknown", "2026-12-02T03:23:23Z"),
        _replica_event("MODIFIED", "True", "2026-12-02T03:25:23Z"),
    ]
    relayed = analysis.replicas(events, "team")["a-0"].relayed
    assert relayed == [
        analysis.when("2026-12-02T03:22:16Z"),
        analysis.when("2026-12-02T03:25:23Z"),
    ]


APISERVER_LOG = (
    "W1202 03:12:25.354732   27449 controller.go:139] slow openapi aggregation\n"
    "E1202 03:18:29.146490   27449 watcher.go:335] watch chan error: etcd event received "
    "with PrevKv=nil (key=/registry/kubernetes.m.crossplane.io/objects/a)\n"
    "W1202 03:18:38.466443   27449 cacher.go:182] Terminating all watchers from cacher "
    "objects.kubernetes.m.crossplane.io\n"
    "W1202 03:28:38.466443   27449 cacher.go:182] Terminating all watchers from cacher "
    "objects.kubernetes.m.crossplane.io\n"
    "W1202 03:29:00.000000   27449 cacher.go:182] Terminating all watchers from cacher "
    "modelreplicas.modelplane.ai\n"
)


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        pytest.param(
            APISERVER_LOG,
            {"modelreplicas.modelplane.ai": 1, "objects.kubernetes.m.crossplane.io": 2},
            id="each-reset-is-counted-per-resource",
        ),
        pytest.param("I1202 03:00:00 serving securely\n", {}, id="a-log-without-resets-is-none"),
    ],
)
def test_watch_cache_resets_are_counted_from_the_api_servers_log(log, expected):
    assert analysis.watch_cache_resets(log) == expected


def _mr_status(
    name: str, *, ready_since: str = "", placed: str = "", verdict: str = "", decided: str = ""
) -> dict:
    meta: dict = {"name": name, "namespace": "team"}
    if placed:
        meta["annotations"] = {labels.PLACED_AT: placed}
    status: dict = {}
    if ready_since:
        status["conditions"] = [
            {"type": "Ready", "status": "False", "lastTransitionTime": ready_since}
        ]
    if verdict:
        status["admission"] = {"placedAt": placed, "verdict": verdict, "decidedAt": decided}
    return {"type": "MODIFIED", "object": {"metadata": meta, "status": status}}


NO_STALE = analysis.StaleWrites(0, 0, 0, 0, 0)


@pytest.mark.parametrize(
    ("replica_events", "expected"),
    [
        pytest.param(
            [_mr_status("a-0", ready_since="03:08:03"), _mr_status("a-0", ready_since="03:09:16")],
            NO_STALE,
            id="conditions-moving-forward-are-no-stale-write",
        ),
        pytest.param(
            [
                _mr_status("a-0", ready_since="03:08:03"),
                _mr_status("a-0", ready_since="03:09:16"),
                _mr_status("a-0", ready_since="03:08:03"),
            ],
            dataclasses.replace(NO_STALE, replica_conditions_back=1),
            id="a-condition-put-back-to-an-earlier-transition-is-a-stale-write",
        ),
        pytest.param(
            [_mr_status("a-0", ready_since="03:09:16"), _mr_status("b-0", ready_since="03:08:03")],
            NO_STALE,
            id="another-replicas-earlier-transition-is-no-stale-write",
        ),
        pytest.param(
            [
                _mr_status("a-0", placed="03:13:00", verdict="Admitted", decided="03:13:36"),
                _mr_status("a-0", placed="03:13:00", verdict="Admitted", decided="03:15:02"),
            ],
            dataclasses.replace(NO_STALE, decided_again=1),
            id="one-placement-decided-twice-with-the-same-verdict",
        ),
        pytest.param(
            [
                _mr_status("a-0", placed="03:13:00", verdict="Admitted", decided="03:13:36"),
                _mr_status("a-0", placed="03:13:00", verdict="Overcommitted", decided="03:14:00"),
            ],
            dataclasses.replace(NO_STALE, decided_again=1, both_verdicts=1),
            id="one-placement-admitted-and-overcommitted-is-counted-as-both",
        ),
        pytest.param(
            [
                _mr_status("a-0", placed="03:13:00"),
                _mr_status("a-0", placed="03:13:21"),
                _mr_status("a-0", placed="03:13:00"),
                _mr_status("a-0"),
            ],
            dataclasses.replace(NO_STALE, placements_back=1),
            id="a-placed-at-put-back-to-an-earlier-one-counts-an-annotation-missing-does-not",
        ),
    ],
)  # fmt: skip
def test_stale_writes_are_counted_from_the_replicas_record(replica_events, expected):
    assert analysis.stale_writes(replica_events, [], "team") == expected


def test_stale_writes_count_deployments_conditions_moved_back_apart():
    moved_back = [
        _mr_status("md", ready_since="03:09"),
        _mr_status("md", ready_since="03:08"),
    ]
    stale = analysis.stale_writes([], moved_back, "team")
    assert stale == dataclasses.replace(NO_STALE, deployment_conditions_back=1)
    assert analysis.stale_writes([], moved_back, "other") == NO_STALE


def _facts(
    unconverged: list[str], resets: dict[str, int], gaps: dict[str, record.Gap] | None = None
) -> report.Facts:
    return report.Facts(profile.REDUCED, 1, 10.0, 60.0, unconverged, resets, gaps or {})


MANY = [f"observed/md-{i:03}-0: admitted, 0 of 1 pods bound" for i in range(14)]


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        pytest.param(
            _facts([], {}), ["control-plane watch cache resets: none"], id="a-healthy-run-says-none"
        ),
        pytest.param(
            _facts(["declared/md-001-0: admitted, 1 of 2 pods bound"], {"objects.x": 1}),
            [
                "unconverged: declared/md-001-0: admitted, 1 of 2 pods bound",
                "control-plane watch cache resets: objects.x 1",
            ],
            id="an-unconverged-run-names-what-was-left-and-the-resets",
        ),
        pytest.param(
            _facts(MANY, {}),
            [
                "unconverged: " + "; ".join(MANY[:12]) + "; and 2 more",
                "control-plane watch cache resets: none",
            ],
            id="past-twelve-reasons-the-rest-are-counted",
        ),
        pytest.param(
            _facts([], {}, {"control-plane-modelreplicas": record.Gap(1, 2, "Unable to connect")}),
            [
                "control-plane watch cache resets: none",
                "record of control-plane-modelreplicas may fall short: restarted 1 times, "
                "2 kubectl messages, the last: Unable to connect",
            ],
            id="a-watch-that-restarted-or-failed-is-named-with-its-last-failure",
        ),
    ],
)  # fmt: skip
def test_the_table_says_what_may_have_bent_its_figures(facts, expected):
    assert report._health(facts) == expected


def test_the_same_seed_gives_the_same_arrivals_and_background():
    assert profile.shapes(profile.FULL) == profile.shapes(profile.FULL)
    assert profile.background(profile.FULL) == profile.background(profile.FULL)
    other = dataclasses.replace(profile.FULL, seed=8)
    assert profile.shapes(other) != profile.shapes(profile.FULL)


def test_every_shape_stays_within_the_profile_bounds():
    for shape in profile.shapes(profile.FULL):
        assert 0 <= shape.at <= profile.FULL.window
        assert all(1 <= m.gpus <= profile.GPU.count for m in shape.members)
        gang = sum(m.workers or 1 for m in shape.members)
        assert gang == 1 or 2 <= gang <= 4, shape


def test_watch_logs_are_read_event_by_event_skipping_kubectl_messages(tmp_path):
    log = tmp_path / "watch.log"
    log.write_text(
        '{"type": "ADDED", "object": {"metadata": {"name": "a"}}}\n'
        "W1201 some kubectl warning {not json}\n"
        '{\n  "type": "DELETED",\n  "object": {"metadata": {"name": "a"}}\n}\n'
    )
    assert [e["type"] for e in record.events(log)] == ["ADDED", "DELETED"]


SS = (
    "0      0      127.0.0.1:33295      127.0.0.1:40862\n"
    "\t bbr wscale:10,10 bytes_sent:257313 bytes_received:93875 segs_out:304\n"
    "0      3193   127.0.0.1:33295      127.0.0.1:54634\n"
    "\t bbr bytes_acked:376144 bytes_received:266039 segs_in:537\n"
)


def test_a_watch_logs_kubectl_messages_are_read_apart_from_its_events(tmp_path):
    log = tmp_path / "watch.log"
    log.write_text(
        '{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n'
        "Unable to connect to the server: stream error: stream ID 5; INTERNAL_ERROR\n"
        '{\n  "type": "DELETED",\n  "object": {}\n}\n'
    )
    assert record.messages(log) == [
        "Unable to connect to the server: stream error: stream ID 5; INTERNAL_ERROR"
    ]
    assert record.messages(tmp_path / "never-started.log") == []


def test_bytes_received_are_read_per_connection_from_ss():
    assert cost.parse_ss(SS) == {"127.0.0.1:40862": 93875, "127.0.0.1:54634": 266039}


GANG = profile.Shape(
    "g", 0, 1, 1, (profile.Member("Leader", 2, 0), profile.Member("Worker", 2, 0, 2))
)


def _md(name: str, reason: str) -> dict:
    conditions = [{"type": "ReplicasScheduled", "status": "True", "reason": reason}]
    return {"metadata": {"name": name}, "status": {"conditions": conditions}}


def _mr(name: str, deployment: str, verdict: str, *, deleting: bool = False) -> dict:
    meta: dict = {"name": name, "labels": {analysis.DEPLOYMENT_LABEL: deployment}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return {"metadata": meta, "status": {"admission": {"verdict": verdict}}}


def _running(name: str, replica: str, *, bound: bool = True, deleting: bool = False) -> dict:
    meta: dict = {"name": name, "labels": {analysis.REPLICA_LABEL: replica}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    status = "True" if bound else "False"
    return {
        "metadata": meta,
        "status": {"conditions": [{"type": "PodScheduled", "status": status}]},
    }


@pytest.mark.parametrize(
    ("deployments", "replicas", "pods", "want"),
    [
        pytest.param(
            [_md("a", "AllReplicasScheduled"), _md("g", "InsufficientCapacity")],
            [_mr("a-0", "a", "Admitted"), _mr("g-0", "g", "Admitted")],
            [_running("a-0-x", "a-0"), *(_running(f"g-0-{i}", "g-0") for i in range(3))],
            [],
            id="every deployment decided and every admitted replica's pods bound has converged",
        ),
        pytest.param(
            [_md("a", "Placing")], [], [], ["arm/a: Placing"],
            id="a deployment still deciding has not converged",
        ),
        pytest.param(
            [], [_mr("a-0", "a", "Admitted")], [_running("a-0-x", "a-0", bound=False)],
            ["arm/pod a-0-x not bound", "arm/a-0: admitted, 0 of 1 pods bound"],
            id="a pod not bound has not converged",
        ),
        pytest.param(
            [], [_mr("a-0", "a", "Admitted")], [], ["arm/a-0: admitted, 0 of 1 pods bound"],
            id="an admitted replica whose pods are not created yet has not converged",
        ),
        pytest.param(
            [], [_mr("g-0", "g", "Admitted")], [_running("g-0-0", "g-0"), _running("g-0-1", "g-0")],
            ["arm/g-0: admitted, 2 of 3 pods bound"],
            id="a gang has converged only with every pod of it bound",
        ),
        pytest.param(
            [], [_mr("a-0", "a", "Admitted")], [_running("a-0-x", "a-0", deleting=True)],
            ["arm/a-0: admitted, 0 of 1 pods bound"],
            id="a pod being deleted does not count as bound",
        ),
        pytest.param(
            [],
            [_mr("a-0", "a", "Overcommitted"), _mr("a-1", "a", "Admitted", deleting=True)],
            [],
            [],
            id="a replica refused or being deleted expects no pods",
        ),
    ],
)  # fmt: skip
def test_unconverged(deployments, replicas, pods, want):
    given = {"a": ONE_GPU, "g": GANG}
    assert run.unconverged("arm", deployments, replicas, pods, given) == want


class _Listing:
    """A Kube that lists what it was given per kind, or fails as an overloaded server."""

    def __init__(self, listed: dict[str, list[dict]], failing: str = "") -> None:
        self.listed, self.failing = listed, failing

    def list(self, kind: str, namespace: str) -> list[dict]:
        if kind == self.failing:
            raise KubectlFailed(f"kubectl get {kind} exited 1: stream error: INTERNAL_ERROR")
        return self.listed.get(kind, [])


@pytest.mark.parametrize(
    ("failing", "converged"),
    [
        pytest.param("", True, id="every list answered and nothing left: converged"),
        pytest.param(
            "modelreplicas.modelplane.ai", False,
            id="a list the API server fails is a reason, never read as nothing left",
        ),
        pytest.param("pods", False, id="a workload cluster's failed list is a reason too"),
    ],
)  # fmt: skip
def test_a_failed_list_leaves_the_fleet_unconverged(failing, converged):
    control = _Listing(
        {"modeldeployments.modelplane.ai": [_md("a", "AllReplicasScheduled")]}, failing
    )
    workload = _Listing({}, failing)
    why = run._unconverged(control, [workload], {"a": ONE_GPU})  # type: ignore[arg-type]
    assert (why == []) is converged
    assert all("INTERNAL_ERROR" in reason for reason in why)


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param([], (profile.FULL, "1m"), id="no option is the full profile"),
        pytest.param(
            ["--converge-timeout", "240"],
            (dataclasses.replace(profile.FULL, name="custom", converge_timeout=240), "1m"),
            id="--converge-timeout bounds the wait for convergence and makes the profile custom",
        ),
    ],
)
def test_scale_options(args, want):
    assert scale_main._options(args) == want
