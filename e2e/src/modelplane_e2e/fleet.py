"""The workload cluster's hardware: GPU nodes, their devices, what they have free.

GPU nodes are Node objects kwok manages in the kubelets' place
(`modelplane_e2e.kwok`: status, heartbeats and Leases, pods
Running and Ready, deleted pods removed), so the node lifecycle controller
runs as in a real cluster. Their devices are published the way a DRA driver
would: one `resource.k8s.io/v1` ResourceSlice per node and driver, with
DeviceClasses selecting by driver. The real kube-scheduler allocates
ResourceClaims against those slices and binds pods; kwok then runs them.

The agent is the real one (`modelplane_e2e.agent`); `histogram`
and `free_devices` compute, from what the API server holds (published
slices minus allocated claims), what it must report, for the tests to
compare. Gang engines' pods come from the real LeaderWorkerSet controller
(`modelplane_e2e.lws`).
"""

from __future__ import annotations

import base64
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

from modelplane_e2e.kube import Kube, condition, eventually
from modelplane_e2e.kwok import MANAGED as KWOK_MANAGED

POOL_LABEL = "modelplane.ai/pool"


@dataclass(frozen=True)
class DeviceKind:
    name: str  # the pool's device name, the histogram key
    driver: str
    count: int
    attributes: dict
    capacity: dict


@dataclass(frozen=True)
class Pool:
    name: str
    nodes: int
    devices: tuple[DeviceKind, ...]

    def node_names(self) -> list[str]:
        return [f"{self.name}-node-{i}" for i in range(self.nodes)]


# The GPU most suites' pools hold: 8 per node, of 80 GiB each.
H100_80GB = DeviceKind(
    "gpu",
    "gpu.nvidia.com",
    8,
    {"productName": {"string": "NVIDIA-H100-80GB-HBM3"}},
    {"memory": {"value": "80Gi"}},
)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def device_classes(pools: list[Pool]) -> list[dict]:
    drivers = sorted({d.driver for p in pools for d in p.devices})
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": driver},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        }
        for driver in drivers
    ]


def resource_slices(pool: Pool, node: str) -> list[dict]:
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{kind.name}"},
            "spec": {
                "driver": kind.driver,
                "nodeName": node,
                # One pool per node and driver, as a node-local DRA driver publishes.
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": f"{kind.name}-{i}",
                        "attributes": kind.attributes,
                        "capacity": kind.capacity,
                    }
                    for i in range(kind.count)
                ],
            },
        }
        for kind in pool.devices
    ]


def inference_cluster(
    name: str, pools: list[Pool], *, labels: dict, secrets: str, max_age: str
) -> dict:
    """The InferenceCluster that declares these pools, reached through the
    kubeconfig Secret `<name>-kubeconfig` in namespace `secrets`, observed by
    the agent; `max_age` reaches the agent on each PoolObservation."""
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "credentials": {
                "secretRef": {
                    "namespace": secrets,
                    "name": f"{name}-kubeconfig",
                    "key": "kubeconfig",
                }
            },
            "nodePools": [
                {"name": p.name, "nodeCount": p.nodes, "devices": [_declared(k) for k in p.devices]}
                for p in pools
            ],
            "observation": {"mode": "Observed", "maxAge": max_age},
        },
    }


