"""Freshness as an InferenceCluster publishes it: verdicts that flip, under a lease."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from modelplane_common.currency import (
    LEASE,
    RENEW_WITHIN,
    deadlines,
    lapsed,
    lease,
    pool_current_until,
    published_times,
    relayed,
    replicas_current_until,
    report_staleness,
    turns_stale_at,
    vouched_until,
)
from modelplane_common.timeutil import format_time

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
MAX_AGE = timedelta(minutes=5)
SECOND = timedelta(seconds=1)
FRESH = NOW - timedelta(minutes=1)
STALE = NOW - timedelta(minutes=20)
VOUCHED = NOW + timedelta(minutes=20)
LAPSED = NOW - SECOND
FAR_AHEAD = NOW + 3 * LEASE

STALENESS = {
    "a fresh report needs no word from the cluster": (FRESH, None, None),
    "a stale report with no word from the cluster is stale": (STALE, None, "older than 5m"),
    "a stale report the cluster vouches for is fresh": (STALE, VOUCHED, None),
    "a stale report vouched for until exactly now is fresh": (STALE, NOW, None),
    "a stale report whose cluster's word lapsed is stale": (STALE, LAPSED, "older than 5m"),
    "a fresh report beside a lapsed word stays fresh": (FRESH, LAPSED, None),
    "a word vouching far beyond any lease vouches for nothing": (STALE, FAR_AHEAD, "older than 5m"),
}  # fmt: skip


@pytest.mark.parametrize(
    ("observed_at", "current_until", "expected"), STALENESS.values(), ids=STALENESS.keys()
)
def test_report_staleness(observed_at, current_until, expected):
    assert report_staleness(observed_at, current_until, NOW, MAX_AGE) == expected


TURNS_STALE = {
    "a fresh report alone: maxAge after its observedAt, and a second": (
        FRESH, None, FRESH + MAX_AGE + SECOND
    ),
    "a stale report vouched for: a second after the cluster's word lapses": (
        STALE, VOUCHED, VOUCHED + SECOND
    ),
    "a fresh report whose own time outlasts the word: its own time": (
        FRESH, NOW + SECOND, FRESH + MAX_AGE + SECOND
    ),
    "stale already: no deadline": (STALE, None, None),
    "a word far beyond any lease counts for nothing": (FRESH, FAR_AHEAD, FRESH + MAX_AGE + SECOND),
}  # fmt: skip


@pytest.mark.parametrize(
    ("observed_at", "current_until", "expected"), TURNS_STALE.values(), ids=TURNS_STALE.keys()
)
def test_turns_stale_at(observed_at, current_until, expected):
    deadline = turns_stale_at(observed_at, current_until, NOW, MAX_AGE)
    assert deadline == expected
    if deadline is not None:  # the first instant the rule reads it stale
        assert report_staleness(observed_at, current_until, deadline, MAX_AGE) is not None
        assert report_staleness(observed_at, current_until, deadline - SECOND, MAX_AGE) is None


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


HISTOGRAM = [{"free": {"gpu": 8}, "nodes": 2}]
T1, T2 = STALE, STALE + timedelta(minutes=1)
NOW_READS = {"observedNodes": 2, "nodesByFreeDevices": HISTOGRAM}


def entry(observed_at: datetime, changed_at: datetime | None, **changes) -> dict:
    """A pool's previous gpuPools entry as compose-inference-cluster published it."""
    out = {**NOW_READS, "observedAt": format_time(observed_at), **changes}
    if changed_at is not None:
        out["changedAt"] = format_time(changed_at)
    return out


# As the previous status reads back from protobuf: every number a float.
AS_FLOATS = {"observedNodes": 2.0, "nodesByFreeDevices": [{"free": {"gpu": 8.0}, "nodes": 2.0}]}

