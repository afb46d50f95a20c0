"""The `make e2e-settled` run's arithmetic (`modelplane_e2e.scale.settled`): what
a metrics scrape sums, what a window divides, what the table shows."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from modelplane_common.timeutil import format_time
from modelplane_e2e.scale import cost, settled

MD = "modelplane-ai-compose-model-deployment"
MR = "modelplane-ai-compose-model-replica"
MDS = 'controller="composite/modeldeployments.modelplane.ai"'
MRS = 'controller="composite/modelreplicas.modelplane.ai"'
SCRAPE = f"""# HELP function_run_function_request_total Total number of RunFunctionRequests sent.
# TYPE function_run_function_request_total counter
function_run_function_request_total{{function_name="{MD}",grpc_target="dns://x:1"}} 120
function_run_function_request_total{{function_name="{MD}",grpc_target="dns://x:2"}} 30
function_run_function_request_total{{function_name="{MR}",grpc_target="dns://y:1"}} 7
function_run_function_response_total{{function_name="{MD}",grpc_code="OK"}} 149
controller_runtime_reconcile_total{{{MDS},result="requeue_after"}} 40
controller_runtime_reconcile_total{{{MDS},result="error"}} 2
controller_runtime_reconcile_total{{{MRS},result="success"}} 5
controller_runtime_reconcile_total{{controller="say \\"hi\\"",result="success"}} 1
"""


@pytest.mark.parametrize(
    ("metric", "label", "want"),
    [
        pytest.param(
            cost.REQUESTS, "function_name", {MD: 150.0, MR: 7.0},
            id="requests of one function are summed over its targets",
        ),
        pytest.param(
            settled.RECONCILES, "controller",
            {"composite/modeldeployments.modelplane.ai": 42.0,
             "composite/modelreplicas.modelplane.ai": 5.0, 'say "hi"': 1.0},
            id="reconciles are summed over results, an escaped quote read as a quote",
        ),
        pytest.param(
            "function_run_function", "function_name", {},
            id="a metric's name is matched whole, not as a prefix of another",
        ),
        pytest.param(cost.REQUESTS, "nope", {}, id="a sample without the label is not counted"),
    ],
)  # fmt: skip
def test_sums(metric, label, want):
    assert cost.sums(SCRAPE, metric, label) == want


def _reading(at: float, calls: float, wire: int, cpu: dict[str, float]) -> settled.Reading:
    return settled.Reading(
        at=at,
        cpu=cpu,
        requests={MD: calls},
        call_seconds={MD: calls * 0.01},
        reconciles={"modeldeployments": calls / 2},
        wire={MD: wire},
        api_requests={},
    )


START_CPU = {MD: 10.0, f"{MD}-1": 4.0, f"{MD}-dns": 1.0, "crossplane": 50}
END_CPU = {MD: 16.0, f"{MD}-1": 6.0, f"{MD}-dns": 1.5, "crossplane": 80, "new": 2}
WINDOW = settled.Window.between(
    "w",
    _reading(100.0, 1000, 5_000_000, START_CPU),
    _reading(220.0, 1400, 5_000_000 + 400 * 2048, END_CPU),
)  # fmt: skip


@pytest.mark.parametrize(
    ("figure", "want"),
    [
        pytest.param(WINDOW.seconds, 120.0, id="a window is as long as its readings are apart"),
        pytest.param(WINDOW.calls[MD], 200.0, id="calls are per minute of the window"),
        pytest.param(WINDOW.cpu["crossplane"], 15.0, id="CPU is seconds per minute"),
        pytest.param(WINDOW.cpu["new"], 1.0, id="a process started in the window counts from 0"),
        pytest.param(
            WINDOW.function_cpu(MD), 4.0,
            id="a function's CPU is its pods' (name, name-1), not its DNS server's",
        ),
        pytest.param(
            WINDOW.per_call(MD, WINDOW.wire), 2048.0, id="bytes per call are the window's own"
        ),
        pytest.param(WINDOW.per_call(MD, WINDOW.call_seconds), 0.01, id="seconds per call"),
        pytest.param(WINDOW.per_call(MR, WINDOW.wire), None, id="no calls, no figure"),
        pytest.param(WINDOW.reconciles["modeldeployments"], 100.0, id="reconciles per minute"),
    ],
)  # fmt: skip
def test_window(figure, want):
    assert figure == pytest.approx(want) if want is not None else figure is None


NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _xr(status: str | None, opened_ago: timedelta = timedelta()) -> dict:
    if status is None:
        return {"status": {}}
    responsive = {"type": "Responsive", "status": status}
    responsive["lastTransitionTime"] = format_time(NOW - opened_ago)
    return {"status": {"conditions": [responsive]}}


@pytest.mark.parametrize(
    ("listed", "want"),
    [
        pytest.param([], settled.Circuits(0, 0, 0), id="no XRs, no circuits"),
        pytest.param(
            [_xr("True"), _xr(None), _xr("False", timedelta(minutes=1))],
            settled.Circuits(3, 1, 1),
            id="one opened a minute ago: open and dropping; closed and unset are neither",
        ),
        pytest.param(
            [_xr("False", timedelta(minutes=20)), _xr("False", timedelta(minutes=2))],
            settled.Circuits(2, 2, 1),
            id="one read open 20 minutes after opening: open, no longer dropping",
        ),
    ],
)  # fmt: skip
def test_circuits_count_open_and_dropping_by_responsive_condition(listed, want):
    assert settled.Circuits.of(listed, NOW) == want


def test_table_shows_each_window_as_a_column_with_its_figures():
    circuits = {"modeldeployments": settled.Circuits(20, 3, 1)}
    text = settled.table("head", [WINDOW, replace(WINDOW, circuits=circuits)], [MD])
    lines = text.splitlines()
    assert lines[0] == "head"
    assert lines[2] == "| | w | w |"
    assert "| compose-model-deployment, KiB received per call | 2.0 | 2.0 |" in lines
    assert "| compose-model-deployment, ms per call (Crossplane's timing) | 10 | 10 |" in lines
    assert "| compose-model-deployment, CPU s per minute (all pods) | 4.0 | 4.0 |" in lines
    assert "| modelreplicas reconciles per minute | - | - |" in lines
    assert (
        "| modeldeployments reading Responsive False after the window | - "
        "| 3 of 20, 1 opened within 5m30s |"
    ) in lines


@pytest.mark.parametrize(
    ("sizes", "nodes", "per_cluster", "pods"),
    [
        pytest.param(
            settled.PROFILES["fleet"], 275, 138, 2000,
            id="200 x 10 one-GPU pods need 250 nodes, 275 with a tenth more, 138 on each of 2",
        ),
        pytest.param(
            settled.Sizes(), 28, 28, 200,
            id="the default is the small profile: 20 x 10 on 28 nodes of one cluster",
        ),
        pytest.param(
            settled.Sizes(deployments=3, replicas=2), 1, 1, 6, id="a few pods need one node"
        ),
    ],
)  # fmt: skip
def test_sizes(sizes, nodes, per_cluster, pods):
    assert (sizes.nodes, sizes.nodes_per_cluster, sizes.pods) == (nodes, per_cluster, pods)


def test_every_deployment_is_one_replica_shape_of_one_gpu_pod():
    shapes = settled.shapes(settled.Sizes(deployments=3, replicas=4))
    assert [s.name for s in shapes] == ["md-000", "md-001", "md-002"]
    assert {(s.replicas, s.pods_per_replica, s.smallest_pod) for s in shapes} == {(4, 1, (1, 0))}


PROVIDER = "crossplane-contrib-provider-kubernetes"
EVERY_PROCESS = {
    "control-plane-kube-apiserver": 30.0,
    "control-plane-etcd": 2.0,
    "control-plane-kube-controller-manager": 0.5,
    "crossplane": 5.0,
    PROVIDER: 7.0,
    MD: 1.0,
    f"{MD}-1": 1.0,
    f"{MD}-dns": 0.25,
    MR: 3.0,
    "workload-0-kube-apiserver": 20.0,
    "workload-1-etcd": 1.0,
    "workload-0-kwok": 4.0,
    "workload-0-modelplane-agent": 2.0,
    "registry": 0.1,
}


@pytest.mark.parametrize(
    ("served", "want"),
    [
        pytest.param(
            [MD, MR],
            {"control-plane-kube-apiserver", "control-plane-etcd",
             "control-plane-kube-controller-manager", "crossplane", PROVIDER,
             MD, f"{MD}-1", MR},
            id="the control plane's cluster, Crossplane, the provider and every function pod",
        ),
        pytest.param(
            [MD],
            {"control-plane-kube-apiserver", "control-plane-etcd",
             "control-plane-kube-controller-manager", "crossplane", PROVIDER, MD, f"{MD}-1"},
            id="a process of a function not served is not a function's",
        ),
    ],
)  # fmt: skip
def test_the_control_plane_is_its_cluster_crossplane_the_provider_and_the_functions(served, want):
    window = replace(WINDOW, cpu=EVERY_PROCESS)
    assert set(window.control_plane(served)) == want


def test_the_control_planes_cpu_leaves_out_workload_clusters_agents_kwok_registry_and_dns():
    window = replace(WINDOW, cpu=EVERY_PROCESS, replicas=200)
    assert sum(window.control_plane([MD, MR]).values()) == pytest.approx(49.5)
    assert window.settled_line([MD, MR]).endswith("control-plane-cpu-s-per-minute=49.5")


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param([], settled.PROFILES["small"], id="no option is the small profile"),
        pytest.param(
            ["--profile", "fleet"],
            settled.Sizes(deployments=200, replicas=10, clusters=2, batch=20),
            id="the fleet profile is 200 x 10 over two workload clusters",
        ),
        pytest.param(
            ["--profile", "fleet", "--clusters", "3", "--pace", "0.5", "--max-age", "2m"],
            settled.Sizes(deployments=200, clusters=3, batch=20, pace=0.5, max_age="2m"),
            id="an option given overrides its profile's size, the rest stay the profile's",
        ),
    ],
)  # fmt: skip
def test_options(args, want):
    assert settled._options(args) == (want, None, "before")


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--pace", "0"], id="a pace of 0 never creates anything"),
        pytest.param(["--clusters", "0"], id="no workload cluster"),
        pytest.param(["--batch", "-1"], id="a negative batch"),
        pytest.param(["--profile", "huge"], id="a profile that does not exist"),
    ],
)
def test_options_refuse(args, capsys):
    with pytest.raises(SystemExit):
        settled._options(args)
    assert "error:" in capsys.readouterr().err


def test_help_states_what_each_profile_takes_at_least():
    assert settled.PROFILES["small"].describe() == (
        "20 ModelDeployments x 10 replicas (200 ModelReplicas) on 1 workload cluster(s) of 28 "
        "kwok nodes, 5 deployments a batch, at most 1 replicas a second: at least 14 min after "
        "the stack is up (200 s creating, 340 s warm, a 300 s window)"
    )
    assert settled.PROFILES["fleet"].least_seconds == pytest.approx(2000 + 340 + 300)


@pytest.mark.parametrize(
    ("applied_at", "replicas", "pace", "now", "want"),
    [
        pytest.param(100.0, 10, 1.0, 100.0, 10.0, id="10 replicas at 1 a second: 10 s"),
        pytest.param(100.0, 10, 1.0, 104.0, 6.0, id="the time since the last apply counts"),
        pytest.param(100.0, 10, 1.0, 130.0, 0.0, id="a long wait for Ready leaves no pause"),
        pytest.param(100.0, 10, 2.0, 100.0, 5.0, id="twice the pace, half the pause"),
    ],
)  # fmt: skip
def test_pause(applied_at, replicas, pace, now, want):
    assert settled.pause(applied_at, replicas, pace, now) == want


class _Clock:
    def __init__(self) -> None:
        self.at = 0.0

    def now(self) -> float:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.at += seconds


class _Control:
    """A control plane whose applies take 2 s and whose deployments are Ready at once."""

    def __init__(self, clock: _Clock) -> None:
        self.clock = clock
        self.events: list[tuple[float, str]] = []

    def apply(self, doc: dict) -> None:
        self.events.append((self.clock.at, f"apply {doc['metadata']['name']}"))
        self.clock.at += 2.0

    def list(self, kind: str, namespace: str | None = None) -> list[dict]:
        self.events.append((self.clock.at, "list"))
        ready = {"conditions": [{"type": "ReplicasReady", "status": "True"}]}
        return [
            {"metadata": {"name": name.removeprefix("apply ")}, "status": ready}
            for _, name in self.events
            if name.startswith("apply ")
        ]


def test_deployments_go_in_one_at_a_time_at_the_pace_and_each_batch_is_awaited():
    clock = _Clock()
    control = _Control(clock)
    sizes = settled.Sizes(deployments=3, replicas=10, batch=2, pace=1.0)
    took = settled.create(control, sizes, now=clock.now, sleep=clock.sleep)
    assert control.events == [
        (0.0, "apply md-000"),
        (12.0, "apply md-001"),  # 10 s after the first apply returned
        (14.0, "list"),
        (24.0, "apply md-002"),
        (26.0, "list"),
    ]
    assert took == 26.0


def test_table_has_the_control_planes_cpu_and_the_breakdown_of_writes():
    requests = settled.writes.Requests({"objects updates (PUT)": 100.0}, {"GET": 50.0})
    window = replace(WINDOW, cpu=EVERY_PROCESS, replicas=50, api_requests=requests)
    lines = settled.table("head", [window], [MD, MR]).splitlines()
    assert "| ModelReplicas listed before the window | 50 |" in lines
    assert (
        "| the control plane (its cluster, Crossplane, provider-kubernetes, functions), "
        "CPU s per minute | 49.5 |"
    ) in lines
    assert "| the control plane API server's requests per replica-minute | w |" in lines
    assert "| all write requests | 2.00 |" in lines
    assert "| writes: objects updates (PUT) | 2.00 |" in lines
    assert "| not writes: GET | 1.00 |" in lines
