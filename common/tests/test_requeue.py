from datetime import timedelta

import pytest
from crossplane.function.response import DEFAULT_TTL
from modelplane_common import requeue

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
    ("moving", "circuit_open", "expected"),
    [
        pytest.param(True, False, requeue.CONVERGING, id="something on its way: converging"),
        pytest.param(False, True, requeue.CONVERGING, id="events may be dropped: converging"),
        pytest.param(False, False, requeue.SETTLED, id="nothing moving, events flow: settled"),
    ],
)
def test_converging(moving, circuit_open, expected):
    assert requeue.converging(moving, circuit_open=circuit_open) == expected


def responsive(status):
    return {"conditions": [{"type": "Responsive", "status": status}]}


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(responsive("False"), True, id="Responsive False: the circuit is open"),
        pytest.param(responsive("True"), False, id="Responsive True: events flow"),
        pytest.param({}, False, id="no condition yet: events flow"),
        pytest.param({"conditions": "x"}, False, id="unreadable: events flow"),
    ],
)
def test_circuit_open_reads_crossplanes_responsive_condition(status, expected):
    assert requeue.circuit_open(status) is expected
