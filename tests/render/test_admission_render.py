"""Two deployments race for the last free node, through the real CLI (design/admission.md).

1. Both deployments are rendered from the same snapshot of the fleet, as two
   reconciles at the same moment would be: each places its replica on the
   only free node of east/h100.
2. Each replica is rendered with both replicas visible, as Crossplane feeds
   compose-model-replica once both exist: exactly the one placed first is
   admitted and composes its workload; the other is Overcommitted, composes
   nothing, and says which pool it does not fit and by how much.
3. The loser's deployment, observing its replica Overcommitted, re-places it
   at once (no grace period) on the other cluster and avoids east/h100.
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


def fleet() -> list[dict]:
    """east/h100 has one free 8-GPU node of two; west/h100 has two free nodes."""
    east = t.cluster(
        "east",
        [
            t.pool(
                "h100",
                2,
                histogram=[({"gpu": 8}, 1), ({"gpu": 0}, 1)],
                observed_at="__NOW-10s__",
            )
        ],
    )
    west = t.cluster(
        "west",
        [t.pool("h100", 2, histogram=[({"gpu": 8}, 2)], observed_at="__NOW-10s__")],
    )
    for cluster in (east, west):
        # What compose-inference-cluster publishes once the cluster is up.
        cluster["status"]["providerConfigRef"] = {"name": cluster["metadata"]["name"]}
        cluster["status"]["agent"]["present"] = True
    return [east, west]


def deployment(name: str, namespace: str) -> dict:
    return t.deployment(name, namespace, engines=[t.standalone("serve", gpus=8)])


def place(functions, xr: dict, observed=None, others=()) -> list[dict]:
    return functions.render(xr, DEPLOYMENT, observed=observed, required=[*fleet(), *others])


def as_existing(replica: dict, placed_at: str, status: dict | None = None) -> dict:
    """A composed ModelReplica as it exists in the API server, with a chosen placement time."""
    body = copy.deepcopy(replica)
    body["metadata"].setdefault("annotations", {})[labels.PLACED_AT] = placed_at
    if status is not None:
        body["status"] = status
    return body


def deployments_of(replicas: list[dict]) -> list[dict]:
    """The ModelDeployment of each replica (its labels name it), which holds the
    templates the replica names by digest."""
    return [
        deployment(r["metadata"]["labels"][labels.DEPLOYMENT], r["metadata"]["namespace"])
        for r in replicas
    ]


def admit(functions, replica: dict, both: list[dict]) -> list[dict]:
    return functions.render(replica, REPLICA, required=[*fleet(), *both, *deployments_of(both)])


def composed(rendered: list[dict]) -> list[str]:
    """The composition resource names of the rendered Objects."""
    return sorted(
        o["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
        for o in by_kind(rendered, "Object")
    )


def test_of_two_deployments_racing_for_the_last_node_exactly_one_runs_and_the_other_moves(
    functions,
):
    # 1. Same snapshot, same free node. Each deployment composes its workload Namespace
    # there, one Object for the cluster; its replica composes none.
    placed_alpha = place(functions, deployment("alpha", "team-a"))
    placed_beta = place(functions, deployment("beta", "team-b"))
    for rendered, namespace in ((placed_alpha, "team-a"), (placed_beta, "team-b")):
        assert composed(rendered) == ["namespace/east"]
        (namespace_object,) = by_kind(rendered, "Object")
        manifest = namespace_object["spec"]["forProvider"]["manifest"]
        assert (manifest["kind"], manifest["metadata"]["name"]) == ("Namespace", namespace)
        assert "Delete" not in namespace_object["spec"]["managementPolicies"]
    alpha = by_kind(placed_alpha, "ModelReplica")
    beta = by_kind(placed_beta, "ModelReplica")
    assert [r["spec"]["clusterName"] for r in alpha + beta] == ["east", "east"]
    assert [
        m["nodePoolName"] for r in alpha + beta for m in r["spec"]["engines"][0]["members"]
    ] == [
        "h100",
        "h100",
    ]

    # 2. Alpha was placed a second before beta: alpha is ahead in the queue. The times are
    # fixed once, so the verdicts recorded for them still bind them in step 3.
    now = datetime.now(UTC)
    alpha_at, beta_at = (
        format_time(now - timedelta(seconds=61)),
        format_time(now - timedelta(seconds=60)),
    )
    first = as_existing(alpha[0], alpha_at)
    second = as_existing(beta[0], beta_at)
    both = [first, second]
    won = admit(functions, first, both)
    lost = admit(functions, second, both)

    assert condition(composite(won), "Admitted")["status"] == "True"
    assert composite(won)["status"]["admission"]["verdict"] == "Admitted"
    assert composed(won) == [
        "east/observation",
        "east/serve/claims-standalone",
        "east/serve/workload",
    ]

    refused = condition(composite(lost), "Admitted")
    assert (refused["status"], refused["reason"]) == ("False", "Overcommitted")
    assert refused["message"] == (
        "engine serve does not fit pool h100 behind the 1 replica(s) of the cluster placed "
        "before it: it claims 8 gpu device(s), 0 free (too few free devices)"
    )
    assert composed(lost) == ["east/observation"]
    lost_status = composite(lost)["status"]

    # 3. Beta's deployment sees its replica Overcommitted: re-placed at once, elsewhere.
    won_status = composite(won)["status"]
    assert lost_status["admission"]["placedAt"] == beta_at
    observed_beta = as_existing(beta[0], beta_at, lost_status)
    alpha_now = as_existing(alpha[0], alpha_at, won_status)
    again = place(
        functions,
        deployment("beta", "team-b"),
        observed=[observed_beta],
        others=[alpha_now, observed_beta],
    )
    moved = by_kind(again, "ModelReplica")
    assert [r["spec"]["clusterName"] for r in moved] == ["west"]
    xr = composite(again)
    assert [(f["cluster"], f["pool"]) for f in xr["status"]["failedPlacements"]] == [
        ("east", "h100")
    ]
    assert "was not admitted on its cluster" in xr["status"]["failedPlacements"][0]["reason"]
    assert condition(xr, "ReplicasScheduled")["status"] == "True"
