"""How long the real kube-scheduler takes to allocate one claim of k MIG partitions.

kube-scheduler's allocator searches depth first for a claim of `count: k` and
gives up on a node after the DynamicResources plugin's filterTimeout (10 s by
default, DRASchedulerFilterTimeout), reporting the node "timed out trying to
allocate devices". The agent counts a partitionable kind as sequential first
fit of one-device claims gives it out (design/agent.md, the paragraph
"Partitionable devices are counted as kube-scheduler gives them out"), and the
fleet then places pods whose one claim asks `count: k` of that kind. This
measures, on a workload cluster of the harness (`modelplane_e2e.stack`, the
Kubernetes version `--kube` names), whether kube-scheduler finishes such
requests well within the timeout.

Each node has 1, 2, 4 or 8 A100-like GPUs, published three GPUs a slice
(the counter sets in a slice of their own): per GPU the 19 MIG
placements of the project's A100 layout (eight memory slices and 98
multiprocessors; 1g at 0-6, 2g at 0/2/4, 3g at 0/4, 4g at 0, 7g at 0, as
agent/tests/test_pools.py's `a100_layout`), GPU after GPU, each GPU's
placements smallest profile first or largest first. Two DeviceClasses: the
generic MIG class (every placement) and a 1g class (the one-slice placements
only). For each class, order and node, pods pinned to the node (required node
affinity on its name) claim `count: k` for k = 1, 2, ... up to the node's
seven 1g slices per GPU (and one past the 32 devices a claim may hold), one
pod at a time, each removed (its claim gone) before the next. After
`--give-up` timeouts in a row the series jumps to its last k.

For each pod the figure is the wall time from its creation to its binding, or
to kube-scheduler's PodScheduled=False (the timeout, or a plain refusal),
polled every 20 ms. Beside it, what the agent promises for that node and class
(its own `ClusterState` over the same objects): a request within the promise
that times out is an over-count. Prints one line per pod as it goes, then a
Markdown table. Run (never beside another live run; the machine's load is
printed first and last):

    nice -n 19 uv run --frozen python tests/bench/bench_partition_search.py --kube v1.37

Asserts nothing; its dated figures are in tests/bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig
from modelplane_agent.state import CLASSES, NODES, POOLS, SLICES, ClusterState
from modelplane_common.inputs import find_condition
from modelplane_e2e import kube, kube_versions, stack
from modelplane_testkit import agent_builders as t
from modelplane_testkit.oracle import (
    NOT_SERVED,
    DeviceClass,
    Namespace,
    Pod,
    ResourceClaim,
    ServiceAccount,
    claim_manifest,
    delete,
    exact_request,
    pinned_pod,
    publish_slices,
    ready_node,
)

DRIVER = t.NVIDIA
NAMESPACE = "bench"
# (profile size g, memory slices it spans, where it may start): 19 placements per GPU.
PROFILES = ((1, 1, tuple(range(7))), (2, 2, (0, 2, 4)), (3, 4, (0, 4)), (4, 4, (0,)), (7, 8, (0,)))
ONE_SLICE_PER_GPU = 7  # the 1g placements of a GPU
# Devices one claim may be given (resource.k8s.io AllocationResultsMaxSize): the
# allocator refuses a larger claim before any search, so one k past it is enough.
CLAIM_MAX_DEVICES = 32
GPUS_PER_SLICE = 3  # 57 placements
GUARD = f'device.driver == "{DRIVER}"'
DEVICE_CLASSES = {
    "generic": ("mig.example.com", f'{GUARD} && device.attributes["{DRIVER}"].type == "mig"'),
    "1g": ("mig-1g.example.com", f'{GUARD} && device.attributes["{DRIVER}"].profile == "1g"'),
}
ORDERS = ("largest-first", "smallest-first")
DECIDE_SECONDS = 60.0
POLL_SECONDS = 0.02


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kube", default="v1.37", help="Kubernetes version (e2e.kube_versions)")
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--orders", nargs="+", default=list(ORDERS), choices=ORDERS)
    parser.add_argument(
        "--classes", nargs="+", default=list(DEVICE_CLASSES), choices=list(DEVICE_CLASSES)
    )
    parser.add_argument("--give-up", type=int, default=2, help="timeouts in a row, then last k")
    return parser.parse_args()


# --------------------------------------------------------------------------- the objects


def gpu_placements(gpu: int, order: str) -> list[dict]:
    """One GPU's 19 placements in published order, drawing on its counter set."""
    profiles = PROFILES[::-1] if order == "largest-first" else PROFILES
    devices = []
    for g, width, starts in profiles:
        for start in starts:
            consumes = {f"slice-{i}": "1" for i in range(start, start + width)}
            consumes["multiprocessors"] = str(14 * g)
            device = t.device(f"gpu-{gpu}-{g}g-{start}", "mig", consumes={f"gpu-{gpu}": consumes})
            device["attributes"]["profile"] = {"string": f"{g}g"}
            devices.append(device)
    return devices


