"""Table-driven specs of what the agent reports on a pool (design/observation.md)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from modelplane_agent.partitions import SLICE_ORDER
from modelplane_agent.pools import BINDING_CONDITIONS, SHARED_DEVICES, Uncounted, coarsen
from modelplane_agent.snapshot import Resources, pod_requests
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
)
from modelplane_agent.status import pool_status, warning
from modelplane_agent.taint_rules import UNSELECTIVE_RULE
from modelplane_common.observation import DeviceKinds, Histogram, Observation, parse_observation
from modelplane_testkit import agent_builders as t

KIND_OF = {
    "Node": NODES,
    "Pod": PODS,
    "ResourceSlice": SLICES,
    "ResourceClaim": CLAIMS,
    "DeviceClass": CLASSES,
    "PoolObservation": POOLS,
    "ReplicaObservation": REPLICAS,
    "DeviceTaintRule": RULES,
}

GPU_CLASS = t.device_class(
    "gpu.nvidia.com",
    'device.driver == "gpu.nvidia.com"',
    'device.attributes["gpu.nvidia.com"].type == "gpu"',
)
MIG_CLASS = t.device_class("mig-1g.nvidia.com", 'device.attributes["gpu.nvidia.com"].type == "mig"')
NIC_CLASS = t.device_class("nic.example.com", 'device.driver == "nic.example.com"')
# Reads a GPU attribute with no driver guard: kube-scheduler evaluates it on every device
# of a node, and on another driver's it fails ("no such key").
UNGUARDED_CLASS = t.device_class("unguarded", 'device.attributes["gpu.nvidia.com"].type == "gpu"')
UNGUARDED = ("gpu", t.NVIDIA, "unguarded")
GPU = ("gpu", t.NVIDIA, "gpu.nvidia.com")
MIG = ("mig", t.NVIDIA, "mig-1g.nvidia.com")
NIC = ("nic", t.NIC_DRIVER, "nic.example.com")
POOL = t.pool_observation("a100", [GPU])
CLASSES_ALL = [GPU_CLASS, MIG_CLASS, NIC_CLASS]
GPUS_4 = tuple(f"gpu-{i}" for i in range(4))


def gpus(node: str, count: int = 4, **kwargs) -> dict:
    return t.resource_slice(node, [t.device(f"gpu-{i}") for i in range(count)], **kwargs)


def nics(node: str, count: int = 2) -> dict:
    return t.resource_slice(
        node, [t.device(f"nic-{i}", "nic") for i in range(count)], driver=t.NIC_DRIVER
    )


def tainted(effect: str) -> dict:
    """n1's four GPUs, gpu-0 carrying one device taint of `effect`."""
    taint = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": effect}
    return t.resource_slice(
        "n1", [t.device("gpu-0", taints=[taint]), *(t.device(f"gpu-{i}") for i in range(1, 4))]
    )


def shared(claim: dict) -> dict:
    """`claim` holding shares of its devices (consumable capacity: a shareID per result)."""
    for i, result in enumerate(claim["status"]["allocation"]["devices"]["results"]):
        result["shareID"] = f"00000000-0000-0000-0000-00000000000{i}"
        result["consumedCapacity"] = {"memory": "10Gi"}
    return claim


def held(name: str, node: str, *devices: str, **kwargs) -> dict:
    return t.claim(name, [(node, d) for d in devices], **kwargs)


def deleted(obj: dict) -> tuple[str, dict]:
    return ("DELETED", obj)


def modified(obj: dict) -> tuple[str, dict]:
    return ("MODIFIED", obj)


def run(steps) -> ClusterState:
    """Feed watch events in order: a bare object is ADDED, a pair is (event, object)."""
    state = ClusterState()
    for step in steps:
        event, obj = step if isinstance(step, tuple) else ("ADDED", step)
        state.apply(KIND_OF[obj["kind"]], event, obj)
    return state


def outcome(state: ClusterState, pool: str = "a100"):
    report = state.pool_report(pool)
    buckets = None if report.histogram is None else dict(report.histogram.buckets)
    return report.observed_nodes, buckets, report.condition.status, report.condition.reason


CASES = {
    "an empty node counts every device of the kind free": (
        [*CLASSES_ALL, POOL, t.node("n1"), gpus("n1")],
        (1, {(4,): 1}, "True", "Observed"),
    ),
    "a device a modelplane claim holds is taken": (
        [*CLASSES_ALL, POOL, t.node("n1"), gpus("n1"), held("c", "n1", "gpu-0", "gpu-1")],
        (1, {(2,): 1}, "True", "Observed"),
    ),
    "a device a claim of some other team's pod holds is taken too": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            gpus("n1"),
            held("theirs", "n1", "gpu-3", namespace="batch", owner_labels={"app": "training"}),
        ],
        (1, {(3,): 1}, "True", "Observed"),
    ),
    "a deallocated claim frees its devices": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            gpus("n1"),
            held("c", "n1", "gpu-0"),
            modified(t.claim("c", [])),
        ],
        (1, {(4,): 1}, "True", "Observed"),
    ),
    "a deleted claim frees its devices": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            gpus("n1"),
            held("c", "n1", "gpu-0"),
            deleted(held("c", "n1", "gpu-0")),
        ],
        (1, {(4,): 1}, "True", "Observed"),
    ),
    "a device held only through adminAccess stays free": (
        [*CLASSES_ALL, POOL, t.node("n1"), gpus("n1"), held("m", "n1", *GPUS_4, admin_access=True)],
        (1, {(4,): 1}, "True", "Observed"),
    ),
    "a device held by an ordinary claim and an adminAccess one is taken": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            gpus("n1"),
            held("m", "n1", *GPUS_4, admin_access=True),
            held("c", "n1", "gpu-1"),
        ],
        (1, {(3,): 1}, "True", "Observed"),
    ),
    "a device with a NoSchedule device taint is never free": (
        [*CLASSES_ALL, POOL, t.node("n1"), tainted("NoSchedule")],
        (1, {(3,): 1}, "True", "Observed"),
    ),
    "a device with a NoExecute device taint stays not free once its claim is gone": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            tainted("NoExecute"),
            held("evicted", "n1", "gpu-0"),
            deleted(held("evicted", "n1", "gpu-0")),
        ],
        (1, {(3,): 1}, "True", "Observed"),
    ),
    "a device taint of effect None leaves the device free": (
        [*CLASSES_ALL, POOL, t.node("n1"), tainted("None")],
        (1, {(4,): 1}, "True", "Observed"),
    ),
    "a device waiting on binding conditions is not counted free": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            t.resource_slice(
                "n1", [t.device("gpu-0", binding_conditions=["attached"]), t.device("gpu-1")]
            ),
        ],
        (1, {(1,): 1}, "True", "Observed"),
    ),
    "a device allowing multiple allocations is taken by one share of it": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            gpus("n1"),
            shared(held("share", "n1", "gpu-0")),
        ],
        (1, {(3,): 1}, "True", "Observed"),
    ),
    "a claim allocated before its slice is seen still takes the device": (
        [*CLASSES_ALL, POOL, t.node("n1"), held("c", "n1", "gpu-0"), gpus("n1")],
        (1, {(3,): 1}, "True", "Observed"),
    ),
    "a cordoned node is observed but not in the histogram": (
        [*CLASSES_ALL, POOL, t.node("n1"), gpus("n1"), t.node("n2", cordoned=True), gpus("n2")],
        (2, {(4,): 1}, "True", "Observed"),
    ),
    "a NotReady node is observed but not in the histogram": (
        [*CLASSES_ALL, POOL, t.node("n1"), gpus("n1"), t.node("n2", ready=False), gpus("n2")],
        (2, {(4,): 1}, "True", "Observed"),
    ),
    "a booting node without a Ready condition nor slices counts only in observedNodes": (
        [*CLASSES_ALL, POOL, t.node("n1"), gpus("n1"), t.node("n2", ready=None)],
        (2, {(4,): 1}, "True", "Observed"),
    ),
    "a booting node that turns Ready appears as empty": (
        [*CLASSES_ALL, POOL, t.node("n2", ready=None), gpus("n2"), modified(t.node("n2"))],
        (1, {(4,): 1}, "True", "Observed"),
    ),
    "a Ready node whose driver has not published yet has nothing free": (
        [*CLASSES_ALL, POOL, t.node("n1")],
        (1, {(0,): 1}, "True", "Observed"),
    ),
    "an untolerated NoSchedule taint leaves the node out": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1", taints=[{"key": "maintenance", "effect": "NoSchedule"}]),
            gpus("n1"),
        ],
        (1, {}, "True", "Observed"),
    ),
    "an untolerated NoExecute taint leaves the node out": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1", taints=[{"key": "x", "value": "y", "effect": "NoExecute"}]),
            gpus("n1"),
        ],
        (1, {}, "True", "Observed"),
    ),
    "a taint the pool tolerates keeps the node in": (
        [
            *CLASSES_ALL,
            t.pool_observation(
                "a100",
                [GPU],
                tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
            ),
            t.node(
                "n1", taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
            ),
            gpus("n1"),
        ],
        (1, {(4,): 1}, "True", "Observed"),
    ),
    "a toleration for another value does not tolerate the taint": (
        [
            *CLASSES_ALL,
            t.pool_observation("a100", [GPU], tolerations=[{"key": "dedicated", "value": "infer"}]),
            t.node("n1", taints=[{"key": "dedicated", "value": "train", "effect": "NoSchedule"}]),
            gpus("n1"),
        ],
        (1, {}, "True", "Observed"),
    ),
    "a PreferNoSchedule taint keeps the node in": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1", taints=[{"key": "soft", "effect": "PreferNoSchedule"}]),
            gpus("n1"),
        ],
        (1, {(4,): 1}, "True", "Observed"),
    ),
    "a node of another pool is not observed": (
        [*CLASSES_ALL, POOL, t.node("n1"), gpus("n1"), t.node("h1", pool="h100"), gpus("h1")],
        (1, {(4,): 1}, "True", "Observed"),
    ),
    "a node that loses the pool label leaves the pool": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            gpus("n1"),
            t.node("n2"),
            gpus("n2"),
            modified(t.node("n2", pool=None)),
        ],
        (1, {(4,): 1}, "True", "Observed"),
    ),
    "a node that gains the pool label joins the pool": (
        [*CLASSES_ALL, POOL, t.node("n1", pool=None), gpus("n1"), modified(t.node("n1"))],
        (1, {(4,): 1}, "True", "Observed"),
    ),
    "a removed node leaves the pool with its devices": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            gpus("n1"),
            t.node("n2"),
            gpus("n2", 2),
            deleted(t.node("n2")),
        ],
        (1, {(4,): 1}, "True", "Observed"),
    ),
    "a GPU and NIC node reports both kinds in declared order": (
        [
            *CLASSES_ALL,
            t.pool_observation("a100", [GPU, NIC]),
            t.node("n1"),
            gpus("n1", 8),
            nics("n1", 2),
            held("c", "n1", "gpu-0", "gpu-1"),
            t.claim("n", [("n1", "nic-0")], driver=t.NIC_DRIVER),
        ],
        (1, {(6, 1): 1}, "True", "Observed"),
    ),
    "a device the DeviceClass selector rejects is not counted": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            t.resource_slice("n1", [t.device("gpu-0"), t.device("vf-0", "virtual")]),
        ],
        (1, {(1,): 1}, "True", "Observed"),
    ),
    "a device of another driver is not counted even if the class would match it": (
        [
            t.device_class("any", "true"),
            t.pool_observation("a100", [("gpu", t.NVIDIA, "any")]),
            t.node("n1"),
            gpus("n1", 2),
            nics("n1", 2),
        ],
        (1, {(2,): 1}, "True", "Observed"),
    ),
    "a DeviceClass without a driver guard counts nothing on a node where it errors on "
    "another driver's free device": (
        [
            UNGUARDED_CLASS,
            t.pool_observation("a100", [UNGUARDED]),
            t.node("n1"),
            gpus("n1", 2),
            nics("n1", 2),
            t.node("n2"),
            gpus("n2", 2),
        ],
        (2, {(0,): 1, (2,): 1}, "True", "Observed"),
    ),
    "a DeviceClass without a driver guard is not evaluated on another driver's allocated devices": (
        [
            UNGUARDED_CLASS,
            t.pool_observation("a100", [UNGUARDED]),
            t.node("n1"),
            gpus("n1", 2),
            nics("n1", 2),
            t.claim("n", [("n1", "nic-0"), ("n1", "nic-1")], driver=t.NIC_DRIVER),
        ],
        (1, {(2,): 1}, "True", "Observed"),
    ),
    "a DeviceClass without a driver guard counts nothing on a node where it errors on "
    "another driver's held device that allows multiple allocations (kube-scheduler tries it)": (
        [
            UNGUARDED_CLASS,
            t.pool_observation("a100", [UNGUARDED]),
            t.node("n1"),
            gpus("n1", 2),
            t.resource_slice("n1", [t.device("nic-0", "nic", shared=True)], driver=t.NIC_DRIVER),
            shared(t.claim("n", [("n1", "nic-0")], driver=t.NIC_DRIVER)),
        ],
        (1, {(0,): 1}, "True", "Observed"),
    ),
    "a DeviceClass reading an attribute a device of its own driver lacks counts nothing "
    "on that node": (
        [
            t.device_class("by-model", 'device.attributes["gpu.nvidia.com"].model == "a100"'),
            t.pool_observation("a100", [("gpu", t.NVIDIA, "by-model")]),
            t.node("n1"),
            gpus("n1", 2),
        ],
        (1, {(0,): 1}, "True", "Observed"),
    ),
    "slices of an older generation of a resource pool are ignored": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            gpus("n1", 8, generation=1),
            gpus("n1", 2, generation=2),
        ],
        (1, {(2,): 1}, "True", "Observed"),
    ),
    "a resource pool with fewer slices seen than it declares is skipped": (
        [*CLASSES_ALL, POOL, t.node("n1"), gpus("n1", slice_count=2)],
        (1, {(0,): 1}, "True", "Observed"),
    ),
    "a resource pool counts once every slice it declares is seen": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            gpus("n1", slice_count=2, name="n1-a"),
            t.resource_slice("n1", [t.device("gpu-9")], slice_count=2, name="n1-b"),
        ],
        (1, {(5,): 1}, "True", "Observed"),
    ),
    "a newer generation seen in part hides the complete older one": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            gpus("n1", slice_count=1, generation=1),
            gpus("n1", slice_count=2, generation=2),
        ],
        (1, {(0,): 1}, "True", "Observed"),
    ),
    "a resource pool publishing a device name twice is skipped": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            gpus("n1", slice_count=2, name="n1-a"),
            t.resource_slice("n1", [t.device("gpu-0")], slice_count=2, name="n1-b"),
        ],
        (1, {(0,): 1}, "True", "Observed"),
    ),
    "a resource pool declaring a counter set twice is skipped": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            gpus("n1", slice_count=2, name="n1-a", shared_counters={"c": {"m": "1"}}),
            t.resource_slice(
                "n1", [], slice_count=2, name="n1-b", shared_counters={"c": {"m": "1"}}
            ),
        ],
        (1, {(0,): 1}, "True", "Observed"),
    ),
    "a device consuming an undeclared counter makes its whole resource pool skipped": (
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1"),
            t.resource_slice(
                "n1", [t.device("gpu-0"), t.device("gpu-1", consumes={"c": {"m": "1"}})]
            ),
        ],
        (1, {(0,): 1}, "True", "Observed"),
    ),
    "network-attached slices count on no node, and say so": (
        [*CLASSES_ALL, POOL, t.node("n1"), gpus("n1"), gpus(None, 8)],  # type: ignore[arg-type]
        (1, {(4,): 1}, "True", "NetworkAttachedDevices"),
    ),
    "a missing DeviceClass makes the pool unobservable": (
        [GPU_CLASS, t.pool_observation("a100", [GPU, NIC]), t.node("n1"), gpus("n1")],
        (1, None, "False", "DeviceClassNotFound"),
    ),
    "a deleted DeviceClass makes the pool unobservable": (
        [*CLASSES_ALL, POOL, t.node("n1"), gpus("n1"), deleted(GPU_CLASS)],
        (1, None, "False", "DeviceClassNotFound"),
    ),
    "a DeviceClass selector that does not compile makes the pool unobservable": (
        [t.device_class("gpu.nvidia.com", "device.driver =="), POOL, t.node("n1"), gpus("n1")],
        (1, None, "False", "InvalidDeviceClass"),
    ),
    "a DeviceClass selector failing with a type error makes the pool unobservable": (
        [t.device_class("gpu.nvidia.com", "device.driver > 1"), POOL, t.node("n1"), gpus("n1")],
        (1, None, "False", "InvalidDeviceClass"),
    ),
    "a fixed DeviceClass makes the pool observable again": (
        [
            t.device_class("gpu.nvidia.com", "device.driver =="),
            POOL,
            t.node("n1"),
            gpus("n1"),
            modified(GPU_CLASS),
        ],
        (1, {(4,): 1}, "True", "Observed"),
    ),
    "a spec without devices counts nodes with an empty vector": (
        [*CLASSES_ALL, t.pool_observation("a100", []), t.node("n1"), gpus("n1")],
        (1, {(): 1}, "True", "Observed"),
    ),
}


