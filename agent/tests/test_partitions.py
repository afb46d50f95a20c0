"""How many partitionable devices first fit gives out, against a model of kube-scheduler's
search and against brute force."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations, permutations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from modelplane_agent.partitions import first_fit_count, order_dependent
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


def allocate_claim(order, taken: list, size: int, left) -> bool:
    """One claim of `size` devices as kube-scheduler's allocator searches for it: depth
    first, each position trying every device in order that is not taken and fits beside
    the taken ones; the first complete solution wins (`allocateOne`)."""
    if size == 0:
        return True
    for candidate in order:
        if candidate in taken or not fits([*taken, candidate], left):
            continue
        taken.append(candidate)
        if allocate_claim(order, taken, size - 1, left):
            return True
        taken.pop()
    return False


def claims_granted(orders, size: int, left, limit: int) -> int:
    """Claims of `size` devices allocated one after another (up to `limit`) until one
    fails, the n-th claim reading the slices in `orders[n % len(orders)]`."""
    taken: list = []
    granted = 0
    while granted < limit and allocate_claim(orders[granted % len(orders)], taken, size, left):
        granted += 1
    return granted


def fewest_granted(orders, taken: tuple, left) -> int:
    """The fewest one-device claims granted one after another, each reading the slices in
    any of `orders` (an exhaustive walk over the allocator's choices)."""
    outcomes = []
    for order in orders:
        chosen = list(taken)
        if allocate_claim(order, chosen, 1, left):
            outcomes.append(1 + fewest_granted(orders, tuple(chosen), left))
    return min(outcomes, default=0)


# Amounts and rooms are exact rationals (quantities such as 1.5Gi or 250m), some of
# them not whole, and a room may be negative (allocated devices over-consuming).
amounts = st.sampled_from([Fraction(1), Fraction(2), Fraction(4), Fraction(1, 2), Fraction(5, 4)])
rooms = st.sampled_from([Fraction(n, 2) for n in range(-2, 13)])
instances = st.tuples(
    st.lists(
        st.tuples(st.integers(0, 2), st.dictionaries(st.integers(0, 2), amounts, min_size=1)),
        min_size=0,
        max_size=8,
    ),
    st.tuples(rooms, rooms, rooms),
)


def unpack(instance):
    placed, room = instance
    placed = sorted(placed, key=lambda p: p[0])  # each slice's devices together
    devices = [device(i, needs) for i, (_, needs) in enumerate(placed)]
    slices = [s for s, _ in placed]
    return devices, slices, dict(zip(COUNTERS, room, strict=True))


def slice_orders(devices, slices):
    """Every order the allocator may read the slices in, each slice's devices kept in order."""
    for order in permutations(dict.fromkeys(slices)):
        yield [d for s in order for d, of in zip(devices, slices, strict=True) if of == s]


@settings(max_examples=200, deadline=None)
@given(instances, st.integers(1, 3), st.randoms(use_true_random=False))
def test_every_claim_the_count_promises_is_granted_one_after_another_in_any_slice_orders(
    instance, size, rng
):
    devices, slices, left = unpack(instance)
    promised = first_fit_count(devices, slices, left) // size
    orders = list(slice_orders(devices, slices))
    rng.shuffle(orders)  # each claim may read the slices in another order
    assert claims_granted(orders, size, left, promised) == promised


@settings(max_examples=200, deadline=None)
@given(instances)
def test_the_count_is_the_fewest_one_device_claims_granted_over_every_slice_order(instance):
    devices, slices, left = unpack(instance)
    orders = list(slice_orders(devices, slices))
    assert first_fit_count(devices, slices, left) == fewest_granted(orders, (), left)


@settings(max_examples=200, deadline=None)
@given(instances)
def test_the_count_never_exceeds_the_largest_set_that_fits_together(instance):
    devices, slices, left = unpack(instance)
    assert first_fit_count(devices, slices, left) <= brute_force(devices, left)


def gpu(*sizes: int) -> list[Device]:
    """One GPU's partitions of the given sizes on one 8-unit counter, in published order."""
    return [device(i, {0: Fraction(size)}) for i, size in enumerate(sizes)]


@pytest.mark.parametrize(
    ("devices", "slices", "count"),
    [
        pytest.param(gpu(8, 4, 4), [0, 0, 0], 1, id="the whole GPU published first takes it all"),
        pytest.param(gpu(4, 4, 8), [0, 0, 0], 2, id="the halves published first are both given"),
        pytest.param(
            gpu(4, 4, 8), [0, 0, 1], 1, id="the whole GPU in a slice of its own may come first"
        ),
        pytest.param(
            gpu(4, 1, 5, 4, 1, 2),
            [0, 0, 1, 1, 1, 1],
            2,
            id="each claim may read the slices in another order: 4 then the other's 4",
        ),
        pytest.param(
            gpu(1, 1, 1, 1, 1), [0, 1, 2, 3, 4], 0, id="a group over five slices counts none"
        ),
    ],
)
def test_first_fit_count(devices, slices, count):
    assert first_fit_count(devices, slices, {COUNTERS[0]: Fraction(8)}) == count


def most_granted(orders, taken: tuple, left) -> int:
    """The most one-device claims granted one after another, each reading the slices in
    any of `orders` (the same walk as `fewest_granted`)."""
    outcomes = []
    for order in orders:
        chosen = list(taken)
        if allocate_claim(order, chosen, 1, left):
            outcomes.append(1 + most_granted(orders, tuple(chosen), left))
    return max(outcomes, default=0)


@settings(max_examples=150, deadline=None)
@given(instances)
def test_the_count_is_order_dependent_exactly_where_some_slice_order_gives_more(instance):
    devices, slices, left = unpack(instance)
    orders = list(slice_orders(devices, slices))
    more = most_granted(orders, (), left) > fewest_granted(orders, (), left)
    assert order_dependent(devices, slices, left) == more


@pytest.mark.parametrize(
    ("devices", "slices", "dependent"),
    [
        pytest.param(
            gpu(2, 2, 2, 2, 4),
            [0, 0, 0, 0, 1],
            True,
            id="a bigger partition in a slice of its "
            "own taken first leaves fewer: the count is the worst order's, and says so",
        ),
        pytest.param(gpu(2, 2, 2, 2, 4), [0, 0, 0, 0, 0], False, id="one slice has one order"),
        pytest.param(
            gpu(4, 4, 4, 4), [0, 0, 1, 1], False, id="slices whose every order gives as many"
        ),
    ],
)
def test_order_dependent(devices, slices, dependent):
    assert order_dependent(devices, slices, {COUNTERS[0]: Fraction(8)}) is dependent
