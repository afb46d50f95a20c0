"""How many partitionable devices of one kind kube-scheduler gives out (KEP-4815 shared counters).

A partitionable device consumes amounts of its resource pool's shared
counters (`consumesCounters` against `sharedCounters`), and the allocator
gives out a device only while its consumption, added to what the allocated
devices of the pool already consume, stays within every counter.

kube-scheduler's allocator does not look for the best set: for each device a
claim asks for it takes the FIRST device, in its pool's slice order and each
slice's device order, that fits beside what is allocated (the first solution
of a depth-first search; kubernetes@v1.35.4
`structured/internal/incubating/allocator_incubating.go`, `allocateOne`). So
the fleet's pods, placed one after another on a node, get the devices that
sequential first fit picks, and a layout published largest first (the whole
GPU before its partitions) gives the first one-device claim the whole GPU.

`first_fit_count` is the number of one-device claims sequential first fit
satisfies. It is also what claims of `d` devices get, `count // d` of them:
a d-device claim's search takes the same first d devices the one-device
sequence would (each the first that fits beside the earlier ones), so a
series of claims walks such a sequence. Where it cannot find d, the search
may still backtrack to a set the count does not promise: an under-promise.

The order of the slices of one resource pool is not fixed: kube-scheduler
gathers them afresh for each pod from its informer's cache, in map order
(kubernetes@v1.35.4 `structured/internal/incubating/pools_incubating.go`,
`GatherPools`). So where a group of devices linked by counters (one GPU's
placements) is published in several slices, each claim may read them in
another order: its device is the first that fits of whichever slice it
reads first that has one, and the group counts the FEWEST claims such
choices satisfy before none fits (`_fewest_picks`, a search over the sets
taken, at most `SEARCH_BUDGET` of them). Where the most such choices satisfy
is more, the count is an under-promise the agent cannot avoid (the order is
kube-scheduler's map order), and says so: `order_dependent` is true, and the
node's devices of that kind not counted name `SLICE_ORDER`. A group spread over more than
`MAX_ORDERED_SLICES` slices, or whose search runs past the budget, counts
none (never seen from a driver; nothing rather than a guess). Devices that
share no counter are independent: each group is solved on its own.

Cost: one pass over a group's devices when it is in one slice (the usual
case: the A100 layout of 19 placements in microseconds, cheaper than the
largest-set search it replaces); a group over several slices visits at most
`SEARCH_BUDGET` sets taken. A node's result is cached with its free vector
until an event touches the node.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction

from modelplane_agent.snapshot import CounterKey, Device

# Beyond as many slices, a group counts none.
MAX_ORDERED_SLICES = 4
# Sets taken `_fewest_picks` visits at most (a few per claim for real layouts).
SEARCH_BUDGET = 20_000

# Why a kind counts fewer partitions than kube-scheduler may give out on a node: a
# GPU's placements published over several slices, which it reads in map order.
SLICE_ORDER = "partitions over several slices (first fit depends on their order)"

# What one device consumes, in whole units of each counter (see `_in_units`).
Need = tuple[tuple[CounterKey, int], ...]


def first_fit_count(
    devices: Sequence[Device],
    slices: Sequence[int],
    left: Mapping[CounterKey, Fraction],
    doubtful: Sequence[bool] = (),
) -> int:
    """How many one-device claims kube-scheduler's first fit satisfies from `devices`, one
    after another, beside what `left` says allocated devices left of the counters.

    `devices` are in the allocator's order within each slice; `slices[i]` names the
    slice (any integer) of `devices[i]`. Every device must consume only counters of
    `left` with readable amounts (the caller leaves the others out: they can never be
    given out). A group holding a `doubtful` device (one a claim may take but the
    fleet was not told of: it differs from the declaration) counts none: which
    devices a claim gets from it depends on selectors the count cannot see.
    """
    return first_fit(devices, slices, left, doubtful)[0]


def order_dependent(
    devices: Sequence[Device], slices: Sequence[int], left: Mapping[CounterKey, Fraction]
) -> bool:
    """Whether some group of `devices` (as for `first_fit_count`) spread over several
    slices gives more one-device claims in some order of its slices than in the worst
    one, which `first_fit_count` counts: an under-promise to name."""
    return first_fit(devices, slices, left)[1]


def first_fit(
    devices: Sequence[Device],
    slices: Sequence[int],
    left: Mapping[CounterKey, Fraction],
    doubtful: Sequence[bool] = (),
) -> tuple[int, bool]:
    """`first_fit_count` and `order_dependent` at once (the groups found once)."""
    exact = [[(key, amount) for key, amount in d.consumes if amount is not None] for d in devices]
    needs, room = _in_units(exact, left)
    doubts = tuple(doubtful) or (False,) * len(needs)
    placed = list(zip(slices, needs, doubts, strict=True))
    counts = [_worst_order(group, room) for group in _groups(placed)]
    return sum(worst for worst, _ in counts), any(more for _, more in counts)


def _in_units(
    exact: list[list[tuple[CounterKey, Fraction]]], left: Mapping[CounterKey, Fraction]
) -> tuple[list[Need], dict[CounterKey, int]]:
    """The same problem in integers: each counter scaled by the least common multiple of
    the denominators it involves (quantities are exact rationals), so the search adds
    small integers instead of fractions, with the same answers."""
    scale = {key: value.denominator for key, value in left.items()}
    for need in exact:
        for key, amount in need:
            scale[key] = math.lcm(scale[key], amount.denominator)
    needs = [tuple((key, _units(amount, scale[key])) for key, amount in need) for need in exact]
    room = {key: _units(value, scale[key]) for key, value in left.items()}
    return needs, room


def _units(value: Fraction, scale: int) -> int:
    return value.numerator * (scale // value.denominator)  # exact: scale is a multiple


# A device's slice, what it consumes and whether it is doubtful, in allocator order.
Placed = tuple[int, Need, bool]


def _groups(placed: list[Placed]) -> list[list[Placed]]:
    """Devices linked, directly or not, by a counter they both consume (order kept)."""
    parent: dict[CounterKey, CounterKey] = {}

    def root(key: CounterKey) -> CounterKey:
        while (up := parent.setdefault(key, key)) != key:
            parent[key] = parent.setdefault(up, up)  # path halving
            key = up
        return key

    for _, need, _ in placed:
        for key, _ in need[1:]:
            parent[root(key)] = root(need[0][0])
    groups: dict[CounterKey | None, list[Placed]] = {}
    for each in placed:
        need = each[1]
        groups.setdefault(root(need[0][0]) if need else None, []).append(each)
    return list(groups.values())


def _worst_order(group: list[Placed], left: Mapping[CounterKey, int]) -> tuple[int, bool]:
    """The fewest one-device claims first fit satisfies from the group, whatever order
    of its slices each claim reads them in; and whether some order satisfies more."""
    if any(doubt for _, _, doubt in group):
        return 0, False
    if not group[0][1]:
        return len(group), False  # consuming nothing: every one fits
    slices = list(dict.fromkeys(s for s, _, _ in group))
    runs = [[need for of, need, _ in group if of == s] for s in slices]
    if len(runs) == 1:
        return _sequential_first_fit(runs[0], left), False
    if len(runs) > MAX_ORDERED_SLICES:
        return 0, False
    fewest = _fewest_picks(runs, left)
    return fewest, _fewest_picks(runs, left, most=True) > fewest


class _OverBudget(Exception):
    pass


def _fewest_picks(
    runs: list[list[Need]], left: Mapping[CounterKey, int], most: bool = False
) -> int:
    """The fewest claims satisfied before none fits, when each claim takes the first
    device that fits (and is not taken) of any one slice (`runs`, each slice's devices
    in order); 0 past `SEARCH_BUDGET` sets taken. With `most`, the most instead."""
    choose = max if most else min
    fewest: dict[frozenset[tuple[int, int]], int] = {}
    used: dict[CounterKey, int] = {}

    def visit(taken: frozenset[tuple[int, int]]) -> int:
        if taken in fewest:
            return fewest[taken]
        if len(fewest) >= SEARCH_BUDGET:
            raise _OverBudget
        best: int | None = None
        for r, run in enumerate(runs):
            pick = next(
                (
                    i
                    for i, need in enumerate(run)
                    if (r, i) not in taken and _fits(need, used, left)
                ),
                None,
            )
            if pick is None:
                continue
            _add(used, run[pick], 1)
            found = 1 + visit(taken | {(r, pick)})
            _add(used, run[pick], -1)
            best = found if best is None else choose(best, found)
        fewest[taken] = best or 0
        return fewest[taken]

    try:
        return visit(frozenset())
    except _OverBudget:
        return 0


def _fits(need: Need, used: Mapping[CounterKey, int], left: Mapping[CounterKey, int]) -> bool:
    return all(used.get(key, 0) + amount <= left[key] for key, amount in need)


def _add(used: dict[CounterKey, int], need: Need, sign: int) -> None:
    for key, amount in need:
        used[key] = used.get(key, 0) + sign * amount


def _sequential_first_fit(order: list[Need], left: Mapping[CounterKey, int]) -> int:
    """One-device claims allocated one after another: each takes the first device of
    `order` that fits beside the earlier ones. Since what fits only shrinks, one pass
    finds them all: a device passed over never fits later."""
    used: dict[CounterKey, int] = {}
    taken = 0
    for need in order:
        if _fits(need, used, left):
            _add(used, need, 1)
            taken += 1
    return taken