@pytest.mark.parametrize(("steps", "expected"), list(CASES.values()), ids=list(CASES))
def test_pool_report(steps, expected):
    assert outcome(run(steps)) == expected


@pytest.mark.parametrize(
    ("slices", "message"),
    [
        pytest.param(
            [gpus("n1", slice_count=2), nics("n1")],
            "1/1 nodes schedulable; devices not counted: 1 incomplete resource pool",
            id="the message counts nodes whose devices an incomplete resource pool hides",
        ),
        pytest.param(
            [
                gpus("n1", slice_count=2, name="n1-a"),
                t.resource_slice("n1", [t.device("gpu-0")], slice_count=2, name="n1-b"),
            ],
            "1/1 nodes schedulable; devices not counted: 1 invalid resource pool",
            id="the message counts nodes whose devices an invalid resource pool hides",
        ),
    ],
)
def test_uncounted_devices_are_explained(slices, message):
    state = run([*CLASSES_ALL, t.pool_observation("a100", [GPU, NIC]), t.node("n1"), *slices])
    assert state.pool_report("a100").condition.message == message


# --------------------------------------------------------------------------- non-device capacity

SMALLEST_8_CPU = t.pool_observation("a100", [GPU], min_pod_requests={"cpu": "8", "memory": "64Gi"})


def bound(name: str, node: str | None = "n1", **requests: str) -> dict:
    return t.pod(name, replica="other", namespace="batch", node_name=node, requests=requests)


def nominated(pod: dict, node: str) -> dict:
    """`pod`, not bound, with preemption making room for it on `node`."""
    spec = {k: v for k, v in pod["spec"].items() if k != "nodeName"}
    return pod | {"spec": spec, "status": {**pod.get("status", {}), "nominatedNodeName": node}}


def resized(running: str | None, allocated: str | None, name: str = "c", **status) -> dict:
    """A status whose container `name` runs with `running` cpu, `allocated` by the kubelet."""
    entry: dict = {"name": name}
    if running is not None:
        entry["resources"] = {"requests": {"cpu": running}}
    if allocated is not None:
        entry["allocatedResources"] = {"cpu": allocated}
    return {"containerStatuses": [entry], **status}


