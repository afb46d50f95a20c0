"""Two DRA rules of the agent against the real kube-scheduler: pods placed one after
another on a node, as the fleet places them, get exactly what the agent reports free.

- Declared devices: the fleet judges a member's request selectors on the kind's
  declared attributes; a node mid driver rollout has two devices as declared
  (driverVersion 550.54.15) and two older (535.161.8). The agent reports the two,
  and pods whose claims select `isGreaterThan(semver("550.0.0"))` bind twice, then
  no more.
- First fit: a GPU published whole first, then its halves, under one class. The
  agent reports what kube-scheduler's first fit gives one-device claims: the first
  pod takes the whole GPU, the second binds nowhere.

The truth is kube-scheduler's binding; nothing here counts devices
(design/observation.md, "The agent's rules, precisely").
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import pytest
import yaml
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig
from modelplane_common.inputs import find_condition
from modelplane_devtools.processes import free_port
from modelplane_e2e import kube
from modelplane_testkit.oracle import (
    NOT_SERVED,
    CustomResourceDefinition,
    DeviceClass,
    Namespace,
    Pod,
    PoolObservation,
    ResourceClaim,
    ServiceAccount,
    claim_manifest,
    pinned_pod,
    publish_slices,
    ready_node,
    verdict,
)

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e

DRIVER = "gpu.example.com"
POOL_LABEL = "modelplane.ai/pool"
CLASS = "gpu.example.com"
NEWER = f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("550.0.0"))'

eventually = partial(kube.eventually, timeout=60, every=0.5, not_yet=NOT_SERVED)


def pool_node(client: Client, name: str, pool: str) -> str:
    """A Ready, untainted node of `pool`; its uid."""
    return ready_node(client, name, {POOL_LABEL: pool})


def publish(client: Client, node: str, uid: str, slices: list[dict]) -> None:
    """The node's resource pool, one slice per spec of `slices`."""
    pool = {"name": node, "generation": 1, "resourceSliceCount": len(slices)}
    publish_slices(
        client,
        node,
        uid,
        (
            {
                "metadata": {"name": f"{node}-{i}"},
                "spec": {"driver": DRIVER, "pool": pool, "nodeName": node, **spec},
            }
            for i, spec in enumerate(slices)
        ),
    )


def pool_observation(name: str, declared: dict | None = None) -> dict:
    kind = {"name": "gpu", "driver": DRIVER, "deviceClassName": CLASS, **(declared or {})}
    spec = {"poolName": name, "nodeSelector": {"matchLabels": {POOL_LABEL: name}}}
    return {"metadata": {"name": name}, "spec": {**spec, "devices": [kind]}}


def free_gpus(client: Client, pool: str) -> dict[int, int] | None:
    """The pool's published report, {free gpus: nodes}; None before the first."""
    status = client.get(PoolObservation, pool).get("status") or {}
    if "nodesByFreeDevices" not in status:
        return None
    return {b["free"]["gpu"]: b["nodes"] for b in status["nodesByFreeDevices"]}


def reports(client: Client, pool: str, expected: dict[int, int]) -> bool:
    """The pool's report is `expected`; else AssertionError saying what it is."""
    seen = free_gpus(client, pool)
    assert seen == expected, f"the agent reports {seen}"
    return True


def place_one_after_another(client: Client, node: str, selectors: list[str], pods: int) -> list:
    """`pods` pods pinned to `node`, each claiming one device of the class (with
    `selectors`), each created once the one before is decided: their verdicts."""
    verdicts = []
    for i in range(pods):
        name = f"{node}-p{i}"
        exactly = {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1}
        if selectors:
            exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
        request = {"name": "gpu", "exactly": exactly}
        client.create(ResourceClaim(claim_manifest(name, "probes", [request], {})))
        client.create(Pod(pinned_pod(name, "probes", node, name, {})))

        def decided(name: str = name) -> bool:
            return verdict(client.get(Pod, name, namespace="probes")) is not None

        eventually(decided, f"kube-scheduler decides {name}")
        verdicts.append(verdict(client.get(Pod, name, namespace="probes"))[0])
    return verdicts


def test_pods_placed_one_after_another_get_what_the_agent_reports(cluster):
    client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="dra-rules-test")
    for path in sorted((ROOT / "deploy" / "agent" / "crds").glob("*.yaml")):
        client.create(CustomResourceDefinition(yaml.safe_load(path.read_text())))
    eventually(
        lambda: all(
            find_condition(crd, "Established").get("status") == "True"
            for crd in client.list(CustomResourceDefinition)
        ),
        "the agent CRDs are served",
    )
    client.create(Namespace({"metadata": {"name": "probes"}}))
    eventually(
        lambda: bool(client.get(ServiceAccount, "default", namespace="probes")), "ServiceAccount"
    )
    guarded = f'device.driver == "{DRIVER}"'
    client.create(
        DeviceClass(
            {"metadata": {"name": CLASS}, "spec": {"selectors": [{"cel": {"expression": guarded}}]}}
        )
    )

    declared = {"attributes": {"driverVersion": {"version": "550.54.15"}}}
    client.create(PoolObservation(pool_observation("rollout", declared)))
    uid = pool_node(client, "r1", "rollout")
    versions = ["550.54.15", "535.161.8", "550.54.15", "535.161.8"]
    devices = [
        {"name": f"gpu-{i}", "attributes": {"driverVersion": {"version": v}}}
        for i, v in enumerate(versions)
    ]
    publish(client, "r1", uid, [{"devices": devices}])

    client.create(PoolObservation(pool_observation("halves")))
    uid = pool_node(client, "h1", "halves")
    consumes = [("whole", "40Gi"), ("half-0", "20Gi"), ("half-1", "20Gi")]
    partitions = [
        {
            "name": name,
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": v}}}],
        }
        for name, v in consumes
    ]
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]
    # v1.35 publishes counter sets in slices of their own.
    publish(client, "h1", uid, [{"devices": partitions}, {"sharedCounters": counters}])

    port = free_port()
    cluster.supervisor.start(
        "modelplane-agent",
        [
            sys.executable,
            "-c",
            "from modelplane_agent.main import cli; cli()",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--listen=127.0.0.1:{port}",
            "--min-interval=0s",
        ],
    )
    eventually(lambda: reports(client, "rollout", {2: 1}), "the rollout node: 2 as declared")
    eventually(lambda: reports(client, "halves", {1: 1}), "the halves node: first fit's 1")

    assert place_one_after_another(client, "r1", [NEWER], 3) == ["bound", "bound", "refused"]
    assert place_one_after_another(client, "h1", [], 2) == ["bound", "refused"]