def node_slices(node: str, gpus: int, order: str) -> list[dict]:
    """The node's resource pool: its GPUs' placements, `GPUS_PER_SLICE` GPUs a slice
    (a slice holds at most 64 devices that consume counters), and every GPU's counter
    set in a slice of its own (a slice holds sharedCounters or devices, not both)."""
    counters = {
        f"gpu-{gpu}": {f"slice-{i}": "1" for i in range(8)} | {"multiprocessors": "98"}
        for gpu in range(gpus)
    }
    firsts = range(0, gpus, GPUS_PER_SLICE)
    count = len(firsts) + 1
    slices = [
        t.resource_slice(
            node,
            [
                d
                for gpu in range(first, min(first + GPUS_PER_SLICE, gpus))
                for d in gpu_placements(gpu, order)
            ],
            name=f"{node}-gpus-{first}",
            slice_count=count,
        )
        for first in firsts
    ]
    shared = t.resource_slice(
        node, [], name=f"{node}-counters", slice_count=count, shared_counters=counters
    )
    del shared["spec"]["devices"]
    return [*slices, shared]


def promised(node: str, slices: list[dict], kind: str) -> int:
    """How many devices of `kind` the agent reports free on the idle node."""
    name, expression = DEVICE_CLASSES[kind]
    state = ClusterState()
    state.apply(CLASSES, "ADDED", t.device_class(name, expression))
    state.apply(POOLS, "ADDED", t.pool_observation(node, [(kind, DRIVER, name)]))
    state.apply(NODES, "ADDED", t.node(node, node))
    for each in slices:
        state.apply(SLICES, "ADDED", each)
    histogram = state.pool_report(node).histogram
    assert histogram is not None, f"the agent observes no node {node}"
    [(free, nodes)] = histogram.buckets
    assert nodes == 1
    return free[0]


# --------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class Case:
    kind: str  # a key of DEVICE_CLASSES
    order: str
    gpus: int
    node: str
    promise: int  # the agent's free count of `kind` on the idle node


@dataclass(frozen=True)
class Outcome:
    case: Case
    k: int
    verdict: str  # "bound", "timed out", "refused" or "undecided"
    seconds: float
    message: str


def measure(client: Client, case: Case, k: int, name: str) -> Outcome:
    """One pod claiming `count: k` of the case's class on its node, until decided."""
    device_class = DEVICE_CLASSES[case.kind][0]
    request = exact_request("mig", device_class, k)
    client.create(ResourceClaim(claim_manifest(name, NAMESPACE, [request], {})))
    pod = Pod(pinned_pod(name, NAMESPACE, case.node, name, {}))
    started = time.monotonic()
    client.create(pod)
    verdict, message = "undecided", ""
    while time.monotonic() - started < DECIDE_SECONDS:
        seen = client.get(Pod, name, namespace=NAMESPACE)
        if (seen.get("spec") or {}).get("nodeName"):
            verdict = "bound"
            break
        condition = find_condition(seen, "PodScheduled")
        if condition.get("status") == "False":
            message = condition.get("message") or ""
            verdict = "timed out" if "timed out" in message else "refused"
            break
        time.sleep(POLL_SECONDS)
    seconds = time.monotonic() - started
    remove(client, name)
    return Outcome(case, k, verdict, seconds, message)


