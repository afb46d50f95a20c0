"""The one rule for message sizes (modelplane_common.outcome): every string a workload
cluster writes is capped where it is read, a message over many items names a few,
and `respond.emit` caps whatever a core built."""

from __future__ import annotations

import pytest
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common.composed import observed_object
from modelplane_common.observation import (
    Blind,
    DeviceKinds,
    Rejected,
    parse_observation,
)
from modelplane_common.outcome import (
    MAX_DETAIL,
    MAX_MESSAGE,
    MAX_NAMED,
    Condition,
    Event,
    brief,
    listed,
    within_cap,
)
from modelplane_common.respond import emit

GPU = DeviceKinds.from_declared([{"name": "gpu", "claim": "DRA", "count": 8}])
HUGE = "x" * 300_000


def undeclared_keys_report() -> dict:
    """The review's report: 512 buckets of 8 undeclared ~58-character keys (318 KB before)."""
    return {
        "observedAt": "2026-11-29T11:59:00Z",
        "observedNodes": 4,
        "nodesByFreeDevices": [
            {"free": {f"{b:04d}-{k}-" + "k" * 50: 1 for k in range(8)}, "nodes": 1}
            for b in range(512)
        ],
    }


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        pytest.param([], "", id="nothing lists as nothing"),
        pytest.param(["a", "b", "c"], "a, b, c", id="up to MAX_NAMED items are all named"),
        pytest.param(
            [f"p{i}" for i in range(64)], "p0, p1, p2 and 61 more", id="past it: and N more"
        ),
    ],
)
def test_an_aggregated_message_names_the_first_few_and_counts_the_rest(items, expected):
    assert MAX_NAMED == 3
    assert listed(items) == expected


@pytest.mark.parametrize(
    ("detail", "expected"),
    [
        pytest.param("observed", "observed", id="a short detail is whole"),
        pytest.param("y" * 200, "y" * (MAX_DETAIL - 3) + "...", id="a long one is cut and marked"),
    ],
)
def test_an_items_detail_inside_an_aggregate_is_brief(detail, expected):
    assert brief(detail) == expected
    assert len(brief(detail)) <= MAX_DETAIL


@pytest.mark.parametrize(
    ("details", "expected"),
    [
        pytest.param(["short"], "a (short)", id="details stay whole while the message fits"),
        pytest.param(
            ["y" * MAX_MESSAGE],
            "a (" + "y" * (MAX_DETAIL - 3) + "...)",
            id="a message that would not fit has every detail brief",
        ),
    ],
)
def test_details_are_whole_when_they_fit_and_brief_when_not(details, expected):
    message = within_cap(lambda detail: "; ".join(f"a ({detail(d)})" for d in details))
    assert message == expected


def test_a_rejected_report_of_thousands_of_defects_names_three_and_counts_the_rest():
    parsed = parse_observation(undeclared_keys_report(), GPU, declared=4)
    assert isinstance(parsed, Rejected)
    # 4,096 undeclared keys, and 512 one-node buckets against 4 observed nodes.
    assert len(parsed.defects) == 512 * 8 + 1
    assert parsed.message.endswith(f" and {512 * 8 + 1 - MAX_NAMED} more")
    assert len(parsed.message) < MAX_MESSAGE


def test_an_agents_observing_false_message_is_capped_where_it_is_read():
    status = {"conditions": [{"type": "Observing", "status": "False", "reason": HUGE}]}
    status["conditions"][0]["message"] = HUGE
    parsed = parse_observation(status, GPU, declared=4)
    assert isinstance(parsed, Blind)
    assert len(parsed.message) == MAX_MESSAGE


def test_a_providers_synced_message_is_capped_where_it_is_read():
    obj = observed_object(
        {"status": {"conditions": [{"type": "Synced", "status": "False", "message": HUGE}]}}
    )
    assert len(obj.synced_message) == MAX_MESSAGE


def test_emit_caps_every_condition_and_event_whatever_a_core_built():
    rsp = fnv1.RunFunctionResponse()
    emit(
        rsp,
        [Condition("CapacityObserved", "False", "SomePoolsUnobserved", HUGE)],
        [Event("Warning", HUGE), Event("Normal", HUGE)],
    )
    assert [len(c.message) for c in rsp.conditions] == [MAX_MESSAGE]
    assert [len(r.message) for r in rsp.results] == [MAX_MESSAGE, MAX_MESSAGE]
