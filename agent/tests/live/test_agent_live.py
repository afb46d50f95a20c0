"""The agent against a real API server and the real kube-scheduler.

Its report must equal the ground truth computed here from what the API
server holds (nodes, slices, the allocations kube-scheduler made) after
every step: pods bound, a pod unschedulable, pods deleted, a pod marked for
deletion (counted until gone), a node cordoned, a node tainted, a node
added, a node removed.
"""

from __future__ import annotations

import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.types import PatchType
from modelplane_agent.kube import _resource
from modelplane_agent.state import CLAIMS, NODES, PODS, POOLS, REPLICAS, SLICES

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e

DRIVER = "gpu.example.com"
POOL_LABEL = "modelplane.ai/pool"
CRD = create_global_resource(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions"
)
NAMESPACE = create_global_resource("", "v1", "Namespace", "namespaces")
SERVICE_ACCOUNT = create_namespaced_resource("", "v1", "ServiceAccount", "serviceaccounts")
CLASS = create_global_resource("resource.k8s.io", "v1", "DeviceClass", "deviceclasses")
TEMPLATE = create_namespaced_resource(
    "resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates"
)
Node, Pod, Slice, Claim = (_resource(k) for k in (NODES, PODS, SLICES, CLAIMS))
PoolObservation, ReplicaObservation = _resource(POOLS), _resource(REPLICAS)


def eventually(check: Callable[[], object], what: str, seconds: float = 45) -> None:
    deadline = time.monotonic() + seconds
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last is True:
                return
        except Exception as error:  # the object may not exist yet
            last = error
        time.sleep(0.5)
    pytest.fail(f"{what}: never held; last seen: {last}")


def node(client: Client, name: str) -> None:
    client.create(
        Node(
            {
                "metadata": {
                    "name": name,
                    "labels": {POOL_LABEL: "a", "kubernetes.io/hostname": name},
                }
            }
        )
    )
    capacity = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    client.patch(
        Node.Status,
        name,
        {
            "status": {
                "capacity": capacity,
                "allocatable": capacity,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "played by the test",
                        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            }
        },
        patch_type=PatchType.MERGE,
    )
    # The API server's TaintNodesByCondition admission taints every new node not-ready;
    # the node lifecycle controller, which would lift it, does not run without kubelets.
    client.patch(Node, name, {"spec": {"taints": None}}, patch_type=PatchType.MERGE)
    uid = client.get(Node, name)["metadata"]["uid"]
    client.create(
        Slice(
            {
                "metadata": {
                    "name": f"{name}-gpus",
                    # As a driver does: the slice goes with its node.
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}
                    ],
                },
                "spec": {
                    "driver": DRIVER,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "nodeName": name,
                    "devices": [
                        {"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(4)
                    ],
                },
            }
        )
    )


def pod(client: Client, name: str, template: str) -> None:
    client.create(
        Pod(
            {
                "metadata": {
                    "name": name,
                    "namespace": "team",
                    "labels": {
                        "modelplane.ai/replica": "r",
                        "modelplane.ai/replica-namespace": "team",
                    },
                },
                "spec": {
                    "nodeSelector": {POOL_LABEL: "a"},
                    "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": template}],
                    "containers": [
                        {
                            "name": "engine",
                            "image": "example.invalid/engine:1",
                            "resources": {"claims": [{"name": "gpus"}]},
                        }
                    ],
                },
            }
        )
    )


def template(client: Client, name: str, count: int) -> None:
    client.create(
        TEMPLATE(
            {
                "metadata": {"name": name, "namespace": "team"},
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": "gpu",
                                    "exactly": {
                                        "deviceClassName": DRIVER,
                                        "allocationMode": "ExactCount",
                                        "count": count,
                                    },
                                }
                            ]
                        }
                    }
                },
            }
        )
    )


def ground_truth(client: Client) -> tuple[int, dict[tuple[int, ...], int]]:
    """observedNodes and the histogram, from the API server's objects alone."""
    members = [
        n for n in client.list(Node) if n["metadata"].get("labels", {}).get(POOL_LABEL) == "a"
    ]
    allocated = {
        (r["driver"], r["pool"], r["device"])
        for c in client.list(Claim, namespace="*")
        for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
            "results", []
        )
    }
    devices: dict[str, set] = {}
    for s in client.list(Slice):
        spec = s["spec"]
        for d in spec.get("devices", []):
            devices.setdefault(spec["nodeName"], set()).add(
                (spec["driver"], spec["pool"]["name"], d["name"])
            )
    histogram: Counter = Counter()
    for n in members:
        spec, status = n.get("spec") or {}, n.get("status") or {}
        ready = any(
            c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", [])
        )
        tainted = any(t["effect"] in ("NoSchedule", "NoExecute") for t in spec.get("taints", []))
        if spec.get("unschedulable") or not ready or tainted:
            continue
        name = n["metadata"]["name"]
        histogram[(len(devices.get(name, set()) - allocated),)] += 1
    return len(members), dict(histogram)


def agent_view(client: Client) -> tuple[int, dict[tuple[int, ...], int]]:
    status = client.get(PoolObservation, "a").get("status") or {}
    return status.get("observedNodes"), {
        (b["free"]["gpu"],): b["nodes"] for b in status.get("nodesByFreeDevices") or []
    }


