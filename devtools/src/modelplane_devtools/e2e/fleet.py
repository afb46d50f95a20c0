"""The workload cluster's hardware, and stand-ins for what cannot run here.

No kubelet runs: GPU nodes are Node objects whose status the harness writes
once (Ready, with CPU, memory and pod capacity) and which nothing else
touches, because the workload cluster's controller manager runs without the
node lifecycle controller. Their devices are published the way a DRA driver
would: one `resource.k8s.io/v1` ResourceSlice per node and driver, with
DeviceClasses selecting by driver. The real kube-scheduler allocates
ResourceClaims against those slices and binds pods; the pods then stay
bound and Pending, which is all PodsScheduled needs.

The agent is the real one (`modelplane_devtools.e2e.agent`); `histogram`
and `free_devices` compute, from what the API server holds (published
slices minus allocated claims), what it must report, for the tests to
compare. Stand-ins keep the places of components that do not run here, each
in one function so the real component can replace it:

- `run_leader_worker_sets` creates the leader and worker pods of each
  LeaderWorkerSet, with the group-key label LWS's webhook would add, because
  LeaderWorkerSet's controller cannot be built here (its module is not
  served by the Go module proxy);
- `release_deleted_pods` removes pods marked for deletion, as their kubelet
  would once it stopped them.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

from modelplane_devtools.e2e.kube import Kube

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
    """Nodes labelled into pools, Ready, with their devices published."""
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
                    },
                }
            )
            resources = {"cpu": "64", "memory": "512Gi", "pods": "110"}
            kube.patch(
                "node",
                node,
                {
                    "status": {
                        "capacity": resources,
                        "allocatable": resources,
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "True",
                                "reason": "E2EHarness",
                                "message": "no kubelet: the e2e harness keeps this Node Ready",
                                "lastHeartbeatTime": _now(),
                                "lastTransitionTime": _now(),
                            }
                        ],
                    }
                },
                subresource="status",
            )
            # The API server's TaintNodesByCondition admission tainted the new
            # node not-ready; the node lifecycle controller that would lift it
            # once Ready does not run here, so the harness lifts it.
            kube.patch("node", node, {"spec": {"taints": None}})
            kube.apply(resource_slices(pool, node))


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
    the pool schedulable, as `add_nodes` leaves them)."""
    return histogram(free_devices(kube, pool), [k.name for k in pool.devices])


# The LeaderWorkerSet API as far as the stand-in needs it: its CRD is ours
# (schemaless beyond the top level), since the real one ships with the
# controller that cannot be built here.
LWS_GROUP = "leaderworkerset.x-k8s.io"
LWS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"leaderworkersets.{LWS_GROUP}"},
    "spec": {
        "group": LWS_GROUP,
        "scope": "Namespaced",
        "names": {
            "kind": "LeaderWorkerSet",
            "listKind": "LeaderWorkerSetList",
            "plural": "leaderworkersets",
            "singular": "leaderworkerset",
            "shortNames": ["lws"],
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}
GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"


def _pod(lws: dict, template: dict, name: str, group: int, worker: int, key: str) -> dict:
    metadata = template.get("metadata") or {}
    labels = {
        **(metadata.get("labels") or {}),
        "leaderworkerset.sigs.k8s.io/name": lws["metadata"]["name"],
        "leaderworkerset.sigs.k8s.io/group-index": str(group),
        "leaderworkerset.sigs.k8s.io/worker-index": str(worker),
        GROUP_KEY: key,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": lws["metadata"]["namespace"],
            "labels": labels,
            "annotations": metadata.get("annotations") or {},
            "ownerReferences": [
                {
                    "apiVersion": f"{LWS_GROUP}/v1",
                    "kind": "LeaderWorkerSet",
                    "name": lws["metadata"]["name"],
                    "uid": lws["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template["spec"],
    }


def run_leader_worker_sets(kube: Kube) -> None:
    """Create the missing leader and worker pods of every LeaderWorkerSet (LWS's stand-in)."""
    for lws in kube.list(f"leaderworkersets.{LWS_GROUP}"):
        spec = lws["spec"]
        template = spec["leaderWorkerTemplate"]
        size = int(template.get("size", 1))
        namespace, name = lws["metadata"]["namespace"], lws["metadata"]["name"]
        existing = {p["metadata"]["name"] for p in kube.list("pods", namespace)}
        for group in range(int(spec.get("replicas", 1))):
            leader = f"{name}-{group}"
            key = hashlib.sha1(f"{namespace}/{leader}".encode()).hexdigest()
            wanted = [(leader, template.get("leaderTemplate") or template["workerTemplate"], 0)]
            wanted += [(f"{leader}-{w}", template["workerTemplate"], w) for w in range(1, size)]
            pods = [
                _pod(lws, pod_template, pod_name, group, worker, key)
                for pod_name, pod_template, worker in wanted
                if pod_name not in existing
            ]
            if pods:
                kube.apply(pods)


def release_deleted_pods(kube: Kube) -> None:
    """Finish deleting pods marked for deletion (the kubelets' stand-in).

    A bound pod is only marked when deleted; its kubelet stops it and
    removes it for good. No kubelet runs here, so the harness does that step.
    """
    for pod in kube.list("pods"):
        if pod["metadata"].get("deletionTimestamp"):
            kube.kubectl(
                "delete", "pod", pod["metadata"]["name"], "-n", pod["metadata"]["namespace"],
                "--grace-period=0", "--force", "--ignore-not-found", "--wait=false",
            )  # fmt: skip


class StandIns:
    """The stand-ins above, run every few seconds in a thread: LWS and the kubelets.

    Errors are kept for the test to show, never swallowed silently. `pools`
    is kept for callers written when the agent was a stand-in too; the real
    agent reports on every PoolObservation of the cluster.
    """

    def __init__(self, kube: Kube, pools: list[Pool], every: float = 2.0) -> None:
        import threading

        self.kube, self.pools, self.every = kube, pools, every
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="e2e-stand-ins", daemon=True)

    def start(self) -> StandIns:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                run_leader_worker_sets(self.kube)
                release_deleted_pods(self.kube)
            except Exception as error:  # kept for the test's failure message
                self.errors = [*self.errors[-9:], f"{type(error).__name__}: {error}"]
