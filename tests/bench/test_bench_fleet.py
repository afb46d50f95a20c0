"""The fleet benchmark builds the deployments its rows claim to measure.

A row that measures another deployment than its name says prints a wrong
verdict on every run (bench_fleet.py). These build the rows' inputs on a
small fleet (2 nodes a pool, no other replica) and check them through the
function's real gRPC server, as the benchmark calls it.
"""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

import compose_model_deployment as scheduler
import pytest
from modelplane_common.labels import CHARGE, CHARGE_COUNTED

sys.path.insert(0, str(Path(__file__).parent))
import bench_deployment
import bench_fleet

NOW = bench_fleet.NOW
# Past what one pass may place in a namespace: its replicas take more than one pass.
PAST_THE_BOUND = scheduler.MAX_IN_FLIGHT_PER_NAMESPACE + 44


@pytest.fixture(scope="module")
def clusters() -> list[dict]:
    return bench_deployment.fleet(2, random.Random(7))


@pytest.mark.parametrize(
    "replicas",
    [
        pytest.param(10, id="a deployment within the in-flight bound has all its replicas"),
        pytest.param(PAST_THE_BOUND, id="a deployment past the in-flight bound has all its too"),
    ],
)
def test_placed_gives_every_replica_counted(clusters: list[dict], replicas: int) -> None:
    own = bench_fleet.placed(bench_fleet.our_deployment(replicas), clusters)

    assert len(own) == replicas
    assert {body["metadata"]["labels"][CHARGE] for body in own.values()} == {CHARGE_COUNTED}


@pytest.mark.parametrize(
    "replicas",
    [
        pytest.param(10, id="a steady reconcile composes every replica"),
        pytest.param(PAST_THE_BOUND, id="a steady reconcile past the bound composes every one"),
    ],
)
def test_steady_reconcile_composes_every_replica(clusters: list[dict], replicas: int) -> None:
    xr = bench_fleet.our_deployment(replicas, bench_fleet.realistic_template())

    async def last_answer() -> bytes:
        runner = scheduler.FunctionRunner(scheduler.default_matcher(), clock=lambda: NOW)
        async with bench_fleet.Served(runner) as served:
            calls = await bench_fleet.requirement_loop(served, xr, clusters, 0, steady=True)
            return await served.call(calls[-1])

    assert bench_fleet.composed(replicas)(asyncio.run(last_answer())) == ""
