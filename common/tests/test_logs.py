"""Per-request logging: the binding reads any composite, the laps add up."""

from __future__ import annotations

import itertools

import pytest
import structlog
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common import logs
from modelplane_testkit.wire import request


def tagged(xr: dict, tag: str = "t-1") -> fnv1.RunFunctionRequest:
    req = request(xr)
    req.meta.tag = tag
    return req


@pytest.mark.parametrize(
    ("xr", "bound"),
    [
        pytest.param(
            {"kind": "ModelDeployment", "metadata": {"namespace": "team-a", "name": "llm"}},
            ("ModelDeployment", "team-a", "llm"),
            id="a namespaced composite binds its kind, namespace and name",
        ),
        pytest.param(
            {"kind": "InferenceCluster", "metadata": {"name": "east"}},
            ("InferenceCluster", "", "east"),
            id="a cluster-scoped composite binds an empty namespace",
        ),
        pytest.param(
            {"kind": 7, "metadata": "not an object"},
            ("", "", ""),
            id="a composite of the wrong shape binds empty names instead of failing",
        ),
    ],
)
def test_the_request_logger_is_bound_to_the_tag_and_the_composite(xr, bound):
    with structlog.testing.capture_logs() as captured:
        logs.for_request(structlog.get_logger(), tagged(xr)).debug("hello")
    (line,) = captured
    assert (line["tag"], line["xr_kind"], line["xr_namespace"], line["xr_name"]) == (
        "t-1",
        *bound,
    )


def test_the_quiet_logger_accepts_every_level_and_writes_nothing(capsys):
    for level in ("debug", "info", "warning", "error", "exception"):
        getattr(logs.QUIET.bind(x=1), level)("nothing")
    assert capsys.readouterr() == ("", "")


def test_laps_measure_each_phase_from_the_previous_one():
    ticks = itertools.chain([10.0, 10.5, 12.0], itertools.repeat(12.0))
    laps = logs.Laps(clock=lambda: next(ticks))
    laps.lap("read")
    laps.lap("decide")
    assert laps.seconds == {"read": 0.5, "decide": 1.5}
    assert laps.as_fields() == {"read_ms": 500.0, "decide_ms": 1500.0}