INFEASIBLE = {
    "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
}
DEFERRED = {"conditions": [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]}
ROOMY = {"cpu": "64", "memory": "512Gi", "pods": "110"}
CAPPED = "1/1 nodes schedulable; 1 with room for fewer pods than free devices: "
CAPACITY_CASES = [
    pytest.param(
        [POOL, t.node("n1", allocatable=ROOMY | {"pods": "2"}), bound("a"), bound("b")],
        (1, {(0,): 1}, "1/1 nodes schedulable; 1 without room for a pod: 1 pods"),
        id="a node whose pod slots are all taken has no free devices",
    ),
    pytest.param(
        [POOL, t.node("n1", allocatable=ROOMY | {"pods": "2"}), bound("a")],
        (1, {(1,): 1}, CAPPED + "1 pods"),
        id="a node with one pod slot left counts one free device of each kind",
    ),
    pytest.param(
        [SMALLEST_8_CPU, t.node("n1", allocatable=ROOMY | {"cpu": "16"}), bound("a", cpu="7")],
        (1, {(1,): 1}, CAPPED + "1 cpu"),
        id="cpu left for one smallest pod counts one free device, not all four",
    ),
    pytest.param(
        [SMALLEST_8_CPU, t.node("n1"), bound("a", cpu="48")],
        (1, {(2,): 1}, CAPPED + "1 cpu"),
        id="cpu left for two smallest pods counts two free devices",
    ),
    pytest.param(
        [
            SMALLEST_8_CPU,
            t.node("n1"),
            t.resource_slice("n1", [t.device("nic-0", "nic")], driver=t.NIC_DRIVER, slice_count=2),
            bound("a", cpu="48"),
        ],
        (1, {(2,): 1}, CAPPED + "1 cpu; devices not counted: 1 incomplete resource pool"),
        id="a capped node still says which of its devices were not counted at all",
    ),
    pytest.param(
        [SMALLEST_8_CPU, t.node("n1"), bound("a", memory="400Gi")],
        (1, {(1,): 1}, CAPPED + "1 memory"),
        id="memory left for one smallest pod counts one free device",
    ),
    pytest.param(
        [SMALLEST_8_CPU, t.node("n1"), bound("a", cpu="32")],
        (1, {(4,): 1}, "1/1 nodes schedulable"),
        id="room for as many smallest pods as free devices leaves them all free",
    ),
    pytest.param(
        [SMALLEST_8_CPU, t.node("n1"), bound("a", cpu="48"), deleted(bound("a", cpu="48"))],
        (1, {(4,): 1}, "1/1 nodes schedulable"),
        id="a deleted pod lifts the cap its requests set",
    ),
    pytest.param(
        [POOL, t.node("n1", allocatable=ROOMY | {"cpu": "4"}), bound("a", cpu="4")],
        (1, {(4,): 1}, "1/1 nodes schedulable"),
        id="without a declared pod shape, cpu used up leaves the devices free",
    ),
    pytest.param(
        [SMALLEST_8_CPU, t.node("n1"), bound("a", cpu="50"), bound("b", cpu="6500m")],
        (1, {(0,): 1}, "1/1 nodes schedulable; 1 without room for a pod: 1 cpu"),
        id="a node whose cpu other pods use up has no free devices for the smallest pod",
    ),
    pytest.param(
        [SMALLEST_8_CPU, t.node("n1"), bound("a", cpu="56")],
        (1, {(1,): 1}, CAPPED + "1 cpu"),
        id="the smallest pod fitting exactly counts one free device",
    ),
    pytest.param(
        [SMALLEST_8_CPU, t.node("n1"), bound("a", memory="480Gi")],
        (1, {(0,): 1}, "1/1 nodes schedulable; 1 without room for a pod: 1 memory"),
        id="a node whose memory other pods use up has no free devices for the smallest pod",
    ),
    pytest.param(
        [SMALLEST_8_CPU, t.node("n1"), bound("a", cpu="60"), deleted(bound("a", cpu="60"))],
        (1, {(4,): 1}, "1/1 nodes schedulable"),
        id="a deleted pod gives its requests back",
    ),
    pytest.param(
        [
            SMALLEST_8_CPU,
            t.node("n1"),
            t.pod(
                "done", namespace="batch", node_name="n1", phase="Succeeded", requests={"cpu": "60"}
            ),
        ],
        (1, {(4,): 1}, "1/1 nodes schedulable"),
        id="a finished pod takes nothing of its node",
    ),
    pytest.param(
        [SMALLEST_8_CPU, t.node("n1"), bound("a", cpu="60", node="n2")],
        (1, {(4,): 1}, "1/1 nodes schedulable"),
        id="a pod bound to another node takes nothing of this one",
    ),
    pytest.param(
        [SMALLEST_8_CPU, t.node("n1"), nominated(bound("p", cpu="60"), "n1")],
        (1, {(0,): 1}, "1/1 nodes schedulable; 1 without room for a pod: 1 cpu"),
        id="a pod preemption nominated to the node takes its room there before it binds",
    ),
    pytest.param(
        [
            SMALLEST_8_CPU,
            t.node("n1"),
            nominated(bound("p", cpu="60"), "n1"),
            modified(bound("p", cpu="60", node="n2")),
        ],
        (1, {(4,): 1}, "1/1 nodes schedulable"),
        id="a nominated pod bound elsewhere gives the room back",
    ),
    pytest.param(
        [
            SMALLEST_8_CPU,
            t.node("n1"),
            bound("a", cpu="8") | {"status": resized("60", "60", name="main")},
        ],
        (1, {(0,): 1}, "1/1 nodes schedulable; 1 without room for a pod: 1 cpu"),
        id="a pod being resized down keeps the room it runs with",
    ),
    pytest.param(
        [POOL, t.node("n1", allocatable={})],
        (1, {(0,): 1}, "1/1 nodes schedulable; 1 without room for a pod: 1 pods"),
        id="a node that has not reported its allocatable has room for no pod",
    ),
    pytest.param(
        [
            SMALLEST_8_CPU,
            t.node("n1"),
            t.node("n2"),
            gpus("n2"),
            bound("a", cpu="60"),
            modified(t.node("n1", allocatable=ROOMY | {"cpu": "96"})),
        ],
        (2, {(4,): 2}, "2/2 nodes schedulable"),
        id="a node whose allocatable grows gets room again",
    ),
]


@pytest.mark.parametrize(("steps", "expected"), CAPACITY_CASES)
def test_non_device_capacity(steps, expected):
    state = run([*CLASSES_ALL, gpus("n1"), *steps])
    report = state.pool_report("a100")
    buckets = None if report.histogram is None else dict(report.histogram.buckets)
    assert (report.observed_nodes, buckets, report.condition.message) == expected


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        pytest.param(
            {"cpu": "lots"},
            "spec.minPodRequests.cpu must be a Kubernetes quantity, got 'lots'",
            id="an unreadable cpu quantity is an invalid spec naming it",
        ),
        pytest.param(
            "8 cpus",
            "spec.minPodRequests must be a map, got '8 cpus'",
            id="minPodRequests that is not a map is an invalid spec",
        ),
    ],
)
def test_an_unreadable_pod_shape_makes_the_pool_unobservable(requests, message):
    pool = t.pool_observation("a100", [GPU], min_pod_requests={})
    pool["spec"]["minPodRequests"] = requests
    report = run([*CLASSES_ALL, pool, t.node("n1"), gpus("n1")]).pool_report("a100")
    assert (report.condition.reason, report.condition.message) == ("InvalidSpec", message)


def test_an_unreadable_max_age_makes_the_pool_unobservable_naming_it():
    pool = t.pool_observation("a100", [GPU], max_age="soon")
    report = run([*CLASSES_ALL, pool, t.node("n1"), gpus("n1")]).pool_report("a100")
    assert (report.condition.reason, report.condition.message) == (
        "InvalidSpec",
        "spec.maxAge: not a duration such as 5m, 90s or 1h30m, got 'soon'",
    )


def container(cpu: str, memory: str = "1Gi", **extra) -> dict:
    return {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}, **extra}


GI = 1024**3
POD_REQUEST_CASES = [
    pytest.param(
        {"containers": [container("1"), container("500m")]}, (1500, 2 * GI), id="containers add up"
    ),
    pytest.param(
        {"containers": [container("1")], "initContainers": [container("4", "8Gi")]},
        (4000, 8 * GI),
        id="a larger init container raises the request to its own",
    ),
    pytest.param(
        {
            "containers": [container("1")],
            "initContainers": [container("2", restartPolicy="Always"), container("3")],
        },
        (5000, 2 * GI),
        id="a sidecar runs beside the containers and the init containers after it",
    ),
    pytest.param(
        {"containers": [container("1")], "resources": {"requests": {"cpu": "6"}}},
        (6000, GI),
        id="pod-level requests replace the containers' sum for what they set",
    ),
    pytest.param(
        {"containers": [container("1")], "overhead": {"cpu": "250m", "memory": "1Gi"}},
        (1250, 2 * GI),
        id="the pod overhead is added",
    ),
    pytest.param(
        {"containers": [{"name": "c"}]}, (0, 0), id="a container without requests asks nothing"
    ),
]


@pytest.mark.parametrize(("spec", "expected"), POD_REQUEST_CASES)
def test_pod_requests(spec, expected):
    assert pod_requests(spec) == Resources(*expected, pods=1)


RESIZE_CASES = [
    pytest.param("2", resized("8", "8"), 8000, id="a downsize not yet done counts what still runs"),
    pytest.param("8", resized("2", "8"), 8000, id="an upsize allocated counts the allocation"),
    pytest.param("8", resized("2", "2", **DEFERRED), 8000, id="a deferred upsize counts the spec"),
    pytest.param(
        "8",
        resized("2", "2", **INFEASIBLE),
        2000,
        id="an infeasible upsize counts what runs, not the spec",
    ),
    pytest.param(
        "8", resized(None, "2"), 8000, id="a status without resources leaves the spec alone"
    ),
    pytest.param("8", {}, 8000, id="no container status reads the spec"),
]


@pytest.mark.parametrize(("cpu", "status", "expected"), RESIZE_CASES)
def test_pod_requests_of_a_pod_resized_in_place(cpu, status, expected):
    spec = {"containers": [container(cpu)]}
    assert pod_requests(spec, status).cpu == expected


def test_a_resized_sidecar_counts_like_a_container_and_an_init_container_by_its_spec():
    spec = {
        "containers": [container("1")],
        "initContainers": [
            {"name": "s", **container("1"), "restartPolicy": "Always"} | {"name": "s"},
            {**container("1"), "name": "i"},
        ],
    }
    status = {
        "initContainerStatuses": [
            {"name": "s", "resources": {"requests": {"cpu": "6"}}},
            {"name": "i", "resources": {"requests": {"cpu": "50"}}},
        ]
    }
    # The sidecar runs at 6 beside the container (1); the init container counts its
    # spec (1) beside the sidecar: 7 at most.
    assert pod_requests(spec, status).cpu == 7000


def test_a_device_class_failing_on_a_device_of_a_node_is_named_in_the_message():
    pool = t.pool_observation("a100", [UNGUARDED])
    state = run([UNGUARDED_CLASS, pool, t.node("n1"), gpus("n1", 2), nics("n1", 2)])
    assert state.pool_report("a100").condition.message == (
        "1/1 nodes schedulable; devices not counted: 1 device kind gpu: DeviceClass unguarded "
        "fails on a device (no such member in mapping: 'type'): kube-scheduler may fail the node"
    )


# --------------------------------------------------------------------------- declared devices

# The InferenceCluster declares what every device of a kind has; the fleet judges request
# selectors on that (isGreaterThan(semver("550.0.0")) is true on 550.54.15), and
# kube-scheduler on the real devices: a device unlike the declaration is not counted.
DECLARED_550 = {"gpu": {"attributes": {"driverVersion": {"version": "550.54.15"}}}}


def versioned(name: str, version: str, **kwargs) -> dict:
    """t.device with a driverVersion attribute."""
    device = t.device(name, **kwargs)
    device["attributes"]["driverVersion"] = {"version": version}
    return device


def versions(node: str, *found: str) -> dict:
    return t.resource_slice(node, [versioned(f"gpu-{i}", v) for i, v in enumerate(found)])


