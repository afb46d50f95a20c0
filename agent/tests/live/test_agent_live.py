"""The agent against a real API server and the real kube-scheduler.

After every step (a device withheld by a DeviceTaintRule, in the version the
cluster's Kubernetes serves it as, and released; pods bound, a pod
unschedulable, pods deleted, a pod marked for deletion (counted until gone), a
node cordoned, a node tainted, a node added, a node removed) its published
report must be what the step makes it,
where the step decides it, and kube-scheduler must agree with the agent's
per-node view: a pod claiming exactly a node's free GPUs binds there, one
claiming one more does not (`modelplane_testkit.oracle`, the probes of the
oracle test). The truth is kube-scheduler's; nothing here counts devices.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
import yaml
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.types import PatchType
from modelplane_common.inputs import find_condition
from modelplane_devtools.processes import free_port
from modelplane_e2e import kube, kube_versions, manifests
from modelplane_testkit.oracle import (
    DEVICE_TAINT_RULES,
    NOT_SERVED,
    CustomResourceDefinition,
    DeviceClass,
    Namespace,
    Node,
    Oracle,
    Pod,
    PoolObservation,
    ReplicaObservation,
    ServiceAccount,
    converged_view,
    device_taint_rule,
    publish_slices,
    ready_node,
)
from modelplane_testkit.oracle_states import Pool

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e

DRIVER = "gpu.example.com"
POOL_LABEL = "modelplane.ai/pool"
TEMPLATE = create_namespaced_resource(
    "resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates"
)


# Every step here polls every 0.5 s for up to 45 s; an object not served yet is not yet.
eventually = partial(kube.eventually, timeout=45, every=0.5, not_yet=NOT_SERVED)


def node(client: Client, name: str) -> None:
    """A Ready node of pool "a" with four GPUs, published as a driver does."""
    uid = ready_node(client, name, {POOL_LABEL: "a"})
    gpus = {
        "driver": DRIVER,
        "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
        "nodeName": name,
        "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(4)],
    }
    publish_slices(client, name, uid, [{"metadata": {"name": f"{name}-gpus"}, "spec": gpus}])


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
                "spec": manifests.claiming_pod_spec(
                    node_selector={POOL_LABEL: "a"},
                    claim_template=template,
                    container="engine",
                    image="example.invalid/engine:1",
                ),
            }
        )
    )


def template(client: Client, name: str, count: int) -> None:
    client.create(
        TEMPLATE(
            manifests.gpu_claim_template(name, namespace="team", device_class=DRIVER, count=count)
        )
    )


def agent_view(client: Client) -> tuple[int, dict[tuple[int, ...], int]]:
    status = client.get(PoolObservation, "a").get("status") or {}
    return status.get("observedNodes"), {
        (b["free"]["gpu"],): b["nodes"] for b in status.get("nodesByFreeDevices") or []
    }


def reports(client: Client, expected: tuple) -> bool:
    """The pool's report is `expected`; else AssertionError saying what it is."""
    seen = agent_view(client)
    assert seen == expected, f"the agent reports {seen}"
    return True


def replica(client: Client) -> tuple:
    """(pods, scheduledPods, Scheduled's status, reason, message); () until the agent wrote it."""
    status = client.get(ReplicaObservation, "r", namespace="team").get("status") or {}
    scheduled = find_condition({"status": status}, "Scheduled")
    if not scheduled:
        return ()
    return (
        status["pods"],
        status["scheduledPods"],
        scheduled["status"],
        scheduled["reason"],
        (scheduled["message"]),
    )


# The pool as kube-scheduler's probes ask for it: its one device kind, no tolerations.
POOL = Pool("a", [{"name": "gpu", "driver": DRIVER, "deviceClassName": DRIVER}], [], None)


