"""The agent against a real API server while observations are deleted under its writes.

The fresh-machine e2e failure of issue 18: a cleanup deleted observations while
the publisher was writing; the pass then computed a status for one that was
gone and the publisher died, so an observation created afterwards never got a
status. Here 300 ReplicaObservations exist before the agent starts, so its
first pass writes 301 statuses in a row; as soon as the first one lands, the
last 150 (from the end, ahead of the pass) and the PoolObservation are
deleted, and a new PoolObservation must then get its status, the agent
staying alive and logging no traceback.
"""

from __future__ import annotations

import signal
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.generic_resource import create_global_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace  # the live test holds the generic one
from modelplane_agent.kube import _resource
from modelplane_agent.state import POOLS, REPLICAS

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e

CRD = create_global_resource(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions"
)
PoolObservation, ReplicaObservation = _resource(POOLS), _resource(REPLICAS)
REPLICA_COUNT = 300


def eventually(check: Callable[[], bool], what: str, seconds: float = 45) -> None:
    deadline = time.monotonic() + seconds
    last: object = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as error:  # a CRD just created answers 429 while its storage starts
            last = error
        time.sleep(0.1)
    pytest.fail(f"{what}: never held; last error: {last}")


def pool(name: str):
    return PoolObservation(
        {
            "metadata": {"name": name},
            "spec": {
                "poolName": name,
                "nodeSelector": {"matchLabels": {"modelplane.ai/pool": name}},
                "devices": [{"name": "gpu", "driver": "gpu.example.com", "deviceClassName": "x"}],
            },
        }
    )


def replica(index: int):
    name = f"r-{index:03d}"
    return ReplicaObservation(
        {
            "metadata": {
                "name": name,
                "namespace": "team",
            },
            "spec": {
                "selector": {
                    "matchLabels": {
                        "modelplane.ai/replica": name,
                        "modelplane.ai/replica-namespace": "team",
                    }
                }
            },
        }
    )


def has_status(client: Client, res, name: str, namespace: str | None = None) -> bool:
    try:
        return bool(client.get(res, name, namespace=namespace).get("status"))
    except Exception:  # not created yet
        return False


def test_observations_deleted_during_a_write_pass_leave_the_publisher_alive(cluster):
    client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="agent-faults-test")
    for path in sorted((ROOT / "apis" / "agent").glob("*.yaml")):
        client.create(CRD(yaml.safe_load(path.read_text())))
    eventually(lambda: list(client.list(PoolObservation)) == [], "the agent CRDs are served")
    client.create(Namespace(metadata=ObjectMeta(name="team")))
    client.create(pool("a"))
    for index in range(REPLICA_COUNT):
        client.create(replica(index))

    port = cluster.free_port()
    process = cluster.start(
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
    eventually(lambda: has_status(client, PoolObservation, "a"), "the first status is written")
    for index in reversed(range(REPLICA_COUNT // 2, REPLICA_COUNT)):  # ahead of the pass
        client.delete(ReplicaObservation, f"r-{index:03d}", namespace="team")
    client.delete(PoolObservation, "a")
    written = len(process.log.read_text().split("status written")) - 1
    client.create(pool("b"))
    eventually(
        lambda: has_status(client, PoolObservation, "b"),
        f"a PoolObservation created after the deletions gets a status (the pass had written "
        f"{written} when they were sent)",
        seconds=30,
    )
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
        assert answer.status == 200
    log = process.log.read_text()
    assert "Traceback" not in log, log[-3000:]
    assert "task publish ended" not in log, log[-3000:]
    process.popen.send_signal(signal.SIGTERM)
    assert process.popen.wait(15) == 0
