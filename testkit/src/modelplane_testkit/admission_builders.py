"""Builders for admission tests, the property test and the benchmark (test-only).

A queued replica is built as a ModelReplica wire dict (deployment_builders)
and read back through the function's own reader (`read_queued`), so tests
judge exactly what compose-model-replica reads from Crossplane.

`in_flight`'s optional, keyword-only fields are named once, in the TypedDict
`InFlightFields`, as the other builder modules do theirs (see
`deployment_builders`): plain keywords at call sites, checked by mypy where it
checks the caller and by `fields.reject_unknown` at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypedDict, Unpack

from crossplane.function import resource
from modelplane_common.capacity.admission import ADMITTED, OVERCOMMITTED, Queued, read_queued
from modelplane_common.capacity.fleet import Cluster
from modelplane_common.capacity.readers import read_cluster
from modelplane_common.timeutil import format_time

from modelplane_testkit import deployment_builders as t
from modelplane_testkit.fields import reject_unknown

CLUSTER = "east"


class InFlightFields(TypedDict, total=False):
    namespace: str  # default "team-a"
    gpus: int  # default 8
    pool: str  # default "h100"
    role: str  # default "Standalone"
    workers: int  # default 1
    copies: int  # default 1
    verdict: str | None  # default none recorded
    pods_scheduled: bool  # default False
    scheduled_at: str | None  # default unset
    cluster: str  # default CLUSTER
    # With verdict Admitted: the copies that verdict charged (status.admission.charged),
    # default none recorded (a record written before shapes were recorded).
    charged_copies: int
    grown_at: datetime  # status.admission.grownAt: when a growth past it was seen
    # PodsCreated False with this reason (Orphaned, NotCreated, Creating); default none.
    pods_created: str


def charged(*engines: dict) -> dict:
    """`status.admission.charged` for spec engines, as compose-model-replica writes it: each
    engine's name and copies, each member's role, pool, worker nodes and device requests
    (written out here, not by the function's writer, so a test compares two sources)."""

    def member(m: dict) -> dict:
        wire = {
            "role": m.get("role", "Standalone"),
            "nodePoolName": m["nodePoolName"],
            "deviceRequests": [
                {"name": r["name"], "deviceClassName": r["deviceClassName"], "count": r["count"]}
                for r in m.get("deviceRequests", ())
            ],
        }
        if "worker" in m:
            wire["worker"] = {"nodes": m["worker"]["nodes"]}
        return wire

    return {
        "engines": [
            {"name": e["name"], "copies": e["copies"], "members": [member(m) for m in e["members"]]}
            for e in engines
        ]
    }


def in_flight(name: str, placed_at: datetime | str, **fields: Unpack[InFlightFields]) -> dict:
    """A ModelReplica on `cluster`; `verdict` records Admitted or Overcommitted for its
    current placement, as compose-model-replica writes it."""
    reject_unknown(fields, InFlightFields)
    placed = placed_at if isinstance(placed_at, str) else format_time(placed_at)
    pods_scheduled = fields.get("pods_scheduled", False)
    engine = t.replica_engine(
        "serve",
        fields.get("pool", "h100"),
        gpus=fields.get("gpus", 8),
        role=fields.get("role", "Standalone"),
        workers=fields.get("workers", 1),
        copies=fields.get("copies", 1),
    )
    body = t.model_replica(
        name,
        fields.get("namespace", "team-a"),
        fields.get("cluster", CLUSTER),
        [engine],
        deployment_name=name.rsplit("-", 1)[0],
        pods_scheduled="True" if pods_scheduled else "False",
        reason="AllPodsScheduled" if pods_scheduled else "WaitingForPods",
        scheduled_at=fields.get("scheduled_at"),
        ready=pods_scheduled,
        placed_at=placed,
    )
    for member in body["spec"]["engines"][0]["members"]:
        member["template"] = {"spec": {"containers": [{"name": "serve", "image": "vllm"}]}}
    verdict = fields.get("verdict")
    if verdict in (ADMITTED, OVERCOMMITTED):
        body["status"]["admission"] = {"placedAt": placed, "verdict": verdict}
    record = body["status"].get("admission", {})
    if "charged_copies" in fields:
        record["charged"] = charged({**engine, "copies": fields["charged_copies"]})
    if "grown_at" in fields:
        record["grownAt"] = format_time(fields["grown_at"])
    if "pods_created" in fields:
        body["status"]["conditions"].append(
            {"type": "PodsCreated", "status": "False", "reason": fields["pods_created"]}
        )
    return body


def queued(body: dict, cluster: str = CLUSTER, now: datetime = t.NOW) -> Queued:
    """The replica as admission reads it at `now` (the builders' clock by default)."""
    return read_queued(resource.dict_to_struct(body), cluster, now)


def queue(bodies: Sequence[dict], cluster: str = CLUSTER, now: datetime = t.NOW) -> list[Queued]:
    return [queued(b, cluster, now) for b in bodies]


def fleet_cluster(body: dict) -> Cluster:
    return read_cluster(body)[0]
