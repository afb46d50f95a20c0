"""The report as values: what a pass says, without a response to write it on."""

from __future__ import annotations

import pytest
from compose_model_deployment import report
from modelplane_common.outcome import Condition, Event
from modelplane_testkit import deployment_builders as t

SHORT = [t.cluster("a", [t.pool("p", 1, histogram=[({"gpu": 8}, 1)])])]


@pytest.mark.parametrize(
    ("previous_scheduled", "warned"),
    [
        pytest.param(None, True, id="a new shortfall is warned about once"),
        pytest.param(1, False, id="an unchanged scheduled count is not warned about again"),
    ],
)
def test_a_short_plan_reports_insufficient_capacity_as_values(previous_scheduled, warned):
    plan = t.schedule(t.deployment(replicas=2, engines=[t.standalone(gpus=8)]), SHORT)
    said = report.of_plan(plan, previous_scheduled=previous_scheduled, was_ready=False, notes=[])
    message = "1 of 2 replicas placed: 1 pool checked, 1 too few free devices"
    assert said.conditions[0] == Condition(
        report.SCHEDULED, "False", "InsufficientCapacity", message
    )
    assert said.ready is False
    assert (Event("Warning", f"InsufficientCapacity: {message}") in said.events) is warned


def test_a_pass_that_keeps_everything_reports_why_and_judges_the_kept_replicas():
    why = report.NothingPlanned(
        desired=2,
        status="False",
        reason="NoClusters",
        message="no InferenceCluster matches",
        needs_action=True,
    )
    said = report.kept_as_is(why, kept=2, kept_ready=2, was_ready=False)
    assert said.conditions[0] == Condition(
        report.SCHEDULED, "False", "NoClusters", "no InferenceCluster matches"
    )
    assert said.ready is True
    assert said.events == (Event("Warning", "NoClusters: no InferenceCluster matches"),)