DECLARED_CASES = [
    pytest.param(
        DECLARED_550,
        versions("n1", *["535.161.8"] * 8),
        (0,),
        id="devices whose driver version differs from the declared one are not counted",
    ),
    pytest.param(
        DECLARED_550, versions("n1", *["550.54.15"] * 8), (8,), id="devices as declared count"
    ),
    pytest.param(
        DECLARED_550,
        versions("n1", *["550.54.15"] * 4, *["535.161.8"] * 4),
        (4,),
        id="a node mid driver rollout counts its devices as declared",
    ),
    pytest.param(
        {"gpu": {"attributes": {"gpu.nvidia.com/driverVersion": {"version": "550.54.15"}}}},
        versions("n1", "550.54.15"),
        (1,),
        id="a declared qualified name is the device's unqualified name of its driver",
    ),
    pytest.param(
        {"gpu": {"attributes": {"example.com/driverVersion": {"version": "550.54.15"}}}},
        versions("n1", "550.54.15"),
        (0,),
        id="a declared name of another domain is not the device's unqualified name",
    ),
    pytest.param(
        {"gpu": {"attributes": {"driverVersion": {"string": "550.54.15"}}}},
        versions("n1", "550.54.15"),
        (0,),
        id="a declared string is not a device's version of the same text",
    ),
    pytest.param(
        {"gpu": {"capacity": {"memory": {"value": "85899345920"}}}},
        gpus("n1", 2),
        (2,),
        id="a declared capacity equals the device's as a quantity (80Gi)",
    ),
    pytest.param(
        {"gpu": {"capacity": {"memory": {"value": "40Gi"}}}},
        gpus("n1", 2),
        (0,),
        id="a device with more memory than declared is not counted",
    ),
    pytest.param(
        {"gpu": {"capacity": {"cores": {"value": "132"}}}},
        gpus("n1", 2),
        (0,),
        id="a device lacking a declared capacity is not counted",
    ),
]


def publishing(name: str, attributes: dict | None = None, capacity: dict | None = None) -> dict:
    """t.device with these attributes added, and only this capacity (None: its own)."""
    device = t.device(name)
    device["attributes"].update(attributes or {})
    if capacity is not None:
        device["capacity"] = capacity
    return device


DECLARED_CASES += [
    pytest.param(
        DECLARED_550,
        t.resource_slice(
            "n1",
            [versioned("gpu-0", "550.54.15"), t.device("gpu-1"), versioned("gpu-2", "550.54.15")],
        ),
        (0,),
        id="a device lacking the declared driverVersion leaves none of its node counted: "
        "a claim's selector reading it fails kube-scheduler's Filter there",
    ),
    pytest.param(
        {"gpu": {"attributes": {"driverVersion": {"string": "550.54.15"}}}},
        t.resource_slice(
            "n1",
            [
                publishing("gpu-0", {"driverVersion": {"string": "550.54.15"}}),
                versioned("gpu-1", "550.54.15"),
            ],
        ),
        (0,),
        id="a device holding a declared attribute with another type leaves none of its node "
        "counted",
    ),
    pytest.param(
        {"gpu": {"capacity": {"cores": {"value": "132"}}}},
        t.resource_slice(
            "n1", [publishing("gpu-0", capacity={"cores": {"value": "132"}}), t.device("gpu-1")]
        ),
        (0,),
        id="a device lacking a declared capacity leaves none of its node counted",
    ),
    pytest.param(
        DECLARED_550,
        t.resource_slice(
            "n1",
            [
                versioned("gpu-0", "550.54.15"),
                versioned("gpu-1", "535.161.8"),
                versioned("gpu-2", "550.54.15"),
            ],
        ),
        (2,),
        id="a device with another declared value is alone not counted: a selector is false on it",
    ),
]


@pytest.mark.parametrize(("declared", "slice_", "vector"), DECLARED_CASES)
def test_only_devices_as_declared_count(declared, slice_, vector):
    pool = t.pool_observation("a100", [GPU], declared=declared)
    state = run([*CLASSES_ALL, pool, t.node("n1"), slice_])
    assert outcome(state) == (1, {vector: 1}, "True", "Observed")


def test_devices_unlike_the_declaration_are_named_in_the_message():
    pool = t.pool_observation("a100", [GPU], declared=DECLARED_550)
    state = run([*CLASSES_ALL, pool, t.node("n1"), versions("n1", "535.161.8")])
    assert state.pool_report("a100").condition.message == (
        "1/1 nodes schedulable; devices not counted: "
        "1 device kind gpu: a device differs from the declared attribute driverVersion"
    )


def test_a_device_lacking_a_declared_entry_is_named_in_the_message():
    pool = t.pool_observation("a100", [GPU], declared=DECLARED_550)
    slice_ = t.resource_slice("n1", [versioned("gpu-0", "550.54.15"), t.device("gpu-1")])
    state = run([*CLASSES_ALL, pool, t.node("n1"), slice_])
    assert state.pool_report("a100").condition.message == (
        "1/1 nodes schedulable; devices not counted: 1 a device lacks a declared entry of "
        "device kind gpu (attribute driverVersion): kube-scheduler may fail the node for a "
        "claim selecting on it"
    )


def test_a_partition_unlike_the_declaration_leaves_none_of_its_gpu_counted():
    # The generic class matches the whole GPU too, declared as a partition: a claim may
    # get the whole GPU first, whatever the partitions' count would say.
    declared = {"part": {"attributes": {"type": {"string": "mig"}}}}
    pool = t.pool_observation("a100", [ANY], declared=declared)
    whole_last = t.resource_slice("n1", [*PARTITIONS, WHOLE], shared_counters=COUNTERS)
    state = run([*CLASSES_ALL, ANY_PART, pool, t.node("n1"), whole_last])
    assert outcome(state)[1] == {(0,): 1}


def test_partitions_all_as_declared_count_by_first_fit():
    declared = {"mig": {"attributes": {"type": {"string": "mig"}}}}
    pool = t.pool_observation("a100", [MIG], declared=declared)
    state = run([*CLASSES_ALL, pool, t.node("n1"), PARTITIONED])
    assert outcome(state)[1] == {(4,): 1}


def test_an_unreadable_declared_attribute_makes_the_spec_invalid():
    declared = {"gpu": {"attributes": {"driverVersion": {"string": "a", "int": 1}}}}
    pool = t.pool_observation("a100", [GPU], declared=declared)
    state = run([*CLASSES_ALL, pool, t.node("n1"), gpus("n1")])
    assert outcome(state) == (0, None, "False", "InvalidSpec")
    assert state.pool_report("a100").condition.message == (
        "spec.devices[0].attributes.driverVersion: one of string, int, bool, version"
    )


# --------------------------------------------------------------------------- partitions

# One GPU publishing its whole self and four 1g partitions, all drawing on one counter
# set of 40 units (KEP-4815 partitionable devices): the whole GPU takes 40, a slice 10.
COUNTERS = {"gpu-0-counters": {"memory": "40Gi"}}
WHOLE = t.device("gpu-0", consumes={"gpu-0-counters": {"memory": "40Gi"}})
PARTITIONS = [
    t.device(f"gpu-0-mig-{i}", "mig", consumes={"gpu-0-counters": {"memory": "10Gi"}})
    for i in range(4)
]
PARTITIONED = t.resource_slice("n1", [WHOLE, *PARTITIONS], shared_counters=COUNTERS)
GPU_ONLY = t.pool_observation("a100", [GPU])
MIG_ONLY = t.pool_observation("a100", [MIG])
ANY_PART = t.device_class("any-part.nvidia.com", "true")
ANY = ("part", t.NVIDIA, "any-part.nvidia.com")


def a100_layout(multiprocessors: bool = True, largest_first: bool = False) -> dict:
    """An A100's MIG placements as a partitionable driver publishes them: eight memory
    slices (and 98 multiprocessors); 1g at 0-6, 2g at 0/2/4, 3g at 0/4, 4g at 0, 7g at
    0, each consuming its memory slices (and its share of multiprocessors): 19 devices,
    the smallest profile first (or the largest)."""
    counters = {f"slice-{i}": "1" for i in range(8)}
    if multiprocessors:
        counters["multiprocessors"] = "98"
    profiles = [(1, 1, range(7)), (2, 2, (0, 2, 4)), (3, 4, (0, 4)), (4, 4, (0,)), (7, 8, (0,))]
    if largest_first:
        profiles.reverse()
    devices = [
        t.device(
            f"mig-{g}g-{start}",
            "mig",
            consumes={
                "gpu-0": {f"slice-{i}": "1" for i in range(start, start + width)}
                | ({"multiprocessors": str(14 * g)} if multiprocessors else {})
            },
        )
        for g, width, starts in profiles
        for start in starts
    ]
    return t.resource_slice("n1", devices, shared_counters={"gpu-0": counters})


def halves(*sizes: str) -> dict:
    """Partitions of one 40Gi counter, of the given sizes, named p0, p1, ..."""
    devices = [
        t.device(f"p{i}", "mig", consumes={"gpu-0-counters": {"memory": size}})
        for i, size in enumerate(sizes)
    ]
    return t.resource_slice("n1", devices, shared_counters=COUNTERS)


PARTITION_CASES = [
    pytest.param(MIG_ONLY, PARTITIONED, [], (4,), id="MIG-like partitions all fit an idle GPU"),
    pytest.param(
        GPU_ONLY,
        PARTITIONED,
        [("n1", "gpu-0-mig-0")],
        (0,),
        id="an allocated partition leaves the whole GPU not free",
    ),
    pytest.param(
        MIG_ONLY,
        PARTITIONED,
        [("n1", "gpu-0")],
        (0,),
        id="an allocated whole GPU leaves no partition free",
    ),
    pytest.param(
        MIG_ONLY,
        PARTITIONED,
        [("n1", "gpu-0-mig-0"), ("n1", "gpu-0-mig-1"), ("n1", "gpu-0-mig-2")],
        (1,),
        id="partitions are free while their counters last",
    ),
    pytest.param(
        t.pool_observation("a100", [ANY]),
        halves("20Gi", "20Gi", "20Gi"),
        [],
        (2,),
        id="overlapping placements count as many as fit together",
    ),
    pytest.param(
        t.pool_observation("a100", [ANY]),
        halves("40Gi", "20Gi", "20Gi"),
        [],
        (1,),
        id="one class over the whole GPU published before its halves counts what first fit "
        "gives: the whole GPU",
    ),
    pytest.param(
        t.pool_observation("a100", [ANY]),
        halves("20Gi", "20Gi", "40Gi"),
        [],
        (2,),
        id="one class over the halves published before the whole GPU counts both halves",
    ),
    pytest.param(
        t.pool_observation("a100", [ANY]),
        a100_layout(largest_first=True),
        [],
        (1,),
        id="a generic MIG class over an A100 published largest first counts the 7g placement "
        "the first claim gets",
    ),
    pytest.param(
        t.pool_observation("a100", [ANY]),
        a100_layout(largest_first=True),
        [("n1", "mig-4g-0")],
        (1,),
        id="beside an allocated 4g placement, first fit gives the 3g placement after it",
    ),
    pytest.param(
        t.pool_observation("a100", [ANY]),
        a100_layout(),
        [],
        (7,),
        id="a generic MIG class over every A100 placement counts the seven that fit",
    ),
    pytest.param(
        t.pool_observation("a100", [ANY]),
        a100_layout(multiprocessors=False),
        [],
        (7,),
        id="the seven that fit are counted with memory slice counters alone",
    ),
    pytest.param(
        t.pool_observation("a100", [ANY]),
        a100_layout(),
        [("n1", "mig-3g-0")],
        (3,),
        id="the placements that fit beside an allocated one are counted together",
    ),
]