PUBLISHED_TIMES = {
    "no previous entry: the report's time, as observed and changed": (
        None, NOW_READS, (FRESH, FRESH)
    ),
    "first seen, not yet confirmed: the next report confirms it": (
        entry(T1, T1), NOW_READS, (FRESH, T1)
    ),
    "confirmed: a heartbeat showing the same moves nothing": (entry(T2, T1), NOW_READS, (T2, T1)),
    "read back from protobuf, the same is still the same": (
        entry(T2, T1, **AS_FLOATS), NOW_READS, (T2, T1)
    ),
    "a changed histogram: the report's time": (
        entry(T2, T1), {**NOW_READS, "nodesByFreeDevices": [{"free": {"gpu": 7}, "nodes": 2}]},
        (FRESH, FRESH),
    ),
    "a changed node count: the report's time": (
        entry(T2, T1), {**NOW_READS, "observedNodes": 3}, (FRESH, FRESH)
    ),
    "a previous entry without changedAt (an older publisher): the report's time": (
        entry(T2, None), NOW_READS, (FRESH, FRESH)
    ),
    "a previous entry with an unreadable time: the report's time": (
        {**entry(T2, T1), "observedAt": "yesterday"}, NOW_READS, (FRESH, FRESH)
    ),
    "a previous time later than the report (a cache ahead of the agent): the report's": (
        entry(NOW, T1), NOW_READS, (FRESH, FRESH)
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("previous", "published", "expected"), PUBLISHED_TIMES.values(), ids=PUBLISHED_TIMES.keys()
)
def test_published_times(previous, published, expected):
    assert published_times(previous, published, FRESH) == expected


def status_vouched(until: datetime | str | None, **agent) -> dict:
    if isinstance(until, datetime):
        agent["vouchedUntil"] = format_time(until)
    elif until is not None:
        agent["vouchedUntil"] = until
    return {"agent": agent}


LEASE_CASES = {
    "none published yet: LEASE from now": (status_vouched(None), NOW + LEASE),
    "more than RENEW_WITHIN left: kept, so the status does not change": (
        status_vouched(NOW + RENEW_WITHIN + SECOND), NOW + RENEW_WITHIN + SECOND
    ),
    "RENEW_WITHIN or less left: renewed": (status_vouched(NOW + RENEW_WITHIN), NOW + LEASE),
    "lapsed: renewed": (status_vouched(LAPSED), NOW + LEASE),
    "a little further ahead than LEASE (a function pod's clock ahead): kept": (
        status_vouched(NOW + LEASE + SECOND), NOW + LEASE + SECOND
    ),
    "further ahead than any reader trusts: replaced": (status_vouched(FAR_AHEAD), NOW + LEASE),
    "unreadable: replaced": (status_vouched("soon"), NOW + LEASE),
}  # fmt: skip


@pytest.mark.parametrize(("previous", "expected"), LEASE_CASES.values(), ids=LEASE_CASES.keys())
def test_lease(previous, expected):
    assert lease(previous, NOW) == expected


READ = {
    "a current pool is trusted until the lease": (
        {"current": True}, status_vouched(VOUCHED), VOUCHED
    ),
    "a pool judged not current: no trust": ({"current": False}, status_vouched(VOUCHED), None),
    "a pool without a verdict (an older publisher): no trust": ({}, status_vouched(VOUCHED), None),
    "a current pool without a lease: no trust": ({"current": True}, status_vouched(None), None),
    "a verdict that is not a boolean: no trust": (
        {"current": "true"}, status_vouched(VOUCHED), None
    ),
}  # fmt: skip


@pytest.mark.parametrize(("entry", "status", "expected"), READ.values(), ids=READ.keys())
def test_pool_current_until(entry, status, expected):
    assert pool_current_until(entry, status) == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            status_vouched(VOUCHED, replicasCurrent=True), VOUCHED, id="current: the lease"
        ),
        pytest.param(status_vouched(VOUCHED, replicasCurrent=False), None, id="not current: none"),
        pytest.param(status_vouched(VOUCHED), None, id="no verdict (no agent word): none"),
        pytest.param({"agent": "broken"}, None, id="an unreadable agent status: none"),
        pytest.param({}, None, id="no status yet: none"),
    ],
)
def test_replicas_current_until(status, expected):
    assert replicas_current_until(status) == expected
    assert vouched_until(status) in (VOUCHED, None)


LAPSED_CASES = {
    "a verdict that holds: current": (VOUCHED, None),
    "held until exactly now: current": (NOW, None),
    "judged not current by the cluster": (None, "its InferenceCluster judges"),
    "a lease that ran out: the cluster stopped reconciling": (LAPSED, "word lapsed"),
    "a lease beyond any the cluster sets: not trusted": (FAR_AHEAD, "too far ahead"),
}  # fmt: skip


@pytest.mark.parametrize(("until", "expected"), LAPSED_CASES.values(), ids=LAPSED_CASES.keys())
def test_lapsed(until, expected):
    said = lapsed(until, NOW)
    assert (said is None) if expected is None else (expected in said)


def test_deadlines_are_each_current_time_turning_stale_and_the_lease_renewal():
    held = NOW + LEASE
    assert deadlines([FRESH, STALE, None], held, NOW, MAX_AGE) == [
        FRESH + MAX_AGE + SECOND,
        held - RENEW_WITHIN,
    ]
