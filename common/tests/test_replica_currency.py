"""A replica report's freshness: its own observedAt, or the cluster's replicasCurrentAt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from modelplane_common.replica_currency import (
    of_cluster,
    relayed,
    report_staleness,
    turns_stale_at,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
MAX_AGE = timedelta(minutes=5)
FRESH = NOW - timedelta(minutes=1)
STALE = NOW - timedelta(minutes=20)
FAR_AHEAD = NOW + timedelta(minutes=20)

STALENESS = {
    "a fresh report needs no word from the cluster": (FRESH, None, None),
    "a stale report with no word from the cluster is stale": (STALE, None, "older than 5m"),
    "a stale report the cluster vouches for within maxAge is fresh": (STALE, FRESH, None),
    "a stale report the cluster vouches for exactly maxAge ago is fresh": (
        STALE, NOW - MAX_AGE, None
    ),
    "a stale report the cluster vouched for longer ago is stale": (
        STALE, NOW - MAX_AGE - timedelta(seconds=1), "older than 5m"
    ),
    "a fresh report beside a stale word stays fresh": (FRESH, STALE, None),
    "a word far in the future vouches for nothing": (STALE, FAR_AHEAD, "older than 5m"),
}  # fmt: skip


@pytest.mark.parametrize(
    ("observed_at", "current_at", "expected"), STALENESS.values(), ids=STALENESS.keys()
)
def test_report_staleness(observed_at, current_at, expected):
    assert report_staleness(observed_at, current_at, NOW, MAX_AGE) == expected


def word(at: str) -> dict:
    return {"replicasCurrentAt": at}


RELAYED = {
    "the latest of the pools' words": (
        [word("2026-12-01T11:58:00Z"), word("2026-12-01T11:59:00Z")],
        datetime(2026, 12, 1, 11, 59, tzinfo=UTC),
    ),
    "pools without a word, or not reported yet, are passed over": (
        [None, {"observedAt": "2026-12-01T11:59:00Z"}, word("2026-12-01T11:58:00Z")],
        datetime(2026, 12, 1, 11, 58, tzinfo=UTC),
    ),
    "an unreadable word is passed over": ([word("soon")], None),
    "no pool: no word": ([], None),
}  # fmt: skip


@pytest.mark.parametrize(("reports", "expected"), RELAYED.values(), ids=RELAYED.keys())
def test_relayed(reports, expected):
    assert relayed(reports) == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            {"agent": {"present": True, "replicasCurrentAt": "2026-12-01T11:59:00Z"}},
            datetime(2026, 12, 1, 11, 59, tzinfo=UTC),
            id="the relayed word",
        ),
        pytest.param({"agent": {"present": True}}, None, id="a relay that predates it: none"),
        pytest.param({"agent": "broken"}, None, id="an unreadable agent status: none"),
        pytest.param({}, None, id="no status yet: none"),
    ],
)
def test_of_cluster(status, expected):
    assert of_cluster(status) == expected


TURNS_STALE = {
    "a fresh report alone: maxAge after its observedAt, and a second": (
        FRESH, None, FRESH + MAX_AGE + timedelta(seconds=1)
    ),
    "vouched for later by the cluster: maxAge after that word": (
        STALE, FRESH, FRESH + MAX_AGE + timedelta(seconds=1)
    ),
    "its own observedAt later than the word: maxAge after it": (
        FRESH, STALE, FRESH + MAX_AGE + timedelta(seconds=1)
    ),
    "stale already: no deadline": (STALE, None, None),
    "a word far in the future counts for nothing": (
        FRESH, FAR_AHEAD, FRESH + MAX_AGE + timedelta(seconds=1)
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("observed_at", "current_at", "expected"), TURNS_STALE.values(), ids=TURNS_STALE.keys()
)
def test_turns_stale_at(observed_at, current_at, expected):
    deadline = turns_stale_at(observed_at, current_at, NOW, MAX_AGE)
    assert deadline == expected
    if deadline is not None:  # the first instant the rule reads it stale
        assert report_staleness(observed_at, current_at, deadline, MAX_AGE) is not None
        before = deadline - timedelta(seconds=1)
        assert report_staleness(observed_at, current_at, before, MAX_AGE) is None
