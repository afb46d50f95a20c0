"""The agent at the issue's scale: 5,000 nodes, 40,000 pods, 20,000 allocated claims.

Prints figures; asserts nothing about time (targets: full recompute under
1 s, one event p99 under 1 ms, peak RSS under 250 MiB). Run with

    uv run --frozen python tests/bench/bench_agent.py [--nodes 5000]

The cluster: 10 pools of 500 nodes, each node 8 GPUs and 2 NICs, every
device with its own uuid attribute (as real drivers publish, so no two
devices share a CEL evaluation); 20,000 claims of 2 GPUs each, a quarter of
them held by non-modelplane pods; 40,000 pods in 40 namespaces, 2,000 of
them engine pods of 1,000 replicas (ReplicaObservations), the rest other
workloads; 2% of nodes cordoned, 1% NotReady, 1% tainted. Every pod
requests cpu and memory (engine pods 8 cpu and 64Gi, the pools' declared
smallest pod; others 250m-2 cpu, 512Mi-4Gi), every node has 64 cpu, 512Gi
and 110 pod slots allocatable, 5% of them only 16 cpu, so that some nodes
have no room for the smallest pod and pod events flip it. The objects are
the wire shapes of `modelplane_testkit.agent_builders` (real pods carry more fields
the agent never keeps: only the transient list of one page is larger).

Then coarsening alone, on pools whose every node has its own free vector
over five device kinds of up to 8 each: the time to bring 600 to 5,000
distinct vectors down to 512, and the share of free devices it rounds away.
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

from modelplane_agent.controller import freeze_heap
from modelplane_agent.pools import coarsen
from modelplane_agent.state import (
    CLAIMS,
    CLASSES,
    NODES,
    PODS,
    POOLS,
    REPLICAS,
    RULES,
    SLICES,
    ClusterState,
    Touched,
)
from modelplane_common.observation import Histogram
from modelplane_testkit import agent_builders as t

GPU = ("gpu", t.NVIDIA, "gpu.nvidia.com")
NIC = ("nic", t.NIC_DRIVER, "nic.example.com")
CLASSES_OBJS = [
    t.device_class(
        "gpu.nvidia.com",
        'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"',
    ),
    t.device_class("nic.example.com", 'device.driver == "nic.example.com"'),
]


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


SMALLEST_POD = {"cpu": "8", "memory": "64Gi"}
OTHER_CPU = ("250m", "500m", "1", "2")
OTHER_MEMORY = ("512Mi", "1Gi", "4Gi")


def allocatable(i: int) -> dict:
    return {"cpu": "16" if i % 20 == 0 else "64", "memory": "512Gi", "pods": "110"}


def nodes(count: int, rng: random.Random) -> Iterator[dict]:
    for i in range(count):
        roll = rng.random()
        yield t.node(
            f"node-{i}",
            f"pool-{i % 10}",
            cordoned=roll < 0.02,
            ready=not 0.02 <= roll < 0.03,
            taints=[{"key": "maintenance", "effect": "NoSchedule"}] if 0.03 <= roll < 0.04 else [],
            allocatable=allocatable(i),
        )


def slices(count: int) -> Iterator[dict]:
    for i in range(count):
        node = f"node-{i}"
        yield t.resource_slice(node, [t.device(f"gpu-{j}-{node}") for j in range(8)])
        yield t.resource_slice(
            node, [t.device(f"nic-{j}-{node}", "nic") for j in range(2)], driver=t.NIC_DRIVER
        )


def claims(count: int, node_count: int) -> Iterator[dict]:
    # Two GPUs per claim, packed from the first node on: 20,000 claims fill 5,000 nodes.
    for i in range(count):
        node = f"node-{(i // 4) % node_count}"
        first = (i % 4) * 2
        yield t.claim(
            f"claim-{i}",
            [(node, f"gpu-{first}-{node}"), (node, f"gpu-{first + 1}-{node}")],
            namespace=f"ns-{i % 40}",
            owner_labels={} if i % 4 == 0 else {"modelplane.ai/replica": f"r-{i % 1000}"},
        )


def pods(count: int, replicas: int, rng: random.Random, node_count: int) -> Iterator[dict]:
    for i in range(count):
        if i < replicas * 2:
            replica = f"r-{i // 2}"
            yield t.pod(
                f"{replica}-{i % 2}",
                replica=replica,
                namespace=f"ns-{(i // 2) % 40}",
                node_name=f"node-{rng.randrange(node_count)}" if rng.random() < 0.9 else None,
                requests=SMALLEST_POD,
            )
        else:
            yield other_pod(i, f"node-{rng.randrange(node_count)}", rng)


def other_pod(i: int, node: str, rng: random.Random) -> dict:
    return t.pod(
        f"other-{i}",
        replica="none",
        namespace=f"ns-{i % 40}",
        node_name=node,
        requests={"cpu": rng.choice(OTHER_CPU), "memory": rng.choice(OTHER_MEMORY)},
    )


def replica_observations(count: int) -> Iterator[dict]:
    for i in range(count):
        yield t.replica_observation(f"r-{i}", f"ns-{i % 40}")


def pages(objects: Iterator[dict], size: int) -> Iterator[list[dict]]:
    page: list[dict] = []
    for obj in objects:
        page.append(obj)
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page


def full_recompute(state: ClusterState) -> None:
    for pool in state.pools:
        state.pool_report(pool)
    for key in state.replicas:
        state.replica_report(key)


class Collections:
    """Every garbage collection, as `gc.callbacks` report them: (generation, seconds)."""

    def __init__(self) -> None:
        self.done: list[tuple[int, float]] = []
        self._started = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.done.append((info["generation"], time.perf_counter() - self._started))


@dataclass(frozen=True)
class Sample:
    wall: float
    cpu: float  # this thread's CPU time: wall minus it is time the OS ran others
    collected: list[tuple[int, float]]

    @property
    def collecting(self) -> float:
        return sum(seconds for _, seconds in self.collected)


def percentile(samples: list[float], q: float) -> float:
    return sorted(samples)[min(len(samples) - 1, int(q * len(samples)))]


def distinct_vectors(count: int, rng: random.Random, kinds: int = 5, most: int = 8) -> Histogram:
    """`count` nodes, each with its own free vector."""
    vectors: set[tuple[int, ...]] = set()
    while len(vectors) < count:
        vectors.add(tuple(rng.randint(0, most) for _ in range(kinds)))
    return Histogram.of((v, 1) for v in vectors)


def bench_coarsening(rng: random.Random) -> None:
    print("coarsening to 512 buckets, every node its own vector of five kinds:")
    for count in (600, 1000, 2000, 5000):
        before = distinct_vectors(count, rng)
        started = time.perf_counter()
        after = coarsen(before)
        seconds = time.perf_counter() - started
        free = sum(sum(v) * n for v, n in before.buckets)
        kept = sum(sum(v) * n for v, n in after.buckets)
        print(
            f"  {count:5d} vectors  {seconds * 1000:6.0f} ms   "
            f"{(free - kept) / free:5.1%} of free devices rounded away"
        )


def a100_slice(node: str, gpus: int, aggregate: bool) -> dict:
    """One slice of `gpus` A100s published as MIG placements (19 per GPU: 1g at 0-6,
    2g at 0/2/4, 3g at 0/4, 4g and 7g at 0), each GPU its own counter set of eight
    memory slices, and of 98 multiprocessors when `aggregate`."""
    profiles = [(1, 1, range(7)), (2, 2, (0, 2, 4)), (3, 4, (0, 4)), (4, 4, (0,)), (7, 8, (0,))]
    counters, devices = {}, []
    for gpu in range(gpus):
        counters[f"gpu-{gpu}"] = {f"slice-{i}": "1" for i in range(8)}
        if aggregate:
            counters[f"gpu-{gpu}"]["multiprocessors"] = "98"
        for g, width, starts in profiles:
            for start in starts:
                consumes = {f"slice-{i}": "1" for i in range(start, start + width)}
                if aggregate:
                    consumes["multiprocessors"] = str(14 * g)
                devices.append(
                    t.device(f"gpu-{gpu}-{g}g-{start}", "mig", consumes={f"gpu-{gpu}": consumes})
                )
    return t.resource_slice(node, devices, shared_counters=counters)


def bench_partitions(count: int) -> None:
    """Free vectors of nodes whose GPUs are published as MIG placements, one MIG kind."""
    print(f"partitionable devices: {count} nodes of 8 A100s as MIG placements (152 devices each):")
    for aggregate in (True, False):
        state = ClusterState()
        state.apply(
            CLASSES,
            "ADDED",
            t.device_class("mig", 'device.attributes["gpu.nvidia.com"].type == "mig"'),
        )
        state.apply(POOLS, "ADDED", t.pool_observation("mig", [("mig", t.NVIDIA, "mig")]))
        for i in range(count):
            state.apply(NODES, "ADDED", t.node(f"m-{i}", "mig"))
            state.apply(SLICES, "ADDED", a100_slice(f"m-{i}", 8, aggregate))
        seconds = timed(lambda state=state: state.pool_report("mig"))
        report = state.pool_report("mig")
        free = report.histogram.buckets if report.histogram else None
        counters = "memory slices and multiprocessors" if aggregate else "memory slices only"
        print(
            f"  counters of {counters}: full recompute {seconds * 1000:.0f} ms "
            f"({seconds / count * 1000:.2f} ms a node), free vectors {free}"
        )


def main() -> None:
    args = arguments()
    rng = random.Random(1)
    state = ClusterState()
    base = rss_mib()
    print(
        f"cluster: {args.nodes} nodes, {args.pods} pods, {args.claims} allocated claims, "
        f"{args.replicas} replicas, 10 pools"
    )
    bench_initial_list(state, args, rng)
    freeze_heap()  # as the controller does once every kind is listed
    bench_full_recompute(state, args.replicas)
    bench_events(state, args, rng)
    print(
        f"memory: peak RSS {rss_mib():.0f} MiB (interpreter and libraries {base:.0f} MiB "
        "before the cluster was built)"
    )
    bench_coarsening(rng)
    bench_partitions(500)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=40000)
    parser.add_argument("--claims", type=int, default=20000)
    parser.add_argument("--replicas", type=int, default=1000)
    parser.add_argument("--events", type=int, default=2000)
    return parser.parse_args()


def bench_initial_list(state: ClusterState, args: argparse.Namespace, rng: random.Random) -> None:
    listing = [
        (CLASSES, lambda: iter(CLASSES_OBJS)),
        (
            POOLS,
            lambda: (
                t.pool_observation(f"pool-{p}", [GPU, NIC], min_pod_requests=SMALLEST_POD)
                for p in range(10)
            ),
        ),
        (NODES, lambda: nodes(args.nodes, rng)),
        (SLICES, lambda: slices(args.nodes)),
        (CLAIMS, lambda: claims(args.claims, args.nodes)),
        (REPLICAS, lambda: replica_observations(args.replicas)),
        (PODS, lambda: pods(args.pods, args.replicas, rng, args.nodes)),
    ]
    print("initial list, per kind (objects built a page of 500 at a time, as the shell lists")
    print("them, then replaced into the state; the time is the folding only):")
    for kind, make in listing:
        folded, seconds, seen = 0, 0.0, set()
        touched = Touched()
        for page in pages(make(), 500):
            started = time.perf_counter()
            for obj in page:
                seen.add(state.key_of(kind, obj))
                touched |= state.apply(kind, "MODIFIED", obj)
            seconds += time.perf_counter() - started
            folded += len(page)
        seconds += timed(partial(state.delete_missing, kind, seen))
        print(f"  {kind:22} {folded:6d} objects  {seconds * 1000:8.0f} ms")


def bench_full_recompute(state: ClusterState, replicas: int) -> None:
    first = timed(lambda: full_recompute(state))
    print(f"first full recompute (every device's CEL match evaluated): {first:.2f} s")
    state.invalidate_reports()
    warm = timed(lambda: full_recompute(state))
    print(
        f"full recompute, 10 pools + {replicas} replicas, every free vector and tally "
        f"recomputed (CEL matches cached): {warm * 1000:.0f} ms"
    )
    cached = timed(lambda: full_recompute(state))
    print(f"full recompute with nothing stale: {cached * 1000:.0f} ms")


def bench_events(state: ClusterState, args: argparse.Namespace, rng: random.Random) -> None:
    collections = Collections()
    gc.callbacks.append(collections)
    print(f"one event, applied and its touched observations recomputed ({args.events} each):")
    for label, apply in events(state, args, rng):
        print_event_cost(label, event_cost(state, apply, args.events, collections))
    full = [seconds for generation, seconds in collections.done if generation == 2]
    print(
        f"  garbage collections while handling events: {len(collections.done)}, "
        f"{len(full)} of them full, longest {max(full, default=0) * 1000:.2f} ms"
    )
    gc.callbacks.remove(collections)
    gc.collect()


def event_cost(
    state: ClusterState, apply: Callable[[int], object], count: int, collections: Collections
) -> list[Sample]:
    samples = []
    for i in range(count):
        before = len(collections.done)
        started, cpu = time.perf_counter(), time.thread_time()
        touched = apply(i)
        for pool in touched.pools:  # type: ignore[attr-defined]
            state.pool_report(pool)
        for key in touched.replicas:  # type: ignore[attr-defined]
            state.replica_report(key)
        samples.append(
            Sample(
                time.perf_counter() - started,
                time.thread_time() - cpu,
                collections.done[before:],
            )
        )
    return samples


def print_event_cost(label: str, samples: list[Sample]) -> None:
    wall = [x.wall for x in samples]
    worst, busiest = max(samples, key=lambda x: x.wall), max(samples, key=lambda x: x.cpu)
    print(
        f"  {label:16} median {statistics.median(wall) * 1000:6.2f} ms   "
        f"p99 {percentile(wall, 0.99) * 1000:6.2f} ms   "
        f"max {worst.wall * 1000:6.2f} ms (CPU {worst.cpu * 1000:.2f} ms)   "
        f"CPU p99 {percentile([x.cpu for x in samples], 0.99) * 1000:5.2f} ms, "
        f"max {busiest.cpu * 1000:5.2f} ms ({busiest.collecting * 1000:.2f} ms of it "
        "collecting garbage)"
    )


def events(
    state: ClusterState, args: argparse.Namespace, rng: random.Random
) -> list[tuple[str, Callable[[int], object]]]:
    """The benchmarked events, by label: each applies its `i`th event to `state`."""

    def allocate(i: int) -> object:
        node = f"node-{rng.randrange(args.nodes)}"
        return state.apply(
            CLAIMS, "MODIFIED", t.claim(f"claim-{i}", [(node, f"gpu-7-{node}")], namespace="x")
        )

    def cordon(i: int) -> object:
        n = rng.randrange(args.nodes)
        return state.apply(
            NODES,
            "MODIFIED",
            t.node(f"node-{n}", f"pool-{n % 10}", cordoned=i % 2 == 0, allocatable=allocatable(n)),
        )

    def bind(i: int) -> object:
        r = rng.randrange(args.replicas)
        return state.apply(
            PODS,
            "MODIFIED",
            t.pod(
                f"r-{r}-0",
                replica=f"r-{r}",
                namespace=f"ns-{r % 40}",
                node_name="node-1",
                requests=SMALLEST_POD,
            ),
        )

    def move(i: int) -> object:
        # A foreign pod rebound elsewhere: two nodes' loads change; on the small nodes
        # that can flip whether the pool's smallest pod fits.
        other = args.replicas * 2 + rng.randrange(args.pods - args.replicas * 2)
        return state.apply(
            PODS, "MODIFIED", other_pod(other, f"node-{20 * rng.randrange(args.nodes // 20)}", rng)
        )

    def taint(i: int) -> object:
        # A health controller's DeviceTaintRule naming one GPU, set then lifted (effect
        # None): last, so the rules it leaves change no other figure.
        node = f"node-{rng.randrange(args.nodes)}"
        effect = "NoSchedule" if i % 2 == 0 else "None"
        selector = {"driver": t.NVIDIA, "pool": node, "device": f"gpu-3-{node}"}
        return state.apply(RULES, "MODIFIED", t.taint_rule(f"rule-{i % 50}", effect, **selector))

    return [
        ("claim allocated", allocate),
        ("node cordoned", cordon),
        ("pod bound", bind),
        ("other pod moved", move),
        ("GPU taint rule", taint),
    ]


if __name__ == "__main__":
    main()
