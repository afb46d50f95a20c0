"""A verdict binds the shape it charged, through the real CLI (design/admission.md).

A tenant whose replica runs Admitted under an 8-GPU quota raises `copies` to 64.
compose-model-deployment rewrites the replica in place: 64 copies, the same
placed-at (a growth is no new placement). compose-model-replica must not take
its old verdict for the new shape:

1. On the first pass that sees the growth, the replica records when it saw it
   (its queue time for the growth) and keeps running as it was admitted: the
   Deployment on the workload cluster keeps 1 replica.
2. Judged past its commit delay, the growth is refused with QuotaExceeded naming the
   quota, what the replica holds and what it asks for; it still runs as
   admitted.
3. A growth that fits the quota is admitted, and the workload is composed at
   the new shape.

The replica is rendered with its composed Objects observed and without itself
among the required resources (the CLI then drops the observed ones): it is the
only replica of its namespace and cluster, so its fellows are none.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

from modelplane_common import labels
from modelplane_common.timeutil import format_time
from modelplane_devtools import render
from modelplane_testkit import deployment_builders as t
from modelplane_testkit.rendered import by_kind, composite, condition

DEPLOYMENT = render.ROOT / "apis/modeldeployment/composition.yaml"
REPLICA = render.ROOT / "apis/modelreplica/composition.yaml"
GPU = "gpu.example.com"
NODES = 64


def east() -> dict:
    """east/h100: 64 free 8-GPU nodes, observed ten seconds ago: room is never the limit."""
    cluster = t.cluster(
        "east",
        [t.pool("h100", NODES, histogram=[({"gpu": 8}, NODES)], observed_at="__NOW-10s__")],
    )
    cluster["status"]["providerConfigRef"] = {"name": "east"}
    cluster["status"]["agent"]["present"] = True
    return cluster


def deployment(copies: int) -> dict:
    return t.deployment("llm", "team-a", engines=[t.standalone(gpus=8, copies=copies)])


def as_existing(replica: dict, placed_at: str, status: dict | None = None) -> dict:
    """A composed ModelReplica as the API server holds it (with its deployment's controller
    reference: without it the replica reads orphaned)."""
    body = copy.deepcopy(replica)
    body["metadata"].setdefault("annotations", {})[labels.PLACED_AT] = placed_at
    if status is not None:
        body["status"] = status
    return body


def workload_replicas(rendered: list[dict]) -> int:
    """spec.replicas of the engine's Deployment on the workload cluster."""
    (workload,) = (
        o
        for o in by_kind(rendered, "Object")
        if o["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
        == "east/serve/workload"
    )
    return workload["spec"]["forProvider"]["manifest"]["spec"]["replicas"]


def running_replica(functions, quota: dict) -> tuple[dict, list[dict], str]:
    """The tenant's replica placed at 1 copy a minute ago and admitted: its body with the
    recorded status, its composed Objects, and its placed-at."""
    (placed,) = by_kind(
        functions.render(
            deployment(1), DEPLOYMENT, required=[east(), t.namespace("team-a"), quota]
        ),
        "ModelReplica",
    )
    placed_at = format_time(datetime.now(UTC) - timedelta(seconds=61))
    replica = as_existing(placed, placed_at)
    admitted = functions.render(replica, REPLICA, required=[east(), quota, replica, deployment(1)])
    assert condition(composite(admitted), "Admitted")["reason"] == "Admitted"
    assert workload_replicas(admitted) == 1
    objects = [copy.deepcopy(o) for o in by_kind(admitted, "Object")]
    for obj in objects:  # observed as Crossplane holds them: composed by the replica
        obj["metadata"].pop("ownerReferences", None)
        obj["metadata"]["labels"]["crossplane.io/composite"] = placed["metadata"]["name"]
    return as_existing(placed, placed_at, composite(admitted)["status"]), objects, placed_at


def grow(functions, replica: dict, quota: dict, copies: int) -> dict:
    """The tenant sets `copies`: the replica as compose-model-deployment rewrites it."""
    (rewritten,) = by_kind(
        functions.render(
            deployment(copies),
            DEPLOYMENT,
            observed=[replica],
            required=[east(), t.namespace("team-a"), quota, replica],
        ),
        "ModelReplica",
    )
    return rewritten


def test_a_replica_grown_past_its_quota_keeps_running_as_admitted_and_is_refused(functions):
    quota = t.device_quota({GPU: 8})
    replica, objects, placed_at = running_replica(functions, quota)

    rewritten = grow(functions, replica, quota, 64)
    assert rewritten["metadata"]["annotations"][labels.PLACED_AT] == placed_at  # the premise
    assert rewritten["spec"]["engines"][0]["copies"] == 64
    grown = as_existing(rewritten, placed_at, replica["status"])

    # 1. First seen: recorded, not judged; the workload keeps its admitted shape.
    seen = functions.render(
        grown, REPLICA, observed=objects, required=[east(), quota, deployment(64)]
    )
    admitted = condition(composite(seen), "Admitted")
    assert (admitted["status"], admitted["reason"]) == ("True", "GrowthNotAdmitted")
    assert workload_replicas(seen) == 1
    record = composite(seen)["status"]["admission"]
    assert [e["copies"] for e in record["charged"]["engines"]] == [1]
    assert "grownAt" in record

    # 2. Past the commit delay: refused by the quota, still running as admitted.
    record["grownAt"] = format_time(datetime.now(UTC) - timedelta(seconds=30))
    delayed = as_existing(rewritten, placed_at, composite(seen)["status"])
    judged = functions.render(
        delayed, REPLICA, observed=objects, required=[east(), quota, deployment(64)]
    )
    refused = condition(composite(judged), "Admitted")
    assert (refused["status"], refused["reason"]) == ("True", "GrowthNotAdmitted")
    assert refused["message"] == (
        "admitted at the shape its verdict charged; its growth is not admitted: "
        "QuotaExceeded: namespace team-a quota devices allows 8 gpu.example.com device(s): "
        "8 used, a replica requests 504"
    )
    assert workload_replicas(judged) == 1


def test_a_growth_that_fits_the_quota_is_admitted_and_composed_at_its_new_shape(functions):
    quota = t.device_quota({GPU: 16})
    replica, objects, placed_at = running_replica(functions, quota)
    rewritten = grow(functions, replica, quota, 2)
    status = copy.deepcopy(replica["status"])
    status["admission"]["grownAt"] = format_time(datetime.now(UTC) - timedelta(seconds=30))
    grown = as_existing(rewritten, placed_at, status)

    judged = functions.render(
        grown, REPLICA, observed=objects, required=[east(), quota, deployment(2)]
    )
    assert condition(composite(judged), "Admitted")["reason"] == "Admitted"
    assert workload_replicas(judged) == 2
    record = composite(judged)["status"]["admission"]
    assert [e["copies"] for e in record["charged"]["engines"]] == [2]