def kubeconfig_secret(cluster: str, secrets: str, workload: Kube) -> dict:
    """The Secret `<cluster>-kubeconfig` in namespace `secrets` that `inference_cluster`
    points at, holding the workload cluster's kubeconfig."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{cluster}-kubeconfig", "namespace": secrets},
        "data": {"kubeconfig": base64.b64encode(workload.kubeconfig.read_bytes()).decode()},
    }


def remove_deployments_then_cluster(control: Kube, cluster: str, *namespaces: str) -> None:
    """Every ModelDeployment in `namespaces`, then, once their ModelReplicas are gone, the
    InferenceCluster `cluster`: a later module's deployment that selects every cluster
    must not find this one."""
    for namespace in namespaces:
        control.kubectl(
            "delete", "modeldeployments.modelplane.ai", "--all", "-n", namespace, "--wait=false"
        )
    eventually(
        lambda: not any(control.list("modelreplicas.modelplane.ai", n) for n in namespaces),
        f"the ModelReplicas in {', '.join(namespaces)} gone",
        timeout=180,
    )
    control.delete("inferencecluster", cluster)
    eventually(
        lambda: control.get("inferencecluster", cluster) is None,
        f"InferenceCluster {cluster} gone",
        timeout=180,
    )


def _declared(kind: DeviceKind) -> dict:
    """A device kind as a pool declares it; attributes and capacity are qualified by driver."""
    return {
        "name": kind.name,
        "driver": kind.driver,
        "deviceClassName": kind.driver,
        "count": kind.count,
        "attributes": {f"{kind.driver}/{k}": v for k, v in kind.attributes.items()},
        "capacity": {f"{kind.driver}/{k}": v for k, v in kind.capacity.items()},
    }


def add_nodes(kube: Kube, pools: list[Pool]) -> None:
    """Nodes labelled into pools and given to kwok, with their devices published.

    kwok (`modelplane_e2e.kwok`) writes their status and renews their
    Leases; the node lifecycle controller then lifts the `not-ready` taint the
    API server's TaintNodesByCondition admission put on each at creation
    (`await_ready` waits for both).
    """
    kube.apply(device_classes(pools))
    for pool in pools:
        for node in pool.node_names():
            kube.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": node,
                        "labels": {"kubernetes.io/hostname": node, POOL_LABEL: pool.name},
                        "annotations": {KWOK_MANAGED: "fake"},
                    },
                }
            )
            kube.apply(resource_slices(pool, node))


def _ready_and_untainted(kube: Kube, name: str) -> bool:
    node = kube.get("node", name)
    ready = condition(node, "Ready")
    assert ready and ready["status"] == "True", f"Ready: {ready}"
    taints = (node or {}).get("spec", {}).get("taints") or []
    assert not taints, f"taints: {taints}"
    # Without a renewed Lease the node lifecycle controller marks the node
    # NotReady after its grace period, and every pod on it not ready.
    lease = kube.get("leases.coordination.k8s.io", name, "kube-node-lease")
    assert lease and lease["spec"].get("renewTime"), f"Lease kube-node-lease/{name}: {lease}"
    return True


def await_ready(kube: Kube, pools: list[Pool], timeout: float = 120) -> None:
    """Every node of the pools Ready and heartbeating through its Lease (kwok), and
    untainted (the node lifecycle controller)."""
    for pool in pools:
        for node in pool.node_names():
            eventually(
                partial(_ready_and_untainted, kube, node),
                f"node {node} Ready and untainted",
                timeout=timeout,
            )


def write_ready_without_kubelet(kube: Kube, pools: list[Pool]) -> None:
    """For a cluster with neither kwok nor the node lifecycle controller (the agent's
    live tests, whose node conditions are test inputs): write each node Ready, with
    capacity, and lift the `not-ready` taint nothing else would."""
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "written by the test: no kubelet runs",
        "lastHeartbeatTime": _now(),
        "lastTransitionTime": _now(),
    }
    for pool in pools:
        for node in pool.node_names():
            status = {"capacity": resources, "allocatable": resources, "conditions": [ready]}
            kube.patch("node", node, {"status": status}, subresource="status")
            kube.patch("node", node, {"spec": {"taints": None}})


def free_devices(kube: Kube, pool: Pool) -> dict[str, dict[str, int]]:
    """Per node of the pool, free devices per device name: published minus allocated."""
    taken: Counter[tuple[str, str]] = Counter()  # (driver, node pool) -> allocated devices
    for claim in kube.list("resourceclaims.resource.k8s.io"):
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            taken[(result["driver"], result["pool"])] += 1
    published: Counter[tuple[str, str]] = Counter()
    for slice_ in kube.list("resourceslices.resource.k8s.io"):
        spec = slice_["spec"]
        published[(spec["driver"], spec["pool"]["name"])] += len(spec.get("devices") or [])
    return {
        node: {
            kind.name: published[(kind.driver, node)] - taken[(kind.driver, node)]
            for kind in pool.devices
        }
        for node in pool.node_names()
    }


def histogram(free: dict[str, dict[str, int]], order: list[str]) -> list[dict]:
    """Nodes grouped by their vector of free devices, most free first."""
    vectors = Counter(tuple(by_kind[k] for k in order) for by_kind in free.values())
    return [
        {"free": dict(zip(order, vector, strict=True)), "nodes": nodes}
        for vector, nodes in sorted(vectors.items(), reverse=True)
    ]


def expected_histogram(kube: Kube, pool: Pool) -> list[dict]:
    """The pool's `nodesByFreeDevices` as the agent must report it right now (every node of
    the pool schedulable, as `await_ready` leaves them)."""
    return histogram(free_devices(kube, pool), [k.name for k in pool.devices])