@pytest.mark.parametrize(("pool", "slice_", "allocated", "vector"), PARTITION_CASES)
def test_partitionable_devices(pool, slice_, allocated, vector):
    state = run([*CLASSES_ALL, ANY_PART, pool, t.node("n1"), slice_, t.claim("c", allocated)])
    assert outcome(state)[1] == {vector: 1}


def test_two_kinds_drawing_on_the_same_counters_refuse_the_pool():
    state = run([*CLASSES_ALL, t.pool_observation("a100", [GPU, MIG]), t.node("n1"), PARTITIONED])
    report = state.pool_report("a100")
    assert outcome(state) == (1, None, "False", "KindsShareCounters")
    assert report.condition.message == (
        "device kinds gpu and mig draw on the same shared counter gpu-0-counters/memory "
        "of resource pool n1: their free devices cannot be counted apart"
    )


def test_counter_sets_published_in_a_slice_of_their_own_serve_the_nodes_devices():
    devices = t.resource_slice("n1", [WHOLE, *PARTITIONS], slice_count=2, name="n1-devices")
    counters = t.resource_slice(
        None, [], pool="n1", slice_count=2, name="n1-counters", shared_counters=COUNTERS
    )
    state = run([*CLASSES_ALL, MIG_ONLY, t.node("n1"), devices, counters])
    assert outcome(state)[1] == {(4,): 1}


def test_a_device_of_the_pool_on_another_node_uses_up_the_counters_it_shares():
    # A resource pool spanning two nodes (unusual, but valid): the whole GPU's slice on
    # n2, the partitions' on n1, one counter set; allocating the GPU after n1 was
    # reported must leave n1 no partition.
    whole = t.resource_slice(
        "n2", [WHOLE], pool="shared", slice_count=2, name="n2", shared_counters=COUNTERS
    )
    parts = t.resource_slice("n1", PARTITIONS, pool="shared", slice_count=2, name="n1")
    state = run([*CLASSES_ALL, MIG_ONLY, t.node("n1"), whole, parts])
    assert outcome(state)[1] == {(4,): 1}
    touched = state.apply(CLAIMS, "ADDED", t.claim("c", [("shared", "gpu-0")]))
    assert touched.pools == {"a100"}
    assert outcome(state)[1] == {(0,): 1}


def test_partitions_in_two_slices_count_what_first_fit_gives_in_the_worse_slice_order():
    # kube-scheduler reads a resource pool's slices in no fixed order: the whole GPU's
    # slice may come before its halves' though its name sorts after theirs.
    halves_ = [
        t.device(f"half-{i}", "mig", consumes={"gpu-0-counters": {"memory": "20Gi"}})
        for i in range(2)
    ]
    first = t.resource_slice("n1", halves_, slice_count=2, name="n1-a")
    second = t.resource_slice("n1", [WHOLE], slice_count=2, name="n1-b", shared_counters=COUNTERS)
    pool = t.pool_observation("a100", [ANY])
    state = run([*CLASSES_ALL, ANY_PART, pool, t.node("n1"), first, second])
    assert outcome(state)[1] == {(1,): 1}


def test_a_partition_whose_counter_set_is_not_published_is_not_free():
    bare = t.resource_slice("n1", [WHOLE, *PARTITIONS])
    state = run([*CLASSES_ALL, MIG_ONLY, t.node("n1"), bare])
    assert outcome(state)[1] == {(0,): 1}


def partitionable_nics(node: str | None, pool: str, name: str) -> dict:
    """A second partitionable driver: one NIC halved, its counters in its pool."""
    halves = [
        t.device(f"nic-0-half-{i}", "nic", consumes={"nic-0": {"lanes": "4"}}) for i in range(2)
    ]
    return t.resource_slice(
        node,
        halves,
        driver=t.NIC_DRIVER,
        pool=pool,
        name=name,
        shared_counters={"nic-0": {"lanes": "8"}},
    )


SHARED = "; two DRA drivers publish shared counters in resource pools of one name"
SHARED_POOL_NAME_CASES = [
    pytest.param(
        [PARTITIONED, partitionable_nics("n1", "n1", "n1-nics")],
        ((0,), "SharedPoolNames", "devices not counted: 1 shared pool name" + SHARED),
        id="two partitionable drivers naming their pools alike count neither and warn",
    ),
    pytest.param(
        [
            t.resource_slice("n1", [WHOLE, *PARTITIONS], pool="rack-1", shared_counters=COUNTERS),
            partitionable_nics("n2", "rack-1", "n2-nics"),
        ],
        ((0,), "SharedPoolNames", "devices not counted: 2 shared pool name" + SHARED),
        id="alike-named pools on different nodes collide too: the cache spans nodes",
    ),
    pytest.param(
        [PARTITIONED, nics("n1")],
        ((1,), "Observed", ""),
        id="a plain driver naming its pool alike leaves the partitionable one counted",
    ),
    pytest.param(
        [
            PARTITIONED,
            partitionable_nics("n1", "n1", "n1-nics"),
            deleted(partitionable_nics("n1", "n1", "n1-nics")),
        ],
        ((1,), "Observed", ""),
        id="the other driver's pool gone, the devices count again",
    ),
]


@pytest.mark.parametrize(("slices", "expected"), SHARED_POOL_NAME_CASES)
def test_partitionable_pools_of_two_drivers_sharing_a_name(slices, expected):
    # kube-scheduler v1.35 keys shared counters by pool name alone
    # (kubernetes/kubernetes#140434): what it allocates there is not the hardware's.
    state = run([*CLASSES_ALL, GPU_ONLY, t.node("n1"), t.node("n2"), *slices])
    report = state.pool_report("a100")
    assert report.histogram is not None
    vector, reason, says = expected
    assert dict(report.histogram.buckets).get(vector) and report.condition.reason == reason
    assert says in report.condition.message


def test_another_drivers_alike_named_pool_appearing_touches_the_nodes_it_now_hides():
    shared = t.resource_slice("n1", [WHOLE, *PARTITIONS], pool="rack-1", shared_counters=COUNTERS)
    state = run([*CLASSES_ALL, GPU_ONLY, t.node("n1"), t.node("n2"), shared])
    assert outcome(state)[1] == {(1,): 1, (0,): 1}
    touched = state.apply(SLICES, "ADDED", partitionable_nics("n2", "rack-1", "n2-nics"))
    assert touched.pools == {"a100"}
    assert outcome(state)[1] == {(0,): 2}
    status = pool_status(state.pool_report("a100"), ("gpu",), NOW, None, 1)
    assert warning(None, status) == ("SharedPoolNames", status["conditions"][0]["message"])


# --------------------------------------------------------------------------- coarsening


def hist(**buckets: int) -> Histogram:
    """Buckets written as gpu_nic=nodes, e.g. v8_2=3."""
    return Histogram.of(
        (tuple(int(c) for c in key.removeprefix("v").split("_")), n) for key, n in buckets.items()
    )


COARSEN_CASES = {
    "a histogram within the bound is unchanged": (hist(v8_2=3, v4_1=1), 2, hist(v8_2=3, v4_1=1)),
    "a rare vector rounds down onto the kept vector it dominates that loses least": (
        hist(v8_2=5, v4_1=3, v6_2=1, v2_0=4),
        3,
        hist(v8_2=5, v4_1=4, v2_0=4),
    ),
    "between equally good targets, the lexicographically greatest": (
        hist(v2_1=3, v1_2=3, v3_3=1),
        2,
        hist(v2_1=4, v1_2=3),
    ),
    "a vector dominating no kept one goes to the empty vector, which takes a kept one's place": (
        hist(v8_0=5, v0_2=5, v0_8=4, v4_1=1),
        3,
        hist(v8_0=5, v0_2=9, v0_0=1),
    ),
    "among equally common vectors the least free are kept": (
        hist(v8_2=1, v4_2=1, v0_0=9),
        2,
        hist(v4_2=2, v0_0=9),
    ),
    "every vector beyond the bound moves, in one pass": (
        hist(v8_2=1, v6_2=1, v4_2=1, v2_2=1, v0_0=9),
        2,
        hist(v2_2=4, v0_0=9),
    ),
    "a bound of one leaves the empty vector": (hist(v8_2=3, v4_1=1), 1, hist(v0_0=4)),
}


@pytest.mark.parametrize(
    ("before", "bound", "after"), list(COARSEN_CASES.values()), ids=list(COARSEN_CASES)
)
def test_coarsen(before, bound, after):
    result = coarsen(before, bound)
    assert result == after
    assert result.nodes == before.nodes


def test_a_pool_beyond_512_vectors_is_coarsened_and_says_so():
    # 3 kinds of up to 8 devices give 729 possible vectors; 600 nodes all different.
    classes = [t.device_class(c, "true") for c in ("g", "n", "f")]
    kinds = [("gpu", t.NVIDIA, "g"), ("nic", t.NIC_DRIVER, "n"), ("fpga", "fpga.example", "f")]
    objects: list = [*classes, t.pool_observation("a100", kinds)]
    combos = [(g, n, f) for g in range(9) for n in range(9) for f in range(9)][:600]
    for i, (g, n, f) in enumerate(combos):
        name = f"n{i}"
        objects += [
            t.node(name),
            t.resource_slice(name, [t.device(f"g{j}") for j in range(g)]),
            t.resource_slice(name, [t.device(f"n{j}") for j in range(n)], driver=t.NIC_DRIVER),
            t.resource_slice(name, [t.device(f"f{j}") for j in range(f)], driver="fpga.example"),
        ]
    report = run(objects).pool_report("a100")
    assert report.condition.reason == "HistogramCoarsened"
    assert report.histogram is not None
    assert len(report.histogram.buckets) == 512
    assert report.histogram.nodes == 600
    assert "600 distinct free vectors exceed the bound of 512" in report.condition.message


# --------------------------------------------------------------------------- the wire

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
LATER = datetime(2026, 11, 30, 12, 5, tzinfo=UTC)


