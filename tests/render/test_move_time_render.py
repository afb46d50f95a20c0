"""The same view rendered twice, seconds apart, moves every replica the same, through the real CLI.

Crossplane reconciles a deployment again on the same (possibly stale) view;
the function reads the clock. For every reason a replica leaves its place
(design/scheduler.md, "When a move counts as placed"; placement_time.py) the two renders must
give each replica the same cluster, pools and `modelplane.ai/placed-at`, so
the second apply is a no-op rather than a new placement to admit:

- Unschedulable past the grace period;
- Overcommitted by its cluster's admission;
- its pods not created (PodsCreated False/NotCreated);
- its cluster drained (a NoExecute taint it does not tolerate);
- its pool removed from its cluster;
- its cluster missing past the grace period.

Every input is written once with fixed times (the fleet's `__NOW-…__`
tokens filled at one moment), then rendered twice.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from modelplane_common import labels
from modelplane_common.timeutil import format_time
from modelplane_devtools import render
from modelplane_testkit.rendered import by_kind

from tests.render.test_deployment_lifecycle_render import (
    COMPOSITION,
    FLEET_CLUSTERS,
    FLEET_REPLICAS,
    deployment,
)

SEPARATION_S = 2.0
HEALED = "llama-8b-0"


def view(moment: datetime) -> tuple[list[dict], list[dict]]:
    """The example fleet's clusters and other replicas, their times filled at `moment`."""
    clusters = render.load_all(render.fill_time_tokens(FLEET_CLUSTERS.read_text(), moment))
    replicas = render.load_all(render.fill_time_tokens(FLEET_REPLICAS.read_text(), moment))
    return clusters, replicas


def _ago(moment: datetime, minutes: float) -> str:
    return format_time(moment - timedelta(minutes=minutes))


def steady_replicas(functions, moment: datetime) -> list[dict]:
    """The first placement as Crossplane observes it: placed 15 minutes ago, running."""
    clusters, replicas = view(moment)
    rendered = functions.render(deployment(), COMPOSITION, required=[*clusters, *replicas])
    placed = by_kind(rendered, "ModelReplica")
    assert len(placed) == 6
    out = []
    for replica in placed:
        body = copy.deepcopy(replica)
        body["metadata"].pop("ownerReferences", None)
        body["metadata"]["annotations"][labels.PLACED_AT] = _ago(moment, 15)
        body["metadata"]["creationTimestamp"] = _ago(moment, 15)
        body["status"] = {
            "conditions": [
                {
                    "type": "PodsScheduled",
                    "status": "True",
                    "reason": "AllPodsScheduled",
                    "lastTransitionTime": _ago(moment, 14),
                },
                {"type": "Ready", "status": "True", "reason": "Available"},
            ],
            "scheduledAt": _ago(moment, 14),
        }
        out.append(body)
    return out


# --- each cause: (the deployment, its observed replicas, the fleet) as they are now -----------

Case = tuple[dict, list[dict], list[dict]]


def _healed(replicas: list[dict]) -> dict:
    return next(r for r in replicas if r["metadata"]["name"] == HEALED)


def unschedulable(moment: datetime, own: list[dict]) -> Case:
    conditions = _healed(own)["status"]["conditions"]
    conditions[0].update(
        status="False",
        reason="Unschedulable",
        message="0/4 nodes are available",
        lastTransitionTime=_ago(moment, 10),
    )
    conditions[1].update(status="False", reason="Creating")
    return deployment(), own, [*view(moment)[0], *view(moment)[1]]


def overcommitted(moment: datetime, own: list[dict]) -> Case:
    body = _healed(own)
    body["status"]["admission"] = {
        "placedAt": body["metadata"]["annotations"][labels.PLACED_AT],
        "verdict": "Overcommitted",
        "decidedAt": _ago(moment, 3),
        "message": "engine vllm does not fit pool h100",
    }
    body["status"]["conditions"][0].update(status="Unknown", reason="NotAdmitted")
    return deployment(), own, [*view(moment)[0], *view(moment)[1]]


def pods_not_created(moment: datetime, own: list[dict]) -> Case:
    _healed(own)["status"]["conditions"].append(
        {
            "type": "PodsCreated",
            "status": "False",
            "reason": "NotCreated",
            "message": "the workload cluster refused its pods: exceeded quota",
            "lastTransitionTime": _ago(moment, 2),
        }
    )
    return deployment(), own, [*view(moment)[0], *view(moment)[1]]


def drained(moment: datetime, own: list[dict]) -> Case:
    clusters, replicas = view(moment)
    cluster = _healed(own)["spec"]["clusterName"]
    for c in clusters:
        if c["metadata"]["name"] == cluster:
            c["spec"].setdefault("taints", []).append(
                {"key": "maintenance", "value": "drain", "effect": "NoExecute"}
            )
    return deployment(), own, [*clusters, *replicas]


def pool_removed(moment: datetime, own: list[dict]) -> Case:
    for engine in _healed(own)["spec"]["engines"]:
        for member in engine["members"]:
            member["nodePoolName"] = "retired"
    return deployment(), own, [*view(moment)[0], *view(moment)[1]]


def cluster_missing(moment: datetime, own: list[dict]) -> Case:
    clusters, replicas = view(moment)
    gone = _healed(own)["spec"]["clusterName"]
    xr = deployment()
    since = _ago(moment, 6)
    xr["status"] = {"missingClusters": [{"name": gone, "since": since}]}
    return xr, own, [*(c for c in clusters if c["metadata"]["name"] != gone), *replicas]


def placements(rendered: list[dict]) -> dict[str, tuple]:
    """Each desired replica's (cluster, pools, placed-at), by name."""
    return {
        r["metadata"]["name"]: (
            r["spec"]["clusterName"],
            sorted({m["nodePoolName"] for e in r["spec"]["engines"] for m in e["members"]}),
            r["metadata"]["annotations"][labels.PLACED_AT],
        )
        for r in by_kind(rendered, "ModelReplica")
    }


@pytest.mark.parametrize(
    "cause",
    [
        pytest.param(unschedulable, id="an unschedulable replica past its grace moves the same"),
        pytest.param(overcommitted, id="an overcommitted replica moves the same"),
        pytest.param(pods_not_created, id="a replica whose pods were not created moves the same"),
        pytest.param(drained, id="a replica on a NoExecute-drained cluster moves the same"),
        pytest.param(pool_removed, id="a replica whose pool was removed is re-placed the same"),
        pytest.param(cluster_missing, id="a replica on a cluster missing past its grace moves"),
    ],
)
def test_the_same_view_rendered_twice_places_every_replica_the_same(
    functions, cause: Callable[[datetime, list[dict]], Case]
):
    moment = datetime.now(UTC)
    xr, own, required = cause(moment, steady_replicas(functions, moment))
    was = {r["metadata"]["name"]: r["metadata"]["annotations"][labels.PLACED_AT] for r in own}

    first = placements(functions.render(xr, COMPOSITION, observed=own, required=required))
    time.sleep(SEPARATION_S)
    second = placements(functions.render(xr, COMPOSITION, observed=own, required=required))

    assert first[HEALED][2] != was[HEALED], f"{HEALED} must be placed anew"
    assert second == first