def remove(client: Client, name: str) -> None:
    """Delete the pod and its claim, until the claim is gone (its devices free again)."""
    delete(client, Pod, name, NAMESPACE)
    delete(client, ResourceClaim, name, NAMESPACE)
    kube.eventually(
        lambda: (
            name
            not in {c["metadata"]["name"] for c in client.list(ResourceClaim, namespace=NAMESPACE)}
        ),
        f"claim {name} gone",
        timeout=60,
        every=0.1,
    )
    # kube-scheduler's informers hear of the release a moment after the API server.
    time.sleep(0.5)


def counts(total: int, outcomes: list[Outcome], give_up: int) -> Iterator[int]:
    """k = 1 .. total; after `give_up` timeouts in a row, only `total`. Read lazily:
    `outcomes` grows with each k measured."""
    for k in range(1, total + 1):
        recent = [o.verdict for o in outcomes[-give_up:]]
        if len(recent) == give_up and all(v == "timed out" for v in recent) and k < total:
            continue
        yield k


def series(client: Client, case: Case, give_up: int) -> list[Outcome]:
    outcomes: list[Outcome] = []
    total = min(ONE_SLICE_PER_GPU * case.gpus, CLAIM_MAX_DEVICES + 1)
    for k in counts(total, outcomes, give_up):
        name = f"{case.node}-{case.kind}-k{k}"
        outcome = measure(client, case, k, name)
        outcomes.append(outcome)
        print(line(outcome), flush=True)
    return outcomes


def line(o: Outcome) -> str:
    within = "within" if o.k <= o.case.promise else "beyond"
    return (
        f"{o.case.kind:8s} {o.case.order:15s} gpus={o.case.gpus} k={o.k:2d} "
        f"({within} the agent's {o.case.promise}): {o.verdict} after {o.seconds:.2f}s"
        + (f" [{o.message[:160]}]" if o.verdict != "bound" else "")
    )


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def setup(client: Client, args: argparse.Namespace) -> list[Case]:
    client.create(Namespace({"metadata": {"name": NAMESPACE}}))
    kube.eventually(
        lambda: bool(client.get(ServiceAccount, "default", namespace=NAMESPACE)),
        "the default ServiceAccount",
        not_yet=NOT_SERVED,
    )
    for kind in args.classes:
        name, expression = DEVICE_CLASSES[kind]
        client.create(DeviceClass(t.device_class(name, expression)))
    cases = []
    for order in args.orders:
        for gpus in args.gpus:
            node = f"{order.split('-')[0]}-{gpus}"
            slices = node_slices(node, gpus, order)
            publish_slices(client, node, ready_node(client, node), slices)
            cases += [
                Case(kind, order, gpus, node, promised(node, slices, kind)) for kind in args.classes
            ]
    return cases


def main() -> None:
    args = arguments()
    version = kube_versions.find(args.kube)
    print(f"Kubernetes {version.version}; {load()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-partitions-") as workdir:
        cluster = stack.start_workload(Path(workdir), kube=version)
        try:
            client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="bench")
            cases = setup(client, args)
            outcomes = [o for case in cases for o in series(client, case, args.give_up)]
        finally:
            cluster.supervisor.stop()
    print(f"\n{load()}\n")
    print("| class | order | GPUs | k | agent's count | kube-scheduler | seconds |")
    print("|---|---|---|---|---|---|---|")
    for o in outcomes:
        c = o.case
        print(
            f"| {c.kind} | {c.order} | {c.gpus} | {o.k} | {c.promise} "
            f"| {o.verdict} | {o.seconds:.2f} |"
        )


if __name__ == "__main__":
    main()