def test_the_published_status_is_a_valid_report_for_the_declared_pool():
    state = run(
        [
            *CLASSES_ALL,
            t.pool_observation("a100", [GPU, NIC]),
            t.node("n1"),
            gpus("n1", 8),
            nics("n1", 2),
            t.node("n2"),
            gpus("n2", 8),
            nics("n2", 2),
            held("c", "n1", "gpu-0"),
            t.node("n3", cordoned=True),
        ]
    )
    status = pool_status(state.pool_report("a100"), ("gpu", "nic"), NOW, None, 1)
    declared = DeviceKinds.from_declared([{"name": "gpu", "count": 8}, {"name": "nic", "count": 2}])
    parsed = parse_observation(status, declared)
    assert parsed == Observation(NOW, 3, Histogram((((8, 2), 1), ((7, 2), 1))))
    assert status["nodesByFreeDevices"][0] == {"free": {"gpu": 8, "nic": 2}, "nodes": 1}
    assert status["conditions"][0]["message"] == "2/3 nodes schedulable: 1 cordoned"


def test_an_unobservable_pool_clears_its_histogram_and_reads_as_blind():
    state = run([POOL, t.node("n1"), gpus("n1")])
    status = pool_status(state.pool_report("a100"), ("gpu",), NOW, None, 1)
    assert status["nodesByFreeDevices"] is None
    parsed = parse_observation(
        {k: v for k, v in status.items() if v is not None}, DeviceKinds(("gpu",), (4,))
    )
    assert type(parsed).__name__ == "Blind"
    assert "DeviceClassNotFound" in parsed.message  # type: ignore[union-attr]


def condition_times(first: Mapping, second_state: ClusterState, when: datetime) -> str:
    second = pool_status(second_state.pool_report("a100"), ("gpu",), when, first, 1)
    return second["conditions"][0]["lastTransitionTime"]


def test_observing_keeps_its_transition_time_while_it_holds():
    state = run([*CLASSES_ALL, POOL, t.node("n1"), gpus("n1")])
    first = pool_status(state.pool_report("a100"), ("gpu",), NOW, None, 1)
    state.apply(NODES, "MODIFIED", t.node("n2"))
    assert condition_times(first, state, LATER) == "2026-11-30T12:00:00Z"


def test_observing_takes_the_time_of_its_flip():
    state = run([*CLASSES_ALL, POOL, t.node("n1"), gpus("n1")])
    first = pool_status(state.pool_report("a100"), ("gpu",), NOW, None, 1)
    state.apply(CLASSES, "DELETED", GPU_CLASS)
    assert condition_times(first, state, LATER) == "2026-11-30T12:05:00Z"


vectors = st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4))


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(vectors, st.integers(1, 5), min_size=1, max_size=60), st.integers(1, 20))
def test_coarsening_never_promises_more_nodes_for_any_demand(buckets, bound):
    before = Histogram.of(buckets.items())
    after = coarsen(before, bound)
    assert len(after.buckets) <= max(bound, 1)
    assert after.nodes == before.nodes

    def nodes_fitting(histogram: Histogram, demand: tuple[int, ...]) -> int:
        return sum(
            n for v, n in histogram.buckets if all(c >= d for c, d in zip(v, demand, strict=True))
        )

    for demand in {v for v, _ in before.buckets}:
        assert nodes_fitting(after, demand) <= nodes_fitting(before, demand)


# --------------------------------------------------------------------------- DeviceTaintRules


def rule(name: str = "r", effect: str = "NoSchedule", **names: str) -> dict:
    return t.taint_rule(name, effect, **names)


def unselective(name: str = "r") -> dict:
    """A rule without a deviceSelector at all."""
    obj = t.taint_rule(name)
    del obj["spec"]["deviceSelector"]
    return obj


TWO_NODES = [*CLASSES_ALL, POOL, t.node("n1"), t.node("n2"), gpus("n1"), gpus("n2")]
GPU_0 = {"driver": t.NVIDIA, "pool": "n1", "device": "gpu-0"}

TAINT_RULE_CASES = [
    pytest.param(
        [rule(**GPU_0)],
        {(3,): 1, (4,): 1},
        id="a NoSchedule rule naming a device by driver, pool and name makes it not free",
    ),
    pytest.param(
        [held("c", "n1", "gpu-0"), rule(effect="NoExecute", **GPU_0), deleted(held("c", "n1"))],
        {(3,): 1, (4,): 1},
        id="a device a NoExecute rule names stays not free once its claim is gone",
    ),
    pytest.param(
        [rule(pool="n1")],
        {(0,): 1, (4,): 1},
        id="a rule naming only a resource pool makes every device of it not free",
    ),
    pytest.param(
        [rule(device="gpu-1")],
        {(3,): 2},
        id="a rule naming only a device name takes that name in every resource pool",
    ),
    pytest.param(
        [rule(driver=t.NIC_DRIVER)],
        {(4,): 2},
        id="a rule naming another driver takes nothing",
    ),
    pytest.param(
        [t.taint_rule("r", selector={})],
        {(0,): 2},
        id="a rule with an empty device selector makes every device not free",
    ),
    pytest.param(
        [t.taint_rule("r", selector={"deviceClassName": "mig-1g.nvidia.com", "pool": "n1"})],
        {(0,): 1, (4,): 1},
        id="a rule's DeviceClass (dropped in v1.35) is ignored: it selects by its other fields",
    ),
    pytest.param(
        [t.taint_rule("r", selector={"selectors": [{"cel": {"expression": "false"}}]})],
        {(0,): 2},
        id="a rule's CEL selectors (dropped in v1.35) are ignored: it selects by its other fields",
    ),
    pytest.param(
        [t.taint_rule("r", selector={"driver": 7, "device": "gpu-0"})],
        {(3,): 2},
        id="a selector field that is not a string reads as unset and selects more",
    ),
    pytest.param(
        [rule(effect="None", **GPU_0)],
        {(4,): 2},
        id="a rule of effect None leaves its device free",
    ),
    pytest.param(
        [rule(effect="None", **GPU_0), modified(rule(**GPU_0))],
        {(3,): 1, (4,): 1},
        id="a rule of effect None turning NoSchedule takes its device",
    ),
    pytest.param(
        [rule("a", **GPU_0), rule("b", device="gpu-0"), deleted(rule("b", device="gpu-0"))],
        {(3,): 1, (4,): 1},
        id="of two rules on one device, deleting one leaves it not free",
    ),
    pytest.param(
        [deleted(gpus("n1")), rule(**GPU_0), gpus("n1")],
        {(3,): 1, (4,): 1},
        id="a rule seen before the device's slice takes the device once published",
    ),
]


@pytest.mark.parametrize(("steps", "buckets"), TAINT_RULE_CASES)
def test_device_taint_rules(steps, buckets):
    assert outcome(run([*TWO_NODES, *steps])) == (2, buckets, "True", "Observed")


SHARED_GPU = t.device("gpu-0", shared=True)
ATTACHED_GPU = t.device("gpu-0", binding_conditions=["attached"])
NO_SCHEDULE = {"key": "gpu.nvidia.com/xid", "effect": "NoSchedule"}

# (n1's devices, claims, what n1 has free): kube-scheduler may allocate more than the agent
# counts, on every version, where a device allows multiple allocations or waits on
# binding conditions; the agent says so on the node (the oracle's declared under-counts).
MAY_GIVE_MORE_CASES = [
    pytest.param(
        [SHARED_GPU, t.device("gpu-1")],
        [],
        Uncounted((2,), (SHARED_DEVICES,)),
        "Observed",
        id="a free device allowing multiple allocations counts once and says claims may share it",
    ),
    pytest.param(
        [SHARED_GPU, t.device("gpu-1")],
        [shared(held("c", "n1", "gpu-0"))],
        Uncounted((1,), (SHARED_DEVICES,)),
        "Observed",
        id="one a claim holds a share of counts none and says its capacity may take more",
    ),
    pytest.param(
        [ATTACHED_GPU, t.device("gpu-1")],
        [],
        Uncounted((1,), (BINDING_CONDITIONS,)),
        "Observed",
        id="a free device with binding conditions counts none and says kube-scheduler gives it",
    ),
    pytest.param(
        [ATTACHED_GPU, t.device("gpu-1")],
        [held("c", "n1", "gpu-0")],
        (1,),
        "Observed",
        id="one with binding conditions a claim holds is taken for everyone: nothing to say",
    ),
    pytest.param(
        [t.device("gpu-0", shared=True, taints=[NO_SCHEDULE]), t.device("gpu-1")],
        [],
        (1,),
        "Observed",
        id="a tainted device allowing multiple allocations goes to no claim: nothing to say",
    ),
    pytest.param(
        [SHARED_GPU, t.device("gpu-1")],
        [shared(held("c", "n1", "gpu-0")), held("d", "n1", "gpu-1"), unselective()],
        Uncounted((0,), (f"{UNSELECTIVE_RULE} (r)",)),
        "UnselectiveDeviceTaintRules",
        id="a held one only a rule without deviceSelector withholds names the rule: v1.37 "
        "applies it to nothing and shares the device further",
    ),
]


@pytest.mark.parametrize(("devices", "others", "part", "reason"), MAY_GIVE_MORE_CASES)
def test_devices_kube_scheduler_may_give_beyond_the_count_are_declared(
    devices, others, part, reason
):
    steps = [*CLASSES_ALL, POOL, t.node("n1"), t.resource_slice("n1", devices), *others]
    state = run(steps)
    vector = part.vector if isinstance(part, Uncounted) else part
    assert outcome(state) == (1, {vector: 1}, "True", reason)
    assert state.pool_view.parts["a100"]["n1"] == part


UNSELECTIVE = "DeviceTaintRule without deviceSelector (r)"
VERSIONS_DIFFER = "taints every device for kube-scheduler v1.35 and v1.36 and none for v1.37"

# (steps, buckets, reason, the node parts): kube-scheduler v1.35 and v1.36 apply a rule
# without deviceSelector to every device, v1.37 to none; the agent withholds the devices
# and says which rule it withholds them for, node by node.
UNSELECTIVE_RULE_CASES = [
    pytest.param(
        [unselective()],
        {(0,): 2},
        "UnselectiveDeviceTaintRules",
        {"n1": Uncounted((0,), (UNSELECTIVE,)), "n2": Uncounted((0,), (UNSELECTIVE,))},
        id="a rule without a device selector takes every device and names itself on each node",
    ),
    pytest.param(
        [unselective(), rule("s", pool="n1")],
        {(0,): 2},
        "UnselectiveDeviceTaintRules",
        {"n1": (0,), "n2": Uncounted((0,), (UNSELECTIVE,))},
        id="devices a rule with a selector also takes are withheld on every version, undisputed",
    ),
    pytest.param(
        [held("c", "n1", *[f"gpu-{i}" for i in range(4)]), unselective()],
        {(0,): 2},
        "UnselectiveDeviceTaintRules",
        {"n1": (0,), "n2": Uncounted((0,), (UNSELECTIVE,))},
        id="a node whose devices claims hold loses nothing to the rule and does not name it",
    ),
    pytest.param(
        [t.taint_rule("r", selector={})],
        {(0,): 2},
        "Observed",
        {"n1": (0,), "n2": (0,)},
        id="an empty device selector selects every device on every version, undisputed",
    ),
    pytest.param(
        [unselective(), modified({**unselective(), "spec": {"taint": {"effect": "None"}}})],
        {(4,): 2},
        "Observed",
        {"n1": (4,), "n2": (4,)},
        id="turned to effect None, the rule takes nothing and is named nowhere",
    ),
]


