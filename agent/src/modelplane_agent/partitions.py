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
    - a greedy pass (least consuming first) gives a feasible set; a bound
      (per counter, the devices that do not consume it plus how many of those
      that do fit it, least first) often proves it the largest: real layouts
      publish aggregate counters (memory, multiprocessors) that every
      partition draws on, which make the bound tight;
    - otherwise a depth-first search over include/exclude, pruned by that
      count, looks for a larger feasible set within `SEARCH_BUDGET` steps.
      Past the budget the largest set found so far is the answer: possibly
      fewer than fit (an under-promise), never more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

from modelplane_agent.snapshot import CounterKey, Device

SEARCH_BUDGET = 20_000

Need = tuple[tuple[CounterKey, Fraction], ...]


def largest_fitting(devices: Sequence[Device], left: Mapping[CounterKey, Fraction]) -> int:
    """The size of the largest set of `devices` whose consumption fits `left` together.

    Every device must consume only counters of `left` with readable amounts
    (the caller leaves the others out: they can never be given out).
    """
    needs = [
        tuple((key, amount) for key, amount in d.consumes if amount is not None) for d in devices
    ]
    return sum(_solve(group, left) for group in _groups(needs))


def _groups(needs: list[Need]) -> list[list[Need]]:
    """Devices linked, directly or not, by a counter they both consume."""
    parent: dict[CounterKey, CounterKey] = {}

    def root(key: CounterKey) -> CounterKey:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    for need in needs:
        for key, _ in need[1:]:
            parent[root(key)] = root(need[0][0])
    groups: dict[CounterKey | None, list[Need]] = {}
    for need in needs:
        groups.setdefault(root(need[0][0]) if need else None, []).append(need)
    return list(groups.values())


def _fits(
    need: Need, used: Mapping[CounterKey, Fraction], left: Mapping[CounterKey, Fraction]
) -> bool:
    return all(used.get(key, Fraction(0)) + amount <= left[key] for key, amount in need)


def _add(used: dict[CounterKey, Fraction], need: Need, sign: int) -> None:
    for key, amount in need:
        used[key] = used.get(key, Fraction(0)) + sign * amount


def _solve(needs: list[Need], left: Mapping[CounterKey, Fraction]) -> int:
    if not needs or not needs[0]:
        return len(needs)  # consuming nothing: every one fits
    order = sorted(needs, key=lambda need: _weight(need, left))
    greedy = _greedy(order, left)
    bound = _bound(order, left)
    if greedy >= bound:
        return greedy
    return _search(order, left, greedy, bound)


def _weight(need: Need, left: Mapping[CounterKey, Fraction]) -> Fraction:
    """The share of what is left that a device takes, summed over its counters."""
    return sum(
        (amount / left[key] if left[key] > 0 else Fraction(len(need) + 1) for key, amount in need),
        Fraction(0),
    )


def _greedy(order: list[Need], left: Mapping[CounterKey, Fraction]) -> int:
    used: dict[CounterKey, Fraction] = {}
    taken = 0
    for need in order:
        if _fits(need, used, left):
            _add(used, need, 1)
            taken += 1
    return taken


def _bound(order: list[Need], left: Mapping[CounterKey, Fraction]) -> int:
    """No feasible set is larger: for each counter, the devices that do not consume it
    plus the most of those that do which fit it alone (least consuming first)."""
    best = len(order)
    for key, room in left.items():
        amounts = sorted(amount for need in order for k, amount in need if k == key)
        if not amounts:
            continue
        fitting, total = 0, Fraction(0)
        for amount in amounts:
            if total + amount > room:
                break
            total += amount
            fitting += 1
        best = min(best, len(order) - len(amounts) + fitting)
    return best


def _search(order: list[Need], left: Mapping[CounterKey, Fraction], found: int, bound: int) -> int:
    """Depth-first include/exclude for a feasible set larger than `found`."""
    best = found
    steps = 0
    used: dict[CounterKey, Fraction] = {}

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
