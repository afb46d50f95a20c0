"""Builders for admission tests, the property test and the benchmark (test-only).

A queued replica is built as a ModelReplica wire dict (deployment_builders)
and read back through the function's own reader (`read_queued`), so tests
judge exactly what compose-model-replica reads from Crossplane.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from crossplane.function import resource
from modelplane_common.capacity.admission import ADMITTED, OVERCOMMITTED, Queued, read_queued
from modelplane_common.capacity.fleet import Cluster
from modelplane_common.capacity.readers import read_cluster
from modelplane_common.timeutil import format_time

from modelplane_devtools import deployment_builders as t

CLUSTER = "east"


def in_flight(
    name: str,
    placed_at: datetime | str,
    *,
    namespace: str = "team-a",
    gpus: int = 8,
    pool: str = "h100",
    role: str = "Standalone",
    workers: int = 1,
    copies: int = 1,
    verdict: str | None = None,
    pods_scheduled: bool = False,
    scheduled_at: str | None = None,
    cluster: str = CLUSTER,
) -> dict:
    """A ModelReplica on `cluster`; `verdict` records Admitted or Overcommitted for its
    current placement, as compose-model-replica writes it."""
    placed = placed_at if isinstance(placed_at, str) else format_time(placed_at)
    body = t.model_replica(
        name,
        namespace,
        cluster,
        [t.replica_engine("serve", pool, gpus=gpus, role=role, workers=workers, copies=copies)],
        deployment_name=name.rsplit("-", 1)[0],
        pods_scheduled="True" if pods_scheduled else "False",
        reason="AllPodsScheduled" if pods_scheduled else "WaitingForPods",
        scheduled_at=scheduled_at,
        ready=pods_scheduled,
        placed_at=placed,
    )
    for member in body["spec"]["engines"][0]["members"]:
        member["template"] = {"spec": {"containers": [{"name": "serve", "image": "vllm"}]}}
    if verdict in (ADMITTED, OVERCOMMITTED):
        body["status"]["admission"] = {"placedAt": placed, "verdict": verdict}
    return body


def queued(body: dict, cluster: str = CLUSTER) -> Queued:
    return read_queued(resource.dict_to_struct(body), cluster)


def queue(bodies: Sequence[dict], cluster: str = CLUSTER) -> list[Queued]:
    return [queued(b, cluster) for b in bodies]


def fleet_cluster(body: dict) -> Cluster:
    return read_cluster(body)[0]