def create_agent_objects(client: Client) -> None:
    """The agent's CRDs, the team's and the probes' namespaces, the device class, and the
    pool "a" and replica team/r the agent reports on."""
    for path in sorted((ROOT / "deploy" / "agent" / "crds").glob("*.yaml")):
        client.create(CustomResourceDefinition(yaml.safe_load(path.read_text())))
    eventually(lambda: list(client.list(PoolObservation)) == [], "the agent CRDs are served")
    for namespace in ("team", "probes"):
        client.create(Namespace({"metadata": {"name": namespace}}))
        eventually(
            lambda ns=namespace: bool(client.get(ServiceAccount, "default", namespace=ns)),
            f"{namespace}'s default ServiceAccount",
        )
    client.create(
        DeviceClass(
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


def start_agent(cluster, port: int):
    """The agent, serving /debug/nodes on `port`, writing as soon as anything changes."""
    return cluster.supervisor.start(
        "modelplane-agent",
        [
            sys.executable,
            "-c",
            "from modelplane_agent.main import cli; cli()",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--listen=127.0.0.1:{port}",
            "--min-interval=0s",
            "--debug-nodes",
        ],
    ).popen


def agreement(client: Client, port: int, oracle: Oracle) -> Callable[..., None]:
    """The check each step ends with (see `agrees`), its probes numbered step by step."""
    steps = iter(range(100))

    def agrees(what: str, expected: tuple | None = None) -> None:
        """The report is `expected` (when the step decides it), and kube-scheduler binds
        exactly what the agent's per-node view says is free, node by node."""
        if expected is not None:
            eventually(lambda: reports(client, expected), what)
        members = [
            n["metadata"]["name"]
            for n in client.list(Node)
            if n["metadata"].get("labels", {}).get(POOL_LABEL) == "a"
        ]
        view, problems = converged_view(client, port, POOL, members)
        assert not problems, f"{what}: {problems}"
        probes = oracle.judge(POOL, view, f"step{next(steps)}")
        oracle.remove(probes, wait=True)
        disagreements = [p.disagreement() for p in probes if p.disagrees]
        assert not disagreements, f"{what}: the agent's view {view}; " + "; ".join(disagreements)
        # The probes are gone: the next step starts from the state this one made, published.
        eventually(
            lambda: converged_view(client, port, POOL, members, 5) == (view, []),
            f"{what}: the report as it was before the probes",
        )

    return agrees


def taint_rule_withholds(client: Client, kube_version: kube_versions.KubeVersion) -> Callable:
    """Create a DeviceTaintRule NoSchedule on n1's gpu-0, in the version `kube_version`
    serves the kind as (checked: the agent must find that one); return its deletion."""
    rules = device_taint_rule(client)
    served = {kind: version for version, kind in DEVICE_TAINT_RULES.items()}[rules]
    assert served == kube_version.device_taint_rules, (
        f"Kubernetes {kube_version.version} serves DeviceTaintRule as {served}, "
        f"expected {kube_version.device_taint_rules}"
    )
    client.create(
        rules(
            {
                "metadata": {"name": "n1-gpu-0-broken"},
                "spec": {
                    "deviceSelector": {"driver": DRIVER, "pool": "n1", "device": "gpu-0"},
                    "taint": {"key": "example.com/broken", "effect": "NoSchedule"},
                },
            }
        )
    )
    return lambda: client.delete(rules, "n1-gpu-0-broken")


def test_kube_scheduler_agrees_with_the_agents_report_after_every_step(cluster, kube_version):
    client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="agent-live-test")
    create_agent_objects(client)
    template(client, "one-gpu", 1)
    template(client, "five-gpus", 5)
    node(client, "n1")
    node(client, "n2")

    port = free_port()
    agent = start_agent(cluster, port)
    oracle = Oracle(client, "probes", {"agent-live.modelplane.ai/probe": "true"})
    agrees = agreement(client, port, oracle)

    agrees("start: two empty nodes", (2, {(4,): 2}))
    eventually(lambda: replica(client)[:4] == (0, 0, "False", "Pending"), "no pod yet")

    delete_rule = taint_rule_withholds(client, kube_version)
    rule = f"a DeviceTaintRule ({kube_version.device_taint_rules}) withholds n1's gpu-0"
    agrees(rule, (2, {(4,): 1, (3,): 1}))
    delete_rule()
    agrees("the rule deleted: gpu-0 free again", (2, {(4,): 2}))

    pod(client, "r-0", "one-gpu")
    pod(client, "r-1", "one-gpu")
    eventually(
        lambda: all(
            client.get(Pod, p, namespace="team")["spec"].get("nodeName") for p in ("r-0", "r-1")
        ),
        "kube-scheduler binds both pods",
    )
    agrees("bind: two devices allocated")
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
    agrees("delete: r-1's claim released", (2, {(4,): 1, (3,): 1}))
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
    agrees("a terminating pod's device is still taken", (2, {(4,): 1, (3,): 1}))
    client.delete(Pod, "r-0", namespace="team", grace_period=0)  # as its kubelet would
    eventually(lambda: replica(client)[:4] == (0, 0, "False", "Pending"), "r-0 gone")
    agrees("r-0's device free once its claim is released", (2, {(4,): 2}))

    client.patch(Node, "n2", {"spec": {"unschedulable": True}}, patch_type=PatchType.MERGE)
    agrees("cordon n2", (2, {(4,): 1}))

    client.patch(
        Node,
        "n1",
        {"spec": {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}},
        patch_type=PatchType.MERGE,
    )
    agrees("taint n1: nothing schedulable", (2, {}))

    node(client, "n3")
    agrees("new node n3", (3, {(4,): 1}))

    client.delete(Node, "n2")
    agrees("node n2 removed", (2, {(4,): 1}))

    agent.send_signal(signal.SIGTERM)
    assert agent.wait(15) == 0
