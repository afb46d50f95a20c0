"""What `metrics.record` counts for a pass's decisions, and what `guard.served` counts per call.

Each case gives a `Decided` record (what a shell built from its core's
Outcome) and the counter increments it must cause, read from the functions'
registry before and after; nothing else may move.
"""

from __future__ import annotations

import asyncio
import socket
import time
from datetime import timedelta

import pytest
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common import metrics
from modelplane_common.capacity.diagnosis import Cause
from modelplane_common.guard import served
from modelplane_common.inputs import InvalidInput
from modelplane_common.logs import QUIET
from modelplane_common.outcome import Condition
from prometheus_client import REGISTRY as DEFAULT_REGISTRY

FN = "compose-test"

QUOTA_VERDICT = Condition(
    "Admitted", "False", "Overcommitted", "QuotaExceeded: quota q allows 8 gpu: 8 used"
)
OVERCOMMITTED = Condition("Admitted", "False", "Overcommitted", "engine serve: pool a short 2")
ADMITTED = Condition("Admitted", "True", "Admitted", "fits behind 3 replicas")


def _samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every modelplane counter sample of the functions' registry (the `_total` ones)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in metrics.REGISTRY.collect()
        if family.type == "counter"
        for s in family.samples
        if s.name.startswith("modelplane_") and s.name.endswith("_total")
    }


def _increments(before: dict, after: dict) -> dict[tuple[str, tuple], float]:
    return {
        key: value - before.get(key, 0.0)
        for key, value in after.items()
        if value != before.get(key, 0.0)
    }


def _key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (f"{name}_total", tuple(sorted(labels.items())))


RECORD_CASES = {
    "a condition is counted by function, type, status and reason": (
        metrics.Decided(conditions=(Condition("Configured", "True", "ValidSpec", "ok"),)),
        {
            _key(
                "modelplane_function_conditions",
                function=FN,
                type="Configured",
                status="True",
                reason="ValidSpec",
            ): 1
        },
    ),
    "a reason outside design/api.md's set is counted as Other, never as itself": (
        metrics.Decided(conditions=(Condition("Made-Up", "Maybe", "tenant text here", "m"),)),
        {
            _key(
                "modelplane_function_conditions",
                function=FN,
                type="Other",
                status="Other",
                reason="Other",
            ): 1
        },
    ),
    "InsufficientCapacity is counted under ReplicasScheduled and is no quota refusal": (
        metrics.Decided(
            conditions=(Condition("ReplicasScheduled", "False", "InsufficientCapacity", "0/2"),)
        ),
        {
            _key(
                "modelplane_function_conditions",
                function=FN,
                type="ReplicasScheduled",
                status="False",
                reason="InsufficientCapacity",
            ): 1
        },
    ),
    "a deployment's QuotaExceeded is also a quota refusal at placement": (
        metrics.Decided(
            conditions=(Condition("ReplicasScheduled", "False", "QuotaExceeded", "0/2"),)
        ),
        {
            _key(
                "modelplane_function_conditions",
                function=FN,
                type="ReplicasScheduled",
                status="False",
                reason="QuotaExceeded",
            ): 1,
            _key("modelplane_quota_refusals", stage="placement"): 1,
        },
    ),
    "each placement is counted by its cluster and change": (
        metrics.Decided(placements=(("gpu-a", "Placed"), ("gpu-a", "Placed"), ("gpu-b", "Moved"))),
        {
            _key("modelplane_placements", cluster="gpu-a", change="Placed"): 2,
            _key("modelplane_placements", cluster="gpu-b", change="Moved"): 1,
        },
    ),
    "a cluster name that is no DNS subdomain is counted as invalid": (
        metrics.Decided(placements=(("Not A Name!", "Placed"),)),
        {_key("modelplane_placements", cluster="invalid", change="Placed"): 1},
    ),
    "each refused pool is counted by its cluster and cause": (
        metrics.Decided(
            refusals=(
                ("gpu-a", Cause.TOO_FEW_DEVICES),
                ("gpu-a", Cause.TOO_FEW_DEVICES),
                ("gpu-b", Cause.QUOTA_EXCEEDED),
            )
        ),
        {
            _key("modelplane_placement_refusals", cluster="gpu-a", cause="too_few_devices"): 2,
            _key("modelplane_placement_refusals", cluster="gpu-b", cause="quota_exceeded"): 1,
        },
    ),
    "a healed replica is counted by the cluster it leaves and its cause": (
        metrics.Decided(healed=(("gpu-a", "Unschedulable"), ("gpu-a", "whatever else"))),
        {
            _key("modelplane_healing", cluster="gpu-a", cause="Unschedulable"): 1,
            _key("modelplane_healing", cluster="gpu-a", cause="Other"): 1,
        },
    ),
    "each pool verdict is counted by cluster": (
        metrics.Decided(pools=(("gpu-a", "Observed"), ("gpu-a", "Stale"), ("gpu-a", "Stale"))),
        {
            _key("modelplane_pool_verdicts", cluster="gpu-a", verdict="Observed"): 1,
            _key("modelplane_pool_verdicts", cluster="gpu-a", verdict="Stale"): 2,
        },
    ),
    "an admission verdict is counted by cluster": (
        metrics.Decided(admission=("gpu-a", ADMITTED)),
        {_key("modelplane_admission_verdicts", cluster="gpu-a", verdict="Admitted"): 1},
    ),
    "an Overcommitted verdict is counted as Overcommitted": (
        metrics.Decided(admission=("gpu-a", OVERCOMMITTED)),
        {_key("modelplane_admission_verdicts", cluster="gpu-a", verdict="Overcommitted"): 1},
    ),
    "a quota's Overcommitted verdict is QuotaExceeded and a quota refusal at admission": (
        metrics.Decided(admission=("gpu-a", QUOTA_VERDICT)),
        {
            _key("modelplane_admission_verdicts", cluster="gpu-a", verdict="QuotaExceeded"): 1,
            _key("modelplane_quota_refusals", stage="admission"): 1,
        },
    ),
    "nothing decided counts nothing": (metrics.Decided(), {}),
}


