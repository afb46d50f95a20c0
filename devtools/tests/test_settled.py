"""The settled-fleet run's arithmetic (`modelplane_devtools.e2e.scale.settled`): what
a metrics scrape sums, what a window divides, what the table shows."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from modelplane_common.timeutil import format_time
from modelplane_devtools.e2e.scale import cost, settled

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
    ("sizes", "nodes", "pods"),
    [
        pytest.param(
            settled.Sizes(), 275, 2000,
            id="200 x 10 one-GPU pods need 250 nodes, 275 with a tenth more",
        ),
        pytest.param(settled.Sizes(deployments=3, replicas=2), 1, 6, id="a few pods need one node"),
    ],
)  # fmt: skip
def test_sizes(sizes, nodes, pods):
    assert (sizes.nodes, sizes.pods) == (nodes, pods)


def test_every_deployment_is_one_replica_shape_of_one_gpu_pod():
    shapes = settled.shapes(settled.Sizes(deployments=3, replicas=4))
    assert [s.name for s in shapes] == ["md-000", "md-001", "md-002"]
    assert {(s.replicas, s.pods_per_replica, s.smallest_pod) for s in shapes} == {(4, 1, (1, 0))}
