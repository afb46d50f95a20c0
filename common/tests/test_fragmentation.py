"""The fragmentation score as the core uses it (modelplane_common.capacity.fragmentation):
the demand a placement is scored against, and the exact growth of a placement."""

from __future__ import annotations

from fractions import Fraction

import pytest
from modelplane_common.capacity.fit import Reservation
from modelplane_common.capacity.fragmentation import Shapes, expected_demand, growth

EXPECTED_DEMAND = [
    pytest.param(
        [(1,), (1,)],
        (8,),
        {(1,): 2, (8,): 2},
        id="the replica's pods, and as many wanting a whole node",
    ),
    pytest.param([(2, 1)], (4, 2), {(2, 1): 1, (4, 2): 1}, id="a whole node claims every kind"),
    pytest.param([], (8,), {}, id="no pod of the replica fits the pool: nothing is expected"),
    pytest.param([(0,)], (0,), {(0,): 1}, id="a pool without devices expects no whole node"),
]


@pytest.mark.parametrize(("pods", "whole_node", "expected"), EXPECTED_DEMAND)
def test_expected_demand(pods, whole_node, expected):
    assert expected_demand(pods, whole_node) == Shapes.of(expected)


ONE_OR_EIGHT = Shapes.of({(1,): 1, (8,): 1})

GROWTH = [
    pytest.param(
        [Reservation(None, (8,), (1,))], Fraction(7, 2), id="breaking a whole node: 7 GPUs x 1/2"
    ),
    pytest.param(
        [Reservation(None, (4,), (1,))], Fraction(-1, 2), id="on a broken node: 1 GPU x 1/2 less"
    ),
    pytest.param([Reservation(None, (8,), (8,))], Fraction(0), id="filling a whole node: 0"),
    pytest.param(
        [Reservation(1, (8,), (1,)), Reservation(1, (7,), (1,))],
        Fraction(6, 2),
        id="pods on one node add up from the node class each found",
    ),
    pytest.param(
        [Reservation(None, (8, 2), (1, 0))],
        Fraction(7, 2),
        id="a kind no shape claims is no device: 7 GPUs x 1/2, not 9 devices",
    ),
]


@pytest.mark.parametrize(("pods", "expected"), GROWTH)
def test_growth_is_the_exact_sum_of_each_pods_increase(pods, expected):
    shapes = ONE_OR_EIGHT if len(pods[0].node) == 1 else Shapes.of({(1, 0): 1, (8, 0): 1})
    assert growth(pods, shapes) == expected


def test_no_expected_demand_means_no_growth():
    assert growth([Reservation(None, (8,), (1,))], Shapes(())) == 0