@pytest.mark.parametrize(("steps", "buckets", "reason", "parts"), UNSELECTIVE_RULE_CASES)
def test_a_rule_without_device_selector_is_withheld_and_declared(steps, buckets, reason, parts):
    state = run([*TWO_NODES, *steps])
    assert outcome(state) == (2, buckets, "True", reason)
    assert state.pool_view.parts["a100"] == parts
    message = state.pool_report("a100").condition.message
    assert (VERSIONS_DIFFER in message) == (reason != "Observed")


def test_a_rule_without_device_selector_warns_once_naming_it():
    state = run([*TWO_NODES, unselective()])
    status = pool_status(state.pool_report("a100"), ("gpu",), NOW, None, 2)
    reason, message = warning(None, status) or ("", "")
    assert reason == "UnselectiveDeviceTaintRules"
    assert f"devices not counted: 2 {UNSELECTIVE}; " in message
    assert warning(status, status) is None


@pytest.mark.parametrize(
    ("change", "after"),
    [
        pytest.param(deleted(rule(**GPU_0)), {(4,): 2}, id="deleted, its device is free again"),
        pytest.param(
            modified(rule(effect="None", **GPU_0)),
            {(4,): 2},
            id="turned to effect None, its device is free again",
        ),
        pytest.param(
            modified(rule(driver=t.NVIDIA, pool="n2", device="gpu-0")),
            {(4,): 1, (3,): 1},
            id="re-pointed at another node's device, it frees the first and takes the second",
        ),
    ],
)
def test_a_rule_that_changes_touches_the_nodes_of_both_its_selections(change, after):
    state = run([*TWO_NODES, rule(**GPU_0)])
    assert outcome(state)[1] == {(3,): 1, (4,): 1}
    touched = state.apply(RULES, *change)
    assert touched.pools == {"a100"}
    report = state.pool_report("a100")
    assert report.histogram is not None and dict(report.histogram.buckets) == after
    n1, n2 = (state.pool_view.parts["a100"][n] for n in ("n1", "n2"))
    assert (n1, n2) == ((4,), (4,) if after == {(4,): 2} else (3,))


def test_a_rule_that_selects_no_device_touches_no_pool():
    state = run(TWO_NODES)
    assert not state.apply(RULES, "ADDED", rule(pool="elsewhere"))
    assert not state.apply(RULES, "ADDED", rule("none", effect="None", **GPU_0))


def test_a_rule_taint_the_pool_tolerates_on_nodes_still_takes_the_device():
    # A pool's tolerations are node tolerations for its pods; a device taint is tolerated
    # only by a claim's device tolerations, and modelplane's claims carry none.
    tolerant = t.pool_observation(
        "a100", [GPU], tolerations=[{"key": "example.com/unhealthy", "operator": "Exists"}]
    )
    state = run([*CLASSES_ALL, tolerant, t.node("n1"), gpus("n1"), rule(**GPU_0)])
    assert outcome(state)[1] == {(3,): 1}


def test_a_rule_on_a_device_already_tainted_in_its_slice_takes_it_once():
    state = run([*CLASSES_ALL, POOL, t.node("n1"), tainted("NoSchedule"), rule(**GPU_0)])
    assert outcome(state)[1] == {(3,): 1}


def slice_taint(devices: list[dict], names: set[str]) -> list[dict]:
    taint = {"key": "example.com/unhealthy", "effect": "NoSchedule"}
    return [{**d, "taints": [taint]} if d["name"] in names else d for d in devices]


# (pool, tainted devices, allocated devices, vector): partitions that a rule taints follow
# the counters exactly as a taint in the slice does (`tainted-partitions` in the oracle).
RULED_PARTITION_CASES = [
    pytest.param(
        MIG_ONLY, {"gpu-0-mig-0"}, [], (3,), id="a rule on a partition leaves the other three"
    ),
    pytest.param(
        MIG_ONLY, {"gpu-0"}, [], (4,), id="a rule on the whole GPU leaves its partitions free"
    ),
    pytest.param(GPU_ONLY, {"gpu-0"}, [], (0,), id="a rule on the whole GPU makes it not free"),
    pytest.param(
        GPU_ONLY,
        {"gpu-0-mig-1"},
        [],
        (1,),
        id="a rule on a partition leaves the whole GPU free: a taint consumes no counter",
    ),
    pytest.param(
        MIG_ONLY,
        {"gpu-0-mig-0", "gpu-0-mig-1"},
        [("n1", "gpu-0-mig-2")],
        (1,),
        id="a rule on two partitions beside an allocated one leaves the last",
    ),
]


@pytest.mark.parametrize(("pool", "names", "allocated", "vector"), RULED_PARTITION_CASES)
def test_rules_on_partitionable_devices_count_as_taints_in_the_slice(
    pool, names, allocated, vector
):
    rules = [rule(f"r{i}", driver=t.NVIDIA, pool="n1", device=d) for i, d in enumerate(names)]
    common = [*CLASSES_ALL, pool, t.node("n1"), t.claim("c", allocated)]
    by_rules = run([*common, PARTITIONED, *rules])
    in_slice = dict(PARTITIONED, spec=dict(PARTITIONED["spec"]))
    in_slice["spec"]["devices"] = slice_taint(PARTITIONED["spec"]["devices"], names)
    assert outcome(by_rules)[1] == outcome(run([*common, in_slice]))[1] == {vector: 1}


def split_gpu(apart: bool) -> list[dict]:
    """One 40Gi GPU: four 10Gi partitions and a 20Gi one, in one slice or the 20Gi one in
    a second slice of the same resource pool."""
    small = [
        t.device(f"gpu-0-s{i}", consumes={"gpu-0-counters": {"memory": "10Gi"}}) for i in range(4)
    ]
    large = t.device("gpu-0-l", consumes={"gpu-0-counters": {"memory": "20Gi"}})
    if not apart:
        return [t.resource_slice("n1", [*small, large], shared_counters=COUNTERS)]
    return [
        t.resource_slice("n1", small, shared_counters=COUNTERS, name="n1-a", slice_count=2),
        t.resource_slice("n1", [large], name="n1-b", slice_count=2),
    ]


@pytest.mark.parametrize(
    ("apart", "part"),
    [
        pytest.param(
            True,
            Uncounted((3,), (SLICE_ORDER,)),
            id="partitions over two slices count the worst order's first fit and say the "
            "order may give more",
        ),
        pytest.param(False, (4,), id="partitions in one slice have one order: nothing to say"),
    ],
)
def test_partitions_whose_count_depends_on_slice_order_are_declared(apart, part):
    pool = t.pool_observation("a100", [ANY])
    state = run([*CLASSES_ALL, ANY_PART, pool, t.node("n1"), *split_gpu(apart)])
    message = state.pool_report("a100").condition.message
    assert state.pool_view.parts["a100"]["n1"] == part
    assert (SLICE_ORDER in message) is apart


NETWORK = "network-attached devices"


def fabric(reach: Mapping, *devices: dict, name: str = "fabric", **fields) -> dict:
    """A network-attached slice of `devices` in a resource pool of its own, serving the
    nodes `reach` says ({"allNodes": True}, {"nodeSelector": ...}, or
    {"perDeviceNodeSelection": True} with each device saying)."""
    obj = t.resource_slice(None, devices, name=name, pool=name, **fields)
    del obj["spec"]["allNodes"]
    obj["spec"].update(reach)
    return obj


def selector(*terms: dict) -> dict:
    return {"nodeSelector": {"nodeSelectorTerms": list(terms)}}


def names(operator: str, *nodes: str) -> dict:
    return {"matchFields": [{"key": "metadata.name", "operator": operator, "values": list(nodes)}]}


def label(key: str, operator: str, *values: str) -> dict:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


def for_node(device: dict, **reach) -> dict:
    """`device` serving the nodes `reach` names (in a slice with perDeviceNodeSelection)."""
    return {**device, **reach}


ALL_NODES = {"allNodes": True}
PER_DEVICE = {"perDeviceNodeSelection": True}
BOTH_DECLARE = {"n1": Uncounted((4,), (NETWORK,)), "n2": Uncounted((4,), (NETWORK,))}
ONLY_N1 = {"n1": Uncounted((4,), (NETWORK,)), "n2": (4,)}

