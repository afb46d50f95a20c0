"""Benchmark one compose-model-replica RunFunction with admission (a script, not a test).

    uv run python tests/bench/bench_admission.py [--replicas 2000] [--in-flight 200] [--runs 20]

An undecided replica reads the ModelReplicas of its cluster it must charge.
This builds a real, serialized RunFunctionRequest for one replica on a
cluster of 5 pools x 400 nodes that holds `--replicas` ModelReplicas: most
admitted and running (in the histogram), `--in-flight` placed and not yet
judged. The replica judged is the LAST of the queue, so it replays every
in-flight replica ahead of it: the worst case. Each replica carries the
charge label its deployment writes (capacity/charge_label.py, judged by the
deployment's own rule against the same cluster), and the request holds what
Crossplane fetches for each of the two requirements admission can ask:

    pending   the cluster's replicas labelled pending (its pools are all
              freshly observed, so this is what it asks for);
    all       every replica of the cluster (what it asked for before the
              label, and still asks for when a pool is not freshly observed).

Prints, for each, p50/p99 latency of the whole RunFunction (parse included),
the request size and peak traced memory.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
import tracemalloc
from datetime import timedelta

from compose_model_replica.fn import FunctionRunner
from compose_model_replica.readers import (
    PENDING_REPLICAS_REQUIREMENT,
    QUOTAS_REQUIREMENT,
    REPLICAS_REQUIREMENT,
)
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common import labels
from modelplane_common.timeutil import format_time
from modelplane_testkit import admission_builders as a
from modelplane_testkit import deployment_builders as t

POOLS, NODES = 5, 400
NOW = t.NOW


def cluster(rnd: random.Random) -> dict:
    pools = []
    for p in range(POOLS):
        histogram = t.random_histogram(NODES, rnd)
        pools.append(
            t.pool(
                f"pool-{p}",
                NODES,
                [t.device("gpu", 8)],
                histogram=histogram,
                observed_at=t.ago(seconds=5),
            )
        )
    body = t.cluster(a.CLUSTER, pools)
    body["status"]["providerConfigRef"] = {"name": a.CLUSTER}
    body["status"]["agent"]["present"] = True
    return body


def replicas(count: int, in_flight: int, rnd: random.Random) -> list[dict]:
    out = []
    for i in range(count):
        flying = i >= count - in_flight
        placed = NOW - timedelta(seconds=30 + (count - i)) if flying else NOW - timedelta(hours=1)
        body = a.in_flight(
            f"m{i:05d}-0",
            placed,
            namespace=f"team-{i % 20}",
            gpus=rnd.choice([1, 2, 4, 8]),
            pool=f"pool-{rnd.randrange(POOLS)}",
            role=rnd.choice(["Standalone", "Standalone", "Gang"]),
            workers=rnd.randint(1, 3),
            verdict=None if flying else "Admitted",
            pods_scheduled=not flying,
            scheduled_at=None if flying else format_time(NOW - timedelta(minutes=50)),
        )
        out.append(body)
    return out


def build(count: int, in_flight: int, read: str = "pending") -> tuple[bytes, str]:
    """The request for the last replica of the queue, with what Crossplane fetches for
    `read`: the pending replicas of the cluster, or all of them."""
    rnd = random.Random(7)
    bodies = replicas(count, in_flight, rnd)
    cluster_body = cluster(rnd)
    fleet = t.charge_labelled(bodies, [cluster_body], NOW)
    mine = fleet[-1]
    req = fnv1.RunFunctionRequest()
    req.observed.composite.resource.CopyFrom(resource.dict_to_struct(mine))
    req.required_resources["cluster"].items.add().resource.CopyFrom(
        resource.dict_to_struct(cluster_body)
    )
    req.required_resources[QUOTAS_REQUIREMENT].SetInParent()  # fetched: no ResourceQuota
    if read == "pending":
        items = req.required_resources[PENDING_REPLICAS_REQUIREMENT].items
        fetched = [b for b in fleet if b["metadata"]["labels"][labels.CHARGE] == "pending"]
    else:
        items = req.required_resources[REPLICAS_REQUIREMENT].items
        fetched = fleet
    for body in fetched:
        items.add().resource.CopyFrom(resource.dict_to_struct(body))
    return req.SerializeToString(), mine["metadata"]["name"]


def once(runner: FunctionRunner, wire: bytes) -> tuple[float, fnv1.RunFunctionResponse]:
    start = time.perf_counter()
    req = fnv1.RunFunctionRequest.FromString(wire)
    rsp = asyncio.run(runner.RunFunction(req, None))
    return time.perf_counter() - start, rsp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replicas", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, default=200)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    runner = FunctionRunner(clock=lambda: NOW)
    for read in ("pending", "all"):
        wire, name = build(args.replicas, args.in_flight, read)
        _, rsp = once(runner, wire)
        verdict = next(c for c in rsp.conditions if c.type == "Admitted")
        times = sorted(once(runner, wire)[0] for _ in range(args.runs))
        tracemalloc.start()
        once(runner, wire)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(
            f"{args.replicas} replicas on one cluster ({args.in_flight} in flight), "
            f"reading {read}: request {len(wire) / 1e6:.2f} MB, judging {name}: {verdict.reason}"
        )
        print(
            f"  RunFunction p50 {statistics.median(times) * 1000:.0f} ms, "
            f"p99 {times[min(len(times) - 1, int(len(times) * 0.99))] * 1000:.0f} ms "
            f"over {args.runs} runs; peak traced memory {peak / 2**20:.0f} MiB"
        )


if __name__ == "__main__":
    main()
