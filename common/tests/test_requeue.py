from datetime import UTC, datetime, timedelta

import pytest
from crossplane.function.response import DEFAULT_TTL
from modelplane_common import requeue
from modelplane_common.timeutil import format_time

S = timedelta(seconds=1)


def test_settled_is_the_function_sdks_default_ttl():
    assert requeue.SETTLED == DEFAULT_TTL


@pytest.mark.parametrize(
    ("deadlines", "expected"),
    [
        pytest.param((None, None), requeue.SETTLED, id="no deadline: settled"),
        pytest.param((7 * S, requeue.CONVERGING), 7 * S, id="the earliest deadline wins"),
        pytest.param((0 * S, requeue.SETTLED), requeue.FLOOR, id="never below the floor"),
        pytest.param((None, requeue.CONVERGING), requeue.CONVERGING, id="None is no deadline"),
    ],
)
def test_soonest(deadlines, expected):
    assert requeue.soonest(*deadlines) == expected


@pytest.mark.parametrize(
    ("moving", "dropping_events", "expected"),
    [
        pytest.param(True, False, requeue.CONVERGING, id="something on its way: converging"),
        pytest.param(False, True, requeue.CONVERGING, id="events may be dropped: converging"),
        pytest.param(False, False, requeue.SETTLED, id="nothing moving, events flow: settled"),
    ],
)
def test_converging(moving, dropping_events, expected):
    assert requeue.converging(moving, dropping_events=dropping_events) == expected


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
            id="a settled XR still reading False hours after opening: events flow",
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
