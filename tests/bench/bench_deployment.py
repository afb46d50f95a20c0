"""Benchmark one compose-model-deployment RunFunction at fleet scale (a script, not a test).

    uv run python tests/bench/bench_deployment.py [--runs 30]

Builds real RunFunctionRequests (serialized, so parsing is measured too):
48 clusters x 5 pools (240 pools), 50 nodes per pool (12,000 nodes), 8,000
existing ModelReplicas of other deployments spread over the fleet, and one
deployment of 10 replicas; then 20 replicas; then 10x the nodes. For each,
two states: "cold" (none of the deployment's replicas exist yet: every one
is placed) and "steady" (all exist and are healthy: nothing moves).
Prints p50/p99 latency, the split (parse, read, schedule, write incl.
response serialization) and peak traced memory.
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import time
import tracemalloc

import compose_model_deployment as scheduler
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common.labels import CHARGE, CHARGE_PENDING
from modelplane_testkit import deployment_builders as t

CLUSTERS, POOLS = 48, 5
MATCHER = scheduler.default_matcher()


def fleet(nodes_per_pool: int, rnd: random.Random) -> list[dict]:
    """CLUSTERS clusters labelled fleet=prod, of POOLS pools of 8-GPU nodes each, their
    histograms drawn from `rnd` (bench_fleet's fleet-L too)."""
    clusters = []
    for c in range(CLUSTERS):
        pools = []
        for p in range(POOLS):
            histogram = t.random_histogram(nodes_per_pool, rnd)
            pools.append(
                t.pool(
                    f"pool-{p}",
                    nodes_per_pool,
                    [t.device("gpu", 8)],
                    max_nodes=nodes_per_pool + 10,
                    histogram=histogram,
                )
            )
        clusters.append(t.cluster(f"cluster-{c:02d}", pools, cluster_labels={"fleet": "prod"}))
    return clusters


def small_template() -> dict:
    """The pod template the other deployments' replicas carry (bench_fleet's too)."""
    return {
        "spec": {
            "containers": [
                {
                    "name": "engine",
                    "image": "vllm/vllm-openai:v0.9.0",
                    "args": ["--model", "meta-llama/Llama-3.1-8B"] * 8,
                    "env": [{"name": f"VAR_{i}", "value": "x" * 24} for i in range(12)],
                }
            ]
        }
    }


def other_replicas(count: int, rnd: random.Random) -> list[dict]:
    out = []
    template = small_template()
    for i in range(count):
        cluster = f"cluster-{rnd.randrange(CLUSTERS):02d}"
        pool = f"pool-{rnd.randrange(POOLS)}"
        if i % 5 == 0:
            engine = t.replica_engine("gang", pool, role="Gang", gpus=8, workers=1)
        else:
            engine = t.replica_engine(
                "serve", pool, gpus=rnd.choice([1, 2, 4]), copies=rnd.choice([1, 2])
            )
        for member in engine["members"]:
            member["template"] = template
        state = rnd.random()
        out.append(
            t.model_replica(
                f"model-{i}",
                f"ns-{i % 200}",
                cluster,
                [engine],
                deployment_name=f"model-{i // 4}",
                index=i % 4,
                pods_scheduled="True" if state < 0.9 else "False",
                reason="AllPodsScheduled" if state < 0.9 else "PodsPending",
                scheduled_at=t.ago(30) if state < 0.8 else t.ago(0, 5),
            )
        )
    return out


def build(replicas: int, nodes_per_pool: int, steady: bool, existing: int) -> bytes:
    rnd = random.Random(7)
    clusters = fleet(nodes_per_pool, rnd)
    others = other_replicas(existing, rnd)
    xr = t.deployment(
        replicas=replicas, engines=[t.standalone(gpus=2, copies=2)], match_labels={"fleet": "prod"}
    )
    own = {}
    if steady:
        # Pending as their deployments label them: at 16k, every one would be past the
        # fleet's in-flight bound and the deployment would have placed nothing.
        labelled = t.charge_labelled(others, clusters)
        pending = [o for o in labelled if o["metadata"]["labels"][CHARGE] == CHARGE_PENDING]
        plan = t.schedule(xr, clusters, {}, others, matcher=MATCHER, pending=pending)
        own = t.own_from_plan(xr, plan, scheduled_at=t.ago(30), since=t.ago(30))
        # The fleet listing holds our replicas too.
        others = others + list(own.values())
    return t.request(xr, clusters, others, own).SerializeToString()


def measure(label: str, payload: bytes, runs: int) -> None:
    totals, parts = [], {"parse": [], "read": [], "schedule": [], "write": []}
    placed = None
    for _ in range(runs):
        timings: dict[str, float] = {}
        start = time.perf_counter()
        req = fnv1.RunFunctionRequest.FromString(payload)
        parsed = time.perf_counter()
        rsp = scheduler.run_function(req, t.NOW, MATCHER, timings)
        before = time.perf_counter()
        rsp.SerializeToString()
        end = time.perf_counter()
        timings["write"] += end - before
        totals.append(end - start)
        parts["parse"].append(parsed - start)
        for k in ("read", "schedule", "write"):
            parts[k].append(timings[k])
        placed = len(rsp.desired.resources)
    tracemalloc.start()
    scheduler.run_function(fnv1.RunFunctionRequest.FromString(payload), t.NOW, MATCHER)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    totals.sort()
    p99 = totals[min(len(totals) - 1, round(0.99 * (len(totals) - 1)))]
    split = "  ".join(f"{k} {statistics.median(v) * 1000:6.1f}" for k, v in parts.items())
    print(
        f"{label:42s} {len(payload) / 1e6:5.1f} MB  replicas {placed:3d}  "
        f"p50 {statistics.median(totals) * 1000:6.1f} ms  p99 {p99 * 1000:6.1f} ms  "
        f"[{split}] ms  peak {peak / 1e6:5.1f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    # (deployment replicas, nodes per pool (x240 pools), existing ModelReplicas)
    for replicas, nodes, existing in (
        (10, 50, 8000),
        (20, 50, 8000),
        (10, 500, 8000),
        (20, 500, 8000),
        (20, 500, 16000),
    ):
        for steady in (False, True):
            payload = build(replicas, nodes, steady, existing)
            state = "steady" if steady else "cold"
            fleet_size = f"{nodes * 240 // 1000}k nodes, {existing // 1000}k others"
            label = f"{replicas} repl, {fleet_size}, {state}"
            measure(label, payload, args.runs)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"process peak RSS (includes building the fixtures): {rss:.0f} MB")


if __name__ == "__main__":
    main()