# (steps after TWO_NODES, the node parts, the condition's reason): a network-attached
# device serves many nodes, so it counts on none, and every node a free one of the pool's
# kinds serves declares that a claim there may get more (kube-scheduler offers it there).
NETWORK_CASES = [
    pytest.param(
        [fabric(ALL_NODES, t.device("f0"))],
        BOTH_DECLARE,
        "NetworkAttachedDevices",
        id="a device for all nodes counts on none and every node declares it",
    ),
    pytest.param(
        [fabric(selector(names("In", "n1")), t.device("f0"))],
        ONLY_N1,
        "NetworkAttachedDevices",
        id="a node selector on names declares it on the nodes it matches only",
    ),
    pytest.param(
        [fabric(selector(label("kubernetes.io/hostname", "NotIn", "n2")), t.device("f0"))],
        ONLY_N1,
        "NetworkAttachedDevices",
        id="a node selector on labels declares it on the nodes it matches only",
    ),
    pytest.param(
        [fabric(selector(label("zone", "Exists"), names("In", "n1")), t.device("f0"))],
        ONLY_N1,
        "NetworkAttachedDevices",
        id="a node selector matches when any of its terms does",
    ),
    pytest.param(
        [fabric(selector({}), t.device("f0"))],
        {"n1": (4,), "n2": (4,)},
        "Observed",
        id="an empty node selector term matches no node",
    ),
    pytest.param(
        [
            fabric(
                PER_DEVICE,
                for_node(t.device("f0"), nodeName="n3"),
                for_node(t.device("f1"), **selector(names("In", "n1"))),
            )
        ],
        ONLY_N1,
        "NetworkAttachedDevices",
        id="each device of a per-device slice serves the nodes it names",
    ),
    pytest.param(
        [fabric(ALL_NODES, t.device("f0", "vf"))],
        {"n1": (4,), "n2": (4,)},
        "Observed",
        id="a network device of no kind of the pool is not declared",
    ),
    pytest.param(
        [fabric(ALL_NODES, t.device("f0")), held("c", "fabric", "f0")],
        {"n1": (4,), "n2": (4,)},
        "Observed",
        id="a network device a claim holds is not declared",
    ),
    pytest.param(
        [fabric(ALL_NODES, t.device("f0")), held("c", "fabric", "f0"), deleted(held("c", "x"))],
        BOTH_DECLARE,
        "NetworkAttachedDevices",
        id="a network device its claim releases is declared again on every node",
    ),
    pytest.param(
        [fabric(ALL_NODES, t.device("f0", taints=[{"key": "k", "effect": "NoSchedule"}]))],
        {"n1": (4,), "n2": (4,)},
        "Observed",
        id="a network device tainted in its slice is not declared",
    ),
    pytest.param(
        [fabric(ALL_NODES, t.device("f0")), rule(driver=t.NVIDIA, pool="fabric")],
        {"n1": (4,), "n2": (4,)},
        "Observed",
        id="a network device a rule with a selector withholds is not declared",
    ),
    pytest.param(
        [fabric(ALL_NODES, t.device("f0"), slice_count=2)],
        {"n1": (4,), "n2": (4,)},
        "Observed",
        id="a network device of an incomplete resource pool is not declared",
    ),
    pytest.param(
        [fabric(ALL_NODES, t.device("f0")), deleted(fabric(ALL_NODES))],
        {"n1": (4,), "n2": (4,)},
        "Observed",
        id="a network slice deleted is declared nowhere any more",
    ),
    pytest.param(
        [
            fabric(selector(label("zone", "In", "a")), t.device("f0")),
            t.node("n1", extra_labels={"zone": "a"}),
        ],
        ONLY_N1,
        "NetworkAttachedDevices",
        id="a node relabelled into a selector declares it from then on",
    ),
    pytest.param(
        [
            t.node("n1", extra_labels={"zone": "a"}),
            fabric(selector(label("zone", "In", "a")), t.device("f0")),
            modified(t.node("n1")),
        ],
        {"n1": (4,), "n2": (4,)},
        "Observed",
        id="a node relabelled out of a selector declares it no more",
    ),
]


@pytest.mark.parametrize(("steps", "parts", "reason"), NETWORK_CASES)
def test_network_attached_devices_count_on_no_node_and_are_declared(steps, parts, reason):
    state = run([*TWO_NODES, *steps])
    assert outcome(state) == (2, {(4,): 2}, "True", reason)
    assert state.pool_view.parts["a100"] == parts


DECLARED_POOL = t.pool_observation("a100", [GPU], declared=DECLARED_550)
DECLARED_NODES = [
    *CLASSES_ALL,
    UNGUARDED_CLASS,
    t.node("n1"),
    t.node("n2"),
    versions("n1", *["550.54.15"] * 4),
    versions("n2", *["550.54.15"] * 4),
]
LACKING = (
    "a device lacks a declared entry of device kind gpu (attribute driverVersion): "
    "kube-scheduler may fail the node for a claim selecting on it"
)
UNGUARDED_FAILS = (
    "device kind gpu: DeviceClass unguarded fails on a device (no such member in mapping: "
    "'type'): kube-scheduler may fail the node"
)
NIC_FABRIC = fabric(ALL_NODES, t.device("f0", "nic"), driver=t.NIC_DRIVER)

# (the pool, steps after DECLARED_NODES, the node parts): kube-scheduler runs a claim's
# class and selectors on the network-attached devices serving a node as on its own, so
# one of a kind lacking a declared entry, or failing the kind's class, fails the node's
# Filter there: the kind counts none on the nodes it serves, and says why.
NETWORK_FAILURE_CASES = [
    pytest.param(
        DECLARED_POOL,
        [fabric(selector(names("In", "n1")), t.device("f0"))],
        {"n1": Uncounted((0,), (NETWORK, LACKING)), "n2": (4,)},
        id="a network device serving a node, lacking a declared entry, leaves its kind none there",
    ),
    pytest.param(
        DECLARED_POOL,
        [fabric(selector(names("In", "n3")), t.device("f0"))],
        {"n1": (4,), "n2": (4,)},
        id="a network device lacking a declared entry serving no member changes nothing",
    ),
    pytest.param(
        DECLARED_POOL,
        [fabric(ALL_NODES, t.device("f0", "mig"))],
        {"n1": (4,), "n2": (4,)},
        id="a network device of another class lacking a declared entry changes nothing",
    ),
    pytest.param(
        DECLARED_POOL,
        [fabric(ALL_NODES, t.device("f0")), held("c", "fabric", "f0")],
        {"n1": (4,), "n2": (4,)},
        id="a network device lacking a declared entry that a claim holds changes nothing",
    ),
    pytest.param(
        DECLARED_POOL,
        [fabric(ALL_NODES, t.device("f0", taints=[{"key": "k", "effect": "NoSchedule"}]))],
        {"n1": Uncounted((0,), (LACKING,)), "n2": Uncounted((0,), (LACKING,))},
        id="a tainted network device lacking a declared entry still leaves its kind none",
    ),
    pytest.param(
        t.pool_observation("a100", [UNGUARDED]),
        [NIC_FABRIC],
        {
            "n1": Uncounted((0,), (NETWORK, UNGUARDED_FAILS)),
            "n2": Uncounted((0,), (NETWORK, UNGUARDED_FAILS)),
        },
        id="a class failing on a network device serving a node leaves its kind none there",
    ),
]


@pytest.mark.parametrize(("pool", "steps", "parts"), NETWORK_FAILURE_CASES)
def test_network_devices_serving_a_node_fail_a_kind_there_as_its_own_do(pool, steps, parts):
    state = run([*DECLARED_NODES, pool, *steps])
    assert state.pool_report("a100").condition.status == "True"
    assert state.pool_view.parts["a100"] == parts


def test_network_attached_devices_are_named_in_the_message_without_a_warning():
    state = run([*TWO_NODES, fabric(ALL_NODES, t.device("f0"))])
    message = state.pool_report("a100").condition.message
    assert message == (
        "2/2 nodes schedulable; devices not counted: 2 network-attached devices; free "
        "network-attached devices (ResourceSlices without nodeName) serve some nodes, which "
        "the agent counts on none: a claim there may get more"
    )
    status = pool_status(state.pool_report("a100"), ("gpu",), NOW, None, 2)
    assert warning(None, status) is None


def test_a_network_device_only_a_rule_without_selector_withholds_is_declared_with_the_rule():
    state = run([*TWO_NODES, fabric(ALL_NODES, t.device("f0")), unselective()])
    assert outcome(state) == (2, {(0,): 2}, "True", "UnselectiveDeviceTaintRules")
    assert state.pool_view.parts["a100"]["n1"] == Uncounted((0,), (UNSELECTIVE, NETWORK))


@pytest.mark.parametrize(
    ("before", "after", "parts"),
    [
        pytest.param(
            {"zone": "a"}, {}, (4,), id="relabelled out of a network selector, it declares no more"
        ),
        pytest.param(
            {}, {"zone": "a"}, Uncounted((4,), (NETWORK,)), id="relabelled into one, it declares"
        ),
    ],
)
def test_a_node_relabelled_after_a_report_is_judged_afresh_against_network_selectors(
    before, after, parts
):
    state = run(
        [
            *TWO_NODES,
            t.node("n1", extra_labels=before),
            fabric(selector(label("zone", "In", "a")), t.device("f0")),
        ]
    )
    state.pool_report("a100")
    state.apply(NODES, "MODIFIED", t.node("n1", extra_labels=after))
    state.pool_report("a100")
    assert state.pool_view.parts["a100"]["n1"] == parts


# (steps after TWO_NODES, the buckets, the node parts, the reason): a device whose own
# nodeName pins it to one node (perDeviceNodeSelection) serves that node alone, so it
# counts there exactly like the node's own devices.
PINNED_CASES = [
    pytest.param(
        [fabric(PER_DEVICE, for_node(t.device("f0"), nodeName="n2"))],
        {(4,): 1, (5,): 1},
        {"n1": (4,), "n2": (5,)},
        "Observed",
        id="a device pinned to a node by its own node name counts on that node",
    ),
    pytest.param(
        [fabric(PER_DEVICE, for_node(t.device("f0"), nodeName="n2")), held("c", "fabric", "f0")],
        {(4,): 2},
        {"n1": (4,), "n2": (4,)},
        "Observed",
        id="a pinned device a claim holds is taken",
    ),
    pytest.param(
        [
            fabric(
                PER_DEVICE,
                for_node(t.device("f0"), nodeName="n2"),
                for_node(t.device("f1"), allNodes=True),
            )
        ],
        {(4,): 1, (5,): 1},
        {"n1": Uncounted((4,), (NETWORK,)), "n2": Uncounted((5,), (NETWORK,))},
        "NetworkAttachedDevices",
        id="beside a pinned device, one of the same slice for every node is declared",
    ),
    pytest.param(
        [fabric(PER_DEVICE, for_node(t.device("f0"), nodeName="n2"), slice_count=2)],
        {(4,): 2},
        {"n1": (4,), "n2": Uncounted((4,), ("incomplete resource pool",))},
        "Observed",
        id="a pinned device of an incomplete resource pool is not counted, and says why",
    ),
    pytest.param(
        [
            fabric(
                PER_DEVICE,
                for_node(t.device("f0", consumes={"s": {"m": "1"}}), nodeName="n2"),
                shared_counters={"s": {"m": "1"}},
            )
        ],
        {(4,): 2},
        {"n1": (4,), "n2": Uncounted((4,), (NETWORK,))},
        "NetworkAttachedDevices",
        id="a pinned device drawing on shared counters stays network-attached, declared",
    ),
]


@pytest.mark.parametrize(("steps", "buckets", "parts", "reason"), PINNED_CASES)
def test_devices_pinned_to_a_node_count_there(steps, buckets, parts, reason):
    state = run([*TWO_NODES, *steps])
    assert outcome(state) == (2, buckets, "True", reason)
    assert state.pool_view.parts["a100"] == parts


def test_a_pinned_device_counts_under_the_nodes_room_cap_as_its_own_do():
    roomy = {"cpu": "64", "memory": "512Gi", "pods": "5"}
    state = run(
        [
            *CLASSES_ALL,
            POOL,
            t.node("n1", allocatable=roomy),
            fabric(PER_DEVICE, *(for_node(t.device(f"f{i}"), nodeName="n1") for i in range(5))),
        ]
    )
    assert outcome(state) == (1, {(5,): 1}, "True", "Observed")
    state.apply(PODS, "ADDED", t.pod("p", node_name="n1"))
    assert outcome(state) == (1, {(4,): 1}, "True", "Observed")
