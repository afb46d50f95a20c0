"""How often the scheduler over-promises, given which node it assumes the cluster picks.

Run as a script for the table in sim/README.md ("A cluster's own node scoring"):

    uv run python sim/tests/test_misprediction.py

Model (design/scheduler.md, assumed node choice): 18 pools of 16 nodes with 8 GPUs each.
Every minute a few pods (1, 2, 4 or 8 GPUs; some 2-pod gangs on distinct
nodes) arrive and some running ones finish. The scheduler sees each pool
only through its last published histogram (republished every 3 minutes)
and charges every pod it admitted since then by its ASSUMED node choice
(exactly what modelplane_common.capacity.pools does with replicas the histogram cannot contain
yet). The real cluster then binds each admitted pod with its OWN policy
(spread = most free, pack = best fit, random). An over-promise is an
admitted pod the real cluster cannot bind.

A cluster declares how it scores nodes (`spec.nodeScoring`: Spread or
Pack); `declared` measures a fleet whose pools alternate spread and pack,
with the assumed node choice fixed at most-free (the core before the
declaration) or following each pool's declaration (most-free on spread
pools, best-fit on pack pools). Both are the real `Ledger`, built with the
scoring the pool declares.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from functools import partial

import pytest
from modelplane_common.capacity.fit import Ledger, NodeScoring

POOLS, NODES, GPUS = 18, 16, 8
MINUTES, PUBLISH_EVERY = 240, 3


# An assumption: how admission builds a pool's ledger (the real one), by node scoring.
Assumption = Callable[..., Ledger]
MOST_FREE: Assumption = partial(Ledger, scoring=NodeScoring.SPREAD)
# The alternative: the cluster packs (fewest free that still fit), `nodeScoring: Pack`.
BEST_FIT: Assumption = partial(Ledger, scoring=NodeScoring.PACK)


def bind(nodes: list[int], pods: list[int], policy: str, rnd: random.Random) -> list[int] | None:
    """The real cluster binds pods (one gang: distinct nodes) by its policy."""
    chosen: list[int] = []
    for demand in pods:
        fitting = [i for i, free in enumerate(nodes) if free >= demand and i not in chosen]
        if not fitting:
            return None
        if policy == "spread":
            node = max(fitting, key=lambda i: (nodes[i], -i))
        elif policy == "pack":
            node = min(fitting, key=lambda i: (nodes[i], i))
        else:
            node = rnd.choice(fitting)
        chosen.append(node)
    return chosen


Running = tuple[int, list[int], list[int], int]  # pool, nodes, demands, ends


def simulate(assumption: Assumption, policy: str, seed: int) -> tuple[int, int]:
    """Every pool on one cluster policy, every admission under one assumption."""
    return simulate_pools([assumption] * POOLS, [policy] * POOLS, seed)


def simulate_pools(
    assumptions: list[Assumption], policies: list[str], seed: int
) -> tuple[int, int]:
    """Admitted and over-promised replicas, each pool with its own assumption and policy."""
    rnd = random.Random(seed)
    real = [[GPUS] * NODES for _ in range(POOLS)]
    running: list[Running] = []
    published = [Counter(p) for p in real]
    since: list[list[list[int]]] = [[] for _ in range(POOLS)]
    admitted = over = 0
    for minute in range(MINUTES):
        if minute % PUBLISH_EVERY == 0:
            published = [Counter(p) for p in real]
            since = [[] for _ in range(POOLS)]
        running = release_ended(real, running, minute)
        for _ in range(rnd.randint(8, 16)):
            pods = arrival(rnd)
            for pool in rnd.sample(range(POOLS), POOLS):
                if not admits(assumptions[pool], published[pool], since[pool], pods):
                    continue
                admitted += 1
                since[pool].append(pods)
                nodes = bind(real[pool], pods, policies[pool], rnd)
                if nodes is None:
                    over += 1
                else:
                    for n, d in zip(nodes, pods, strict=True):
                        real[pool][n] -= d
                    running.append((pool, nodes, pods, minute + rnd.randint(20, 120)))
                break
    return admitted, over


def release_ended(real: list[list[int]], running: list[Running], minute: int) -> list[Running]:
    """Give back the devices of the replicas that ended by `minute`; the ones still running."""
    still = []
    for pool, nodes, demands, ends in running:
        if ends <= minute:
            for n, d in zip(nodes, demands, strict=True):
                real[pool][n] += d
        else:
            still.append((pool, nodes, demands, ends))
    return still


def arrival(rnd: random.Random) -> list[int]:
    """A new replica's per-pod GPU demands: one pod, or a gang of two, of 1 to 8 GPUs."""
    size = rnd.choice([1, 1, 2, 2, 4, 8])
    return [size, size] if rnd.random() < 0.2 else [size]


def admits(
    assumption: Assumption, published: Counter, since: list[list[int]], pods: list[int]
) -> bool:
    """Whether admission, on the pool's published histogram less what it admitted since,
    lets `pods` in."""
    ledger = assumption({(f,): n for f, n in published.items()}, (GPUS,), whole_node=False)
    for earlier in since:
        ledger.place_best_effort([(d,) for d in earlier], gang=len(earlier) > 1)
    if len(pods) > 1:
        return ledger.place_gang([(d,) for d in pods])
    return ledger.place_shared((pods[0],), 1)


def rates(seeds: range = range(3)) -> dict[tuple[str, str], float]:
    table = {}
    for name, assumption in (("most-free", MOST_FREE), ("best-fit", BEST_FIT)):
        for policy in ("spread", "pack", "random"):
            admitted = over = 0
            for seed in seeds:
                a, o = simulate(assumption, policy, seed)
                admitted, over = admitted + a, over + o
            table[(name, policy)] = over / admitted if admitted else 0.0
    return table


MIXED = ["spread" if pool % 2 else "pack" for pool in range(POOLS)]
FOLLOWING = [MOST_FREE if policy == "spread" else BEST_FIT for policy in MIXED]


def declared(seeds: range = range(3)) -> dict[str, float]:
    """Over-promise on the mixed fleet, the assumption fixed or following the declaration."""
    table = {}
    for name, assumptions in (("most-free", [MOST_FREE] * POOLS), ("declared", FOLLOWING)):
        admitted = over = 0
        for seed in seeds:
            a, o = simulate_pools(assumptions, MIXED, seed)
            admitted, over = admitted + a, over + o
        table[name] = over / admitted if admitted else 0.0
    return table


def test_following_the_declared_scoring_over_promises_less_on_a_fleet_with_pack_clusters():
    rates = declared(range(2))
    assert rates["declared"] < rates["most-free"]


@pytest.mark.parametrize("policy", ["spread", "pack", "random"])
def test_the_most_free_assumption_rarely_over_promises(policy):
    admitted = over = 0
    for seed in range(2):
        a, o = simulate(MOST_FREE, policy, seed)
        admitted, over = admitted + a, over + o
    assert admitted > 500
    assert over / admitted <= 0.01


if __name__ == "__main__":
    for (assumption, policy), rate in rates(range(5)).items():
        print(f"assume {assumption:9s} cluster {policy:6s} over-promise {rate * 100:5.2f}%")
    for assumption, rate in declared(range(5)).items():
        print(f"assume {assumption:9s} cluster mixed  over-promise {rate * 100:5.2f}%")