def replica(client: Client) -> tuple:
    status = client.get(ReplicaObservation, "r", namespace="team").get("status") or {}
    scheduled = next(c for c in status.get("conditions", []) if c["type"] == "Scheduled")
    return (
        status["pods"],
        status["scheduledPods"],
        scheduled["status"],
        scheduled["reason"],
        (scheduled["message"]),
    )


def test_the_agent_reports_the_ground_truth_after_every_step(cluster):
    client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="agent-live-test")
    for path in sorted((ROOT / "deploy" / "agent" / "crds").glob("*.yaml")):
        client.create(CRD(yaml.safe_load(path.read_text())))
    eventually(lambda: list(client.list(PoolObservation)) == [], "the agent CRDs are served")
    client.create(NAMESPACE({"metadata": {"name": "team"}}))
    eventually(lambda: bool(client.get(SERVICE_ACCOUNT, "default", namespace="team")), "team's SA")
    client.create(
        CLASS(
            {
                "metadata": {"name": DRIVER},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
            }
        )
    )
    client.create(
        PoolObservation(
            {
                "metadata": {"name": "a"},
                "spec": {
                    "poolName": "a",
                    "nodeSelector": {"matchLabels": {POOL_LABEL: "a"}},
                    "devices": [{"name": "gpu", "driver": DRIVER, "deviceClassName": DRIVER}],
                },
            }
        )
    )
    client.create(
        ReplicaObservation(
            {
                "metadata": {"name": "r", "namespace": "team"},
                "spec": {
                    "selector": {
                        "matchLabels": {
                            "modelplane.ai/replica": "r",
                            "modelplane.ai/replica-namespace": "team",
                        }
                    }
                },
            }
        )
    )
    template(client, "one-gpu", 1)
    template(client, "five-gpus", 5)
    node(client, "n1")
    node(client, "n2")

    agent = cluster.start(
        "modelplane-agent",
        [
            sys.executable,
            "-c",
            "from modelplane_agent.main import cli; cli()",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--listen=127.0.0.1:{cluster.free_port()}",
            "--min-interval=0s",
        ],
    ).popen

    def matches(expected: tuple | None = None) -> Callable[[], object]:
        def check() -> object:
            truth, seen = ground_truth(client), agent_view(client)
            if expected is not None and truth != expected:
                return f"ground truth {truth} is not the step's expected {expected}"
            return True if seen == truth else f"agent {seen} != ground truth {truth}"

        return check

    eventually(matches((2, {(4,): 2})), "start: two empty nodes")
    eventually(lambda: replica(client)[:4] == (0, 0, "False", "Pending"), "no pod yet")

    pod(client, "r-0", "one-gpu")
    pod(client, "r-1", "one-gpu")
    eventually(
        lambda: all(
            client.get(Pod, p, namespace="team")["spec"].get("nodeName") for p in ("r-0", "r-1")
        ),
        "kube-scheduler binds both pods",
    )
    eventually(matches(), "bind: two devices allocated")
    assert sum(n * (4 - v[0]) for v, n in agent_view(client)[1].items()) == 2
    eventually(lambda: replica(client)[:4] == (2, 2, "True", "AllPodsBound"), "all bound")

    pod(client, "r-big", "five-gpus")
    eventually(
        lambda: (
            replica(client)[2:4] == ("False", "Unschedulable")
            and replica(client)[4].startswith("pod r-big: ")
        ),
        "a pod asking 5 of 4 GPUs is Unschedulable",
    )

    client.delete(Pod, "r-big", namespace="team", grace_period=0)
    client.delete(Pod, "r-1", namespace="team", grace_period=0)
    eventually(matches(), "delete: r-1's claim released")
    eventually(lambda: replica(client)[:4] == (1, 1, "True", "AllPodsBound"), "one pod left")
    eventually(lambda: agent_view(client)[1].get((4,)) == 1, "r-1's device is free again")

    # Deleted with a grace period, a bound pod is only marked (no kubelet stops it here):
    # it still holds its node and device, so it still counts.
    client.delete(Pod, "r-0", namespace="team", grace_period=30)
    eventually(
        lambda: bool(client.get(Pod, "r-0", namespace="team")["metadata"].get("deletionTimestamp")),
        "r-0 marked for deletion",
    )
    time.sleep(3)  # six publisher ticks
    assert replica(client)[:4] == (1, 1, "True", "AllPodsBound")
    eventually(matches((2, {(4,): 1, (3,): 1})), "a terminating pod's device is still taken")
    client.delete(Pod, "r-0", namespace="team", grace_period=0)  # as its kubelet would
    eventually(lambda: replica(client)[:4] == (0, 0, "False", "Pending"), "r-0 gone")
    eventually(matches((2, {(4,): 2})), "r-0's device free once its claim is released")

    client.patch(Node, "n2", {"spec": {"unschedulable": True}}, patch_type=PatchType.MERGE)
    eventually(matches(), "cordon n2")

    client.patch(
        Node,
        "n1",
        {"spec": {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}},
        patch_type=PatchType.MERGE,
    )
    eventually(matches((2, {})), "taint n1: nothing schedulable")

    node(client, "n3")
    eventually(matches((3, {(4,): 1})), "new node n3")

    client.delete(Node, "n2")
    eventually(matches((2, {(4,): 1})), "node n2 removed")

    agent.send_signal(signal.SIGTERM)
    assert agent.wait(15) == 0
