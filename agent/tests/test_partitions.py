"""The largest set of partitionable devices that fit their counters, against brute force."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st
from modelplane_agent import partitions
from modelplane_agent.partitions import largest_fitting
from modelplane_agent.snapshot import Device
from modelplane_common.cel.devices import device_view

COUNTERS = [("d", "p", "set", f"c{i}") for i in range(3)]


def device(i: int, needs: dict[int, Fraction]) -> Device:
    consumes = tuple((COUNTERS[c], Fraction(a)) for c, a in needs.items())
    return Device(("d", "p", f"dev{i}"), device_view({"driver": "d"}), consumes)


def fits(chosen, left) -> bool:
    used: dict = {}
    for d in chosen:
        for key, amount in d.consumes:
            used[key] = used.get(key, 0) + amount
    return all(used[key] <= left[key] for key in used)


def brute_force(devices, left) -> int:
    return max(
        size
        for size in range(len(devices) + 1)
        for chosen in combinations(devices, size)
        if fits(chosen, left)
    )


# Amounts and rooms are exact rationals (quantities such as 1.5Gi or 250m), some of
# them not whole, and a room may be negative (allocated devices over-consuming).
amounts = st.sampled_from([Fraction(1), Fraction(2), Fraction(4), Fraction(1, 2), Fraction(5, 4)])
rooms = st.sampled_from([Fraction(n, 2) for n in range(-2, 13)])
instances = st.tuples(
    st.lists(
        st.dictionaries(st.integers(0, 2), amounts, min_size=1, max_size=3),
        min_size=0,
        max_size=9,
    ),
    st.tuples(rooms, rooms, rooms),
)


@settings(max_examples=300, deadline=None)
@given(instances)
def test_the_count_is_the_largest_set_that_fits_together(instance):
    needs, room = instance
    devices = [device(i, n) for i, n in enumerate(needs)]
    left = dict(zip(COUNTERS, room, strict=True))
    assert largest_fitting(devices, left) == brute_force(devices, left)


@settings(max_examples=100, deadline=None)
@given(instances)
def test_out_of_search_budget_the_count_is_never_more_than_fit(instance):
    needs, room = instance
    devices = [device(i, n) for i, n in enumerate(needs)]
    left = dict(zip(COUNTERS, room, strict=True))
    budget = partitions.SEARCH_BUDGET
    partitions.SEARCH_BUDGET = 2
    try:
        found = largest_fitting(devices, left)
    finally:
        partitions.SEARCH_BUDGET = budget
    assert found <= brute_force(devices, left)
