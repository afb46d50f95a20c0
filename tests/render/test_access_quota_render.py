"""Cluster access and device quotas through the real CLI (design/tenancy.md).

Crossplane's render answers every requirement from the resources given, as
the API server would: the deployment's Namespace by name, the ResourceQuotas
and ModelReplicas of a namespace by the requirement's namespace.

1. A cluster whose access selector does not select the deployment's
   Namespace gets no replica; the diagnosis counts it. Labelled to match, the
   same Namespace is placed there.
2. A ResourceQuota caps placement: what fits under it is placed, the rest is
   QuotaExceeded with the quota, the used and the requested.
3. Two deployments of one namespace placed from the same snapshot each stay
   under the quota alone; admission, seeing both, admits the one placed first
   and refuses the other with QuotaExceeded.
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
VISION = {"team": "vision"}


def east(**fields) -> dict:
    """east/h100: four free 8-GPU nodes, observed ten seconds ago."""
    cluster = t.cluster(
        "east",
        [t.pool("h100", 4, histogram=[({"gpu": 8}, 4)], observed_at="__NOW-10s__")],
        **fields,
    )
    cluster["status"]["providerConfigRef"] = {"name": "east"}
    cluster["status"]["agent"]["present"] = True
    return cluster


def deployment(name: str = "llm", replicas: int = 1) -> dict:
    return t.deployment(name, "team-a", replicas=replicas, engines=[t.standalone(gpus=8)])


def scheduled(rendered: list[dict]) -> tuple[str, str, str]:
    found = condition(composite(rendered), "ReplicasScheduled")
    return found["status"], found["reason"], found["message"]


def test_a_cluster_that_does_not_select_the_namespace_gets_no_replica(functions):
    restricted = east(namespace_selector={"matchLabels": VISION})
    rendered = functions.render(
        deployment(), DEPLOYMENT, required=[restricted, t.namespace("team-a")]
    )
    assert by_kind(rendered, "ModelReplica") == []
    assert scheduled(rendered) == (
        "False",
        "InsufficientCapacity",
        "0 of 1 replicas placed: 1 pool checked, 1 namespace not admitted (1 cluster)",
    )


def test_a_namespace_labelled_to_match_is_placed(functions):
    restricted = east(namespace_selector={"matchLabels": VISION})
    rendered = functions.render(
        deployment(), DEPLOYMENT, required=[restricted, t.namespace("team-a", VISION)]
    )
    assert [r["spec"]["clusterName"] for r in by_kind(rendered, "ModelReplica")] == ["east"]
    assert scheduled(rendered)[:2] == ("True", "AllReplicasScheduled")


def test_a_resource_quota_caps_placement_with_quota_exceeded(functions):
    required = [east(), t.namespace("team-a"), t.device_quota({GPU: 16})]
    rendered = functions.render(deployment(replicas=3), DEPLOYMENT, required=required)
    assert len(by_kind(rendered, "ModelReplica")) == 2
    assert scheduled(rendered) == (
        "False",
        "QuotaExceeded",
        "2 of 3 replicas placed: 1 pool checked, 1 namespace quota exceeded; namespace "
        "team-a quota devices allows 16 gpu.example.com device(s): 16 used, "
        "a replica requests 8",
    )


def test_a_quota_of_another_namespace_does_not_apply(functions):
    required = [east(), t.namespace("team-a"), t.device_quota({GPU: 0}, namespace="team-b")]
    rendered = functions.render(deployment(replicas=3), DEPLOYMENT, required=required)
    assert len(by_kind(rendered, "ModelReplica")) == 3


def as_existing(replica: dict, placed_at: str) -> dict:
    body = copy.deepcopy(replica)
    body["metadata"].setdefault("annotations", {})[labels.PLACED_AT] = placed_at
    return body


def test_admission_admits_the_first_of_two_deployments_of_one_namespace_under_the_quota(
    functions,
):
    quota = t.device_quota({GPU: 8})
    snapshot = [east(), t.namespace("team-a"), quota]
    alpha, beta = (
        by_kind(functions.render(deployment(n), DEPLOYMENT, required=snapshot), "ModelReplica")
        for n in ("alpha", "beta")
    )
    assert len(alpha) == len(beta) == 1  # each alone fits the quota

    now = datetime.now(UTC)
    first = as_existing(alpha[0], format_time(now - timedelta(seconds=61)))
    second = as_existing(beta[0], format_time(now - timedelta(seconds=60)))
    fleet = [east(), quota, first, second]
    won = functions.render(first, REPLICA, required=fleet)
    lost = functions.render(second, REPLICA, required=fleet)

    assert condition(composite(won), "Admitted")["status"] == "True"
    refused = condition(composite(lost), "Admitted")
    assert (refused["status"], refused["reason"]) == ("False", "Overcommitted")
    assert refused["message"] == (
        "QuotaExceeded: namespace team-a quota devices allows 8 gpu.example.com device(s): "
        "8 used, a replica requests 8"
    )
    assert composite(lost)["status"]["admission"]["verdict"] == "Overcommitted"
