from datetime import UTC, datetime, timedelta

import pytest
from crossplane.function.response import DEFAULT_TTL
from modelplane_common import requeue
from modelplane_common.timeutil import format_time

S = timedelta(seconds=1)


def test_waiting_is_the_function_sdks_default_ttl():
    assert requeue.WAITING == DEFAULT_TTL


@pytest.mark.parametrize(
    ("deadlines", "expected"),
    [
        pytest.param((None, None), requeue.AT_REST_CAP, id="no deadline: the at-rest cap"),
        pytest.param((7 * S, requeue.CONVERGING), 7 * S, id="the earliest deadline wins"),
        pytest.param((0 * S, requeue.WAITING), requeue.FLOOR, id="never below the floor"),
        pytest.param((None, requeue.CONVERGING), requeue.CONVERGING, id="None is no deadline"),
        pytest.param((timedelta(hours=1),), requeue.AT_REST_CAP, id="never past the at-rest cap"),
    ],
)
def test_soonest(deadlines, expected):
    assert requeue.soonest(*deadlines) == expected


AFTER = {
    "events may be dropped: converging, whatever else": (True, False, (), requeue.CONVERGING),
    "events may be dropped while waiting: converging": (True, True, (), requeue.CONVERGING),
    "something on its way, events flow: the event backstop": (False, True, (), requeue.WAITING),
    "at rest with no deadline: the cap": (False, False, (), requeue.AT_REST_CAP),
    "at rest: the earliest deadline": (
        False, False, (3 * 60 * S, 2 * 60 * S, None), 2 * 60 * S
    ),
    "at rest, a deadline past the cap: the cap": (
        False, False, (timedelta(minutes=20),), requeue.AT_REST_CAP
    ),
    "waiting, a deadline sooner than the backstop: the deadline": (
        False, True, (20 * S,), 20 * S
    ),
    "converging, a deadline sooner still: the deadline": (True, False, (3 * S,), 3 * S),
}  # fmt: skip


@pytest.mark.parametrize(
    ("dropping_events", "waiting", "deadlines", "expected"), AFTER.values(), ids=AFTER.keys()
)
def test_after(dropping_events, waiting, deadlines, expected):
    assert requeue.after(dropping_events=dropping_events, waiting=waiting, deadlines=deadlines) == (
        expected
    )


NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def responsive(status, turned=None):
    condition = {"type": "Responsive", "status": status}
    if turned is not None:
        condition["lastTransitionTime"] = format_time(NOW - turned)
    return {"conditions": [condition]}


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(responsive("False", 60 * S), True, id="opened a minute ago: dropping"),
        pytest.param(
            responsive("False", requeue.DROPPING_FOR - S),
            True,
            id="a second short of cooldown and half-open interval: still dropping",
        ),
        pytest.param(
            responsive("False", requeue.DROPPING_FOR),
            False,
            id="past cooldown and half-open interval: the next event passes",
        ),
        pytest.param(
            responsive("False", timedelta(hours=3)),
            False,
            id="an XR at rest still reading False hours after opening: events flow",
        ),
        pytest.param(responsive("False"), True, id="no transition time: read as just opened"),
        pytest.param(responsive("False", -60 * S), True, id="a future transition: just opened"),
        pytest.param(responsive("True", 60 * S), False, id="Responsive True: events flow"),
        pytest.param({}, False, id="no condition yet: events flow"),
        pytest.param({"conditions": "x"}, False, id="unreadable: events flow"),
    ],
)
def test_dropping_events_reads_crossplanes_responsive_condition_and_its_age(status, expected):
    assert requeue.dropping_events(status, NOW) is expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(responsive("False", 60 * S), True, id="False a minute ago: open"),
        pytest.param(
            responsive("False", timedelta(hours=3)),
            True,
            id="False for hours: still reads open, though it drops nothing",
        ),
        pytest.param(responsive("True", 60 * S), False, id="Responsive True: closed"),
        pytest.param({}, False, id="no condition yet: closed"),
        pytest.param({"conditions": "x"}, False, id="unreadable: closed"),
    ],
)
def test_reads_open_is_what_the_responsive_condition_says(status, expected):
    assert requeue.reads_open(status) is expected


UNTIL = {
    "a deadline ahead: the time to it": (NOW + 90 * S, 90 * S),
    "a deadline passed: none (this pass saw what it changes)": (NOW - S, None),
    "a deadline now: none": (NOW, None),
    "no deadline: none": (None, None),
}


@pytest.mark.parametrize(("deadline", "expected"), UNTIL.values(), ids=UNTIL.keys())
def test_until(deadline, expected):
    assert requeue.until(deadline, NOW) == expected