@pytest.mark.parametrize(
    ("decided", "expected"), RECORD_CASES.values(), ids=list(RECORD_CASES.keys())
)
def test_record_counts_exactly_what_the_pass_decided(decided, expected):
    before = _samples()
    metrics.record(FN, decided)
    assert _increments(before, _samples()) == expected


WAITING = {"placedAt": "2026-01-01T00:00:00.000000Z"}
RECORDED = {"placedAt": "2026-01-01T00:00:00.000000Z", "verdict": "Admitted", "decidedAt": "x"}

REACHED_CASES = {
    "no verdict after the pass: none reached": (WAITING, None, (ADMITTED,), None),
    "a first verdict is reached": (None, RECORDED, (ADMITTED,), ("c", ADMITTED)),
    "the sticky verdict repeated is not reached again": (
        RECORDED,
        {**RECORDED, "decidedAt": "y", "message": "m"},
        (ADMITTED,),
        None,
    ),
    "a verdict for a new placement is reached": (
        RECORDED,
        {**RECORDED, "placedAt": "2026-01-01T00:05:00.000000Z"},
        (ADMITTED,),
        ("c", ADMITTED),
    ),
    "a status that is not an object before the pass counts as none": (
        "garbage",
        RECORDED,
        (ADMITTED,),
        ("c", ADMITTED),
    ),
    "a verdict without an Admitted condition is not counted": (None, RECORDED, (), None),
}


@pytest.mark.parametrize(
    ("before", "after", "conditions", "expected"),
    REACHED_CASES.values(),
    ids=list(REACHED_CASES.keys()),
)
def test_an_admission_verdict_is_reached_once_per_placement(before, after, conditions, expected):
    assert metrics.reached_admission("c", before, after, conditions) == expected


ADDRESS_CASES = {
    "a port alone listens on every interface": (":8080", ("0.0.0.0", 8080)),
    "a host and port": ("127.0.0.2:9100", ("127.0.0.2", 9100)),
    "an IPv6 host in brackets": ("[::1]:8080", ("::1", 8080)),
}


@pytest.mark.parametrize(
    ("address", "expected"), ADDRESS_CASES.values(), ids=list(ADDRESS_CASES.keys())
)
def test_a_metrics_address_is_host_and_port(address, expected):
    assert metrics.parse_address(address) == expected


@pytest.mark.parametrize("address", ["8080", "host:", "host:http", ":70000"])
def test_a_metrics_address_without_a_port_is_refused(address):
    with pytest.raises(ValueError, match="--metrics-address"):
        metrics.parse_address(address)


def test_the_functions_registry_is_not_the_default_one():
    """The agent and the devtools use prometheus_client too: separate registries keep a
    process's /metrics to its own series."""
    assert metrics.REGISTRY is not DEFAULT_REGISTRY


def _request() -> fnv1.RunFunctionRequest:
    req = fnv1.RunFunctionRequest()
    req.meta.tag = "t"
    return req


def _raise_invalid() -> fnv1.RunFunctionResponse:
    raise InvalidInput("spec", "is not an object", 1)


def _raise_bug() -> fnv1.RunFunctionResponse:
    raise KeyError("bug")


def _slow() -> fnv1.RunFunctionResponse:
    time.sleep(0.5)
    return fnv1.RunFunctionResponse()


CALL_CASES = {
    "an answered call is ok": (fnv1.RunFunctionResponse, "ok"),
    "a composite that cannot be read is invalid_input": (_raise_invalid, "invalid_input"),
    "a raised exception is internal_error": (_raise_bug, "internal_error"),
    "a call past its deadline is deadline_exceeded": (_slow, "deadline_exceeded"),
}


@pytest.mark.parametrize(("run", "result"), CALL_CASES.values(), ids=list(CALL_CASES.keys()))
def test_every_call_is_counted_with_its_result_latency_and_bytes(run, result):
    req = _request()
    function = f"compose-call-{result}"
    before = _samples()
    rsp = asyncio.run(served(req, run, QUIET, timedelta(seconds=0.1), function=function))
    assert _increments(before, _samples()) == {
        _key("modelplane_function_requests", function=function, result=result): 1
    }
    count = metrics.REGISTRY.get_sample_value(
        "modelplane_function_request_duration_seconds_count", {"function": function}
    )
    request_bytes = metrics.REGISTRY.get_sample_value(
        "modelplane_function_request_bytes_sum", {"function": function}
    )
    response_bytes = metrics.REGISTRY.get_sample_value(
        "modelplane_function_response_bytes_sum", {"function": function}
    )
    assert (count, request_bytes, response_bytes) == (1, req.ByteSize(), rsp.ByteSize())


class _Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def warning(self, event: str, **_fields: object) -> None:
        self.lines.append(("warning", event))

    def info(self, event: str, **_fields: object) -> None:
        self.lines.append(("info", event))


def test_an_address_in_use_leaves_the_function_serving_without_metrics():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        log = _Log()
        port = metrics.serve(f"127.0.0.1:{taken.getsockname()[1]}", log)
    assert (port, log.lines) == (None, [("warning", "metrics not served")])


def test_an_empty_address_serves_no_metrics():
    log = _Log()
    assert (metrics.serve("", log), log.lines) == (None, [])
