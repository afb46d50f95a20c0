"""When a cluster the replicas run on cannot be seen: held, or moved after the grace period."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import NamedTuple

import pytest
from compose_model_deployment.absence import judge
from compose_model_deployment.model import MissingCluster

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GRACE = timedelta(minutes=5)


def ago(minutes: float) -> datetime:
    return NOW - timedelta(minutes=minutes)


class Case(NamedTuple):
    spec: str
    used: set[str]  # clusters the deployment's replicas run on
    present: set[str]  # clusters among the selected ones
    unreadable: Mapping[str, str] = MappingProxyType({})  # selected, spec breaks the schema
    remembered: Sequence[MissingCluster] = ()  # status.missingClusters before the pass
    held: AbstractSet[str] = frozenset()  # clusters whose replicas are held this pass
    remembered_after: Sequence[MissingCluster] = ()  # status.missingClusters after it


CASES = [
    Case(
        spec="every cluster present holds nothing and remembers nothing",
        used={"a", "b"},
        present={"a", "b"},
    ),
    Case(
        spec="a cluster just missing is held and remembered from now",
        used={"a", "b"},
        present={"a"},
        held={"b"},
        remembered_after=[MissingCluster("b", NOW)],
    ),
    Case(
        spec="a cluster missing within the grace period is still held",
        used={"a", "b"},
        present={"a"},
        remembered=[MissingCluster("b", ago(4))],
        held={"b"},
        remembered_after=[MissingCluster("b", ago(4))],
    ),
    Case(
        spec="a cluster missing past the grace period is no longer held",
        used={"a", "b"},
        present={"a"},
        remembered=[MissingCluster("b", ago(6))],
        remembered_after=[MissingCluster("b", ago(6))],
    ),
    Case(
        spec="every used cluster missing holds them all, however long",
        used={"a", "b"},
        present={"c"},
        remembered=[MissingCluster("a", ago(60)), MissingCluster("b", ago(60))],
        held={"a", "b"},
        remembered_after=[MissingCluster("a", ago(60)), MissingCluster("b", ago(60))],
    ),
    Case(
        spec="missing plus unreadable is every used cluster too",
        used={"a", "b"},
        present={"c"},
        unreadable={"a": "spec.nodePools: is required"},
        remembered=[MissingCluster("b", ago(60))],
        held={"a", "b"},
        remembered_after=[MissingCluster("b", ago(60))],
    ),
    Case(
        spec="an unreadable cluster is held without a timer",
        used={"a", "b"},
        present={"b"},
        unreadable={"a": "spec.nodePools: is required"},
        held={"a"},
    ),
    Case(
        spec="a cluster that returns is forgotten",
        used={"a", "b"},
        present={"a", "b"},
        remembered=[MissingCluster("b", ago(3))],
    ),
    Case(
        spec="a cluster no replica runs on is forgotten",
        used={"a"},
        present={"a"},
        remembered=[MissingCluster("b", ago(3))],
    ),
    Case(
        spec="a remembered time in the future counts from now",
        used={"a", "b"},
        present={"a"},
        remembered=[MissingCluster("b", NOW + timedelta(hours=1))],
        held={"b"},
        remembered_after=[MissingCluster("b", NOW)],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.spec)
def test_absence(case: Case):
    absences = judge(case.used, case.present, case.unreadable, case.remembered, NOW, GRACE)
    assert set(absences.held) == case.held
    assert list(absences.missing) == list(case.remembered_after)


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
