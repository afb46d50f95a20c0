"""When a cluster the replicas run on cannot be seen: held, or moved after the grace period."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from compose_model_deployment.absence import judge
from compose_model_deployment.model import MissingCluster

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GRACE = timedelta(minutes=5)


def ago(minutes: float) -> datetime:
    return NOW - timedelta(minutes=minutes)


# (used, present, unreadable, remembered, held clusters, remembered after)
CASES = {
    "every cluster present holds nothing and remembers nothing": (
        {"a", "b"},
        {"a", "b"},
        {},
        [],
        set(),
        [],
    ),
    "a cluster just missing is held and remembered from now": (
        {"a", "b"},
        {"a"},
        {},
        [],
        {"b"},
        [MissingCluster("b", NOW)],
    ),
    "a cluster missing within the grace period is still held": (
        {"a", "b"},
        {"a"},
        {},
        [MissingCluster("b", ago(4))],
        {"b"},
        [MissingCluster("b", ago(4))],
    ),
    "a cluster missing past the grace period is no longer held": (
        {"a", "b"},
        {"a"},
        {},
        [MissingCluster("b", ago(6))],
        set(),
        [MissingCluster("b", ago(6))],
    ),
    "every used cluster missing holds them all, however long": (
        {"a", "b"},
        {"c"},
        {},
        [MissingCluster("a", ago(60)), MissingCluster("b", ago(60))],
        {"a", "b"},
        [MissingCluster("a", ago(60)), MissingCluster("b", ago(60))],
    ),
    "missing plus unreadable is every used cluster too": (
        {"a", "b"},
        {"c"},
        {"a": "spec.nodePools: is required"},
        [MissingCluster("b", ago(60))],
        {"a", "b"},
        [MissingCluster("b", ago(60))],
    ),
    "an unreadable cluster is held without a timer": (
        {"a", "b"},
        {"b"},
        {"a": "spec.nodePools: is required"},
        [],
        {"a"},
        [],
    ),
    "a cluster that returns is forgotten": (
        {"a", "b"},
        {"a", "b"},
        {},
        [MissingCluster("b", ago(3))],
        set(),
        [],
    ),
    "a cluster no replica runs on is forgotten": (
        {"a"},
        {"a"},
        {},
        [MissingCluster("b", ago(3))],
        set(),
        [],
    ),
    "a remembered time in the future counts from now": (
        {"a", "b"},
        {"a"},
        {},
        [MissingCluster("b", NOW + timedelta(hours=1))],
        {"b"},
        [MissingCluster("b", NOW)],
    ),
}


@pytest.mark.parametrize(
    ("used", "present", "unreadable", "remembered", "held", "after"),
    CASES.values(),
    ids=CASES.keys(),
)
def test_absence(used, present, unreadable, remembered, held, after):
    absences = judge(used, present, unreadable, remembered, NOW, GRACE)
    assert set(absences.held) == held
    assert list(absences.missing) == after


def test_the_reasons_say_why_and_hold_no_times():
    partial = judge({"a", "b"}, {"a"}, {}, [], NOW, GRACE).held["b"]
    assert partial == (
        "InferenceCluster b is missing; its replicas stay for the 5m "
        "missingClusterGracePeriod, then move"
    )
    everything = judge({"a"}, {"c"}, {}, [], NOW, GRACE).held["a"]
    assert everything == (
        "every InferenceCluster this deployment runs on is missing (a); nothing moves until "
        "one returns"
    )
