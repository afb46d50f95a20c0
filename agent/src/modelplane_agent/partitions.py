"""How many partitionable devices of one kind fit together (KEP-4815 shared counters).

A partitionable device consumes amounts of its resource pool's shared
counters (`consumesCounters` against `sharedCounters`), and the allocator
gives out a set of devices only while their consumption, added to what the
allocated devices of the pool already consume, stays within every counter.
So the number of devices of a kind a pod could get on a node is the size of
the LARGEST set of its free devices whose consumption fits the counters left
together, not the number that fit one at a time (a MIG class matching every
profile and placement of a GPU has about 19 devices of which at most 7 fit).

`largest_fitting` computes that size exactly for the layouts drivers
publish, and never more than it:
    - devices that share no counter are independent: each group of devices
      linked by counters (one GPU's partitions) is solved on its own;
    - a greedy pass (least consuming first) gives a feasible set; two bounds
      often prove it the largest: per counter, the devices that do not
      consume it plus how many of those that do fit it (least first); and
      over all counters, as many devices as the lightest whose shares of
      each counter's room add up to no more than the number of counters.
      Real layouts (an aggregate counter every partition draws on, or one
      counter per memory slice) make one of them tight;
    - otherwise a depth-first search over include/exclude, pruned by that
      count, looks for a larger feasible set within `SEARCH_BUDGET` steps.
      Past the budget the largest set found so far is the answer: possibly
      fewer than fit (an under-promise), never more.

Cost: the A100 layout above takes under 1 ms (a bound settles it, no
search); a group of 24 devices over 6 counters with random consumptions,
which no bound settles, at most about 50 ms (the budget, in integer
arithmetic: each counter is scaled to whole units first). A node's result is
cached with its free vector until an event touches the node.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction

from modelplane_agent.snapshot import CounterKey, Device

SEARCH_BUDGET = 5_000

# What one device consumes, in whole units of each counter (see `_in_units`).
Need = tuple[tuple[CounterKey, int], ...]


def largest_fitting(devices: Sequence[Device], left: Mapping[CounterKey, Fraction]) -> int:
    """The size of the largest set of `devices` whose consumption fits `left` together.

    Every device must consume only counters of `left` with readable amounts
    (the caller leaves the others out: they can never be given out).
    """
    exact = [[(key, amount) for key, amount in d.consumes if amount is not None] for d in devices]
    needs, room = _in_units(exact, left)
    return sum(_solve(group, room) for group in _groups(needs))


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


def _groups(needs: list[Need]) -> list[list[Need]]:
    """Devices linked, directly or not, by a counter they both consume."""
    parent: dict[CounterKey, CounterKey] = {}

    def root(key: CounterKey) -> CounterKey:
        while (up := parent.setdefault(key, key)) != key:
            parent[key] = parent.setdefault(up, up)  # path halving
            key = up
        return key

    for need in needs:
        for key, _ in need[1:]:
            parent[root(key)] = root(need[0][0])
    groups: dict[CounterKey | None, list[Need]] = {}
    for need in needs:
        groups.setdefault(root(need[0][0]) if need else None, []).append(need)
    return list(groups.values())


def _fits(need: Need, used: Mapping[CounterKey, int], left: Mapping[CounterKey, int]) -> bool:
    return all(used.get(key, 0) + amount <= left[key] for key, amount in need)


def _add(used: dict[CounterKey, int], need: Need, sign: int) -> None:
    for key, amount in need:
        used[key] = used.get(key, 0) + sign * amount


def _solve(needs: list[Need], left: Mapping[CounterKey, int]) -> int:
    if not needs or not needs[0]:
        return len(needs)  # consuming nothing: every one fits
    weighed = sorted((_weight(n, left), n) for n in needs if _fits(n, {}, left))
    order = [need for _, need in weighed]
    greedy = _greedy(order, left)
    bound = min(_bound(order, left), _weighted_bound([w for w, _ in weighed], order))
    if greedy >= bound:
        return greedy
    return _search(order, left, greedy, bound)


def _weight(need: Need, left: Mapping[CounterKey, int]) -> float:
    """The share of what is left that a device takes, summed over its counters (only
    devices that fit alone are weighed: a counter it consumes has room for it)."""
    return sum(amount / left[key] for key, amount in need if amount)


def _greedy(order: list[Need], left: Mapping[CounterKey, int]) -> int:
    used: dict[CounterKey, int] = {}
    taken = 0
    for need in order:
        if _fits(need, used, left):
            _add(used, need, 1)
            taken += 1
    return taken


def _bound(order: list[Need], left: Mapping[CounterKey, int]) -> int:
    """No feasible set is larger: for each counter, the devices that do not consume it
    plus the most of those that do which fit it alone (least consuming first)."""
    amounts: dict[CounterKey, list[int]] = {}
    for need in order:
        for key, amount in need:
            amounts.setdefault(key, []).append(amount)
    best = len(order)
    for key, consumed in amounts.items():
        fitting, total = 0, 0
        for amount in sorted(consumed):
            if total + amount > left[key]:
                break
            total += amount
            fitting += 1
        best = min(best, len(order) - len(consumed) + fitting)
    return best


def _weighted_bound(weights: list[float], order: list[Need]) -> int:
    """No feasible set is larger: each fits every counter, so the shares of what is left
    its devices take (`_weight`), summed, stay within the number of counters; at most
    as many devices as the lightest whose shares add up to that. `weights` are in
    ascending order. Floating point: the slack only ever loosens the bound, which is
    used to stop early, so the answer stays exact."""
    room = len({key for need in order for key, _ in need}) * (1 + 1e-9) + 1e-9
    total, count = 0.0, 0
    for weight in weights:
        total += weight
        if total > room:
            break
        count += 1
    return count


def _search(order: list[Need], left: Mapping[CounterKey, int], found: int, bound: int) -> int:
    """Depth-first include/exclude for a feasible set larger than `found`."""
    best = found
    steps = 0
    used: dict[CounterKey, int] = {}

    def visit(index: int, taken: int) -> None:
        nonlocal best, steps
        steps += 1
        if taken > best:
            best = taken
        if best >= bound or steps > SEARCH_BUDGET or taken + len(order) - index <= best:
            return
        need = order[index]
        if _fits(need, used, left):
            _add(used, need, 1)
            visit(index + 1, taken + 1)
            _add(used, need, -1)
        visit(index + 1, taken)

    visit(0, 0)
    return best
