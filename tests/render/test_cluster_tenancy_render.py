"""A cluster's spec.tenancy as the scheduler applies it, through the real CLI (design/tenancy.md).

compose-model-replica refuses at admission a replica whose cluster reserves
its namespace or does not approve a template's priority class; the scheduler
reads the same lists and places no replica there:

1. A cluster that reserves the deployment's namespace, or approves no class
   its template names, gets no replica; the diagnosis counts the cause.
2. What the scheduler places, admission admits: a deployment whose class one
   cluster approves is placed there, and that replica, rendered through
   compose-model-replica, is admitted (on the other cluster it would not
   have been judged).
3. A replica placed before the cluster started refusing, still waiting for
   its admission, moves to a cluster that takes it; an admitted one stays.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest
from modelplane_common import labels
from modelplane_common.timeutil import format_time
from modelplane_devtools import render
from modelplane_testkit import deployment_builders as t
from modelplane_testkit.rendered import by_kind, composite, condition

DEPLOYMENT = render.ROOT / "apis/modeldeployment/composition.yaml"
REPLICA = render.ROOT / "apis/modelreplica/composition.yaml"
HIGH = "inference-high"


def cluster(name: str, **fields) -> dict:
    """`name`/h100: four free 8-GPU nodes, observed ten seconds ago, its agent present."""
    body = t.cluster(
        name,
        [t.pool("h100", 4, histogram=[({"gpu": 8}, 4)], observed_at="__NOW-10s__")],
        **fields,
    )
    body["status"]["providerConfigRef"] = {"name": name}
    body["status"]["agent"]["present"] = True
    return body


def deployment(priority_class: str | None = None) -> dict:
    return t.deployment(
        "llm", "team-a", replicas=1, engines=[t.standalone(gpus=8, priority_class=priority_class)]
    )


def scheduled(rendered: list[dict]) -> tuple[str, str, str]:
    found = condition(composite(rendered), "ReplicasScheduled")
    return found["status"], found["reason"], found["message"]


@pytest.mark.parametrize(
    ("priority_class", "tenancy", "cause"),
    [
        pytest.param(
            None,
            {"reserved_namespaces": ["team-a"]},
            "1 namespace reserved (1 cluster)",
            id="the cluster reserves the namespace",
        ),
        pytest.param(
            HIGH, {}, "1 priority class not approved (1 cluster)", id="the cluster approves none"
        ),
        pytest.param(
            HIGH,
            {"priority_class_names": ["batch-low"]},
            "1 priority class not approved (1 cluster)",
            id="the cluster approves another class",
        ),
    ],
)
def test_a_cluster_whose_tenancy_refuses_the_deployment_gets_no_replica(
    functions, priority_class, tenancy, cause
):
    required = [cluster("east", **tenancy), t.namespace("team-a")]
    rendered = functions.render(deployment(priority_class), DEPLOYMENT, required=required)
    assert by_kind(rendered, "ModelReplica") == []
    assert scheduled(rendered) == (
        "False",
        "InsufficientCapacity",
        f"0 of 1 replicas placed: 1 pool checked, {cause}",
    )


def _a_minute_ago(replica: dict) -> dict:
    """The replica as Crossplane observes it a minute after its placement."""
    body = copy.deepcopy(replica)
    placed = format_time(datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1))
    body["metadata"]["annotations"][labels.PLACED_AT] = placed
    return body


def test_what_the_scheduler_places_admission_admits(functions):
    xr = deployment(HIGH)
    fleet = [cluster("east"), cluster("west", priority_class_names=[HIGH])]
    rendered = functions.render(xr, DEPLOYMENT, required=[*fleet, t.namespace("team-a")])
    (replica,) = by_kind(rendered, "ModelReplica")
    assert replica["spec"]["clusterName"] == "west"

    on_west = _a_minute_ago(replica)
    judged = composite(functions.render(on_west, REPLICA, required=[*fleet, xr]))
    assert condition(judged, "Admitted")["status"] == "True"

    # The same replica on east, which approves no class, would never have been judged.
    on_east = copy.deepcopy(on_west)
    on_east["spec"]["clusterName"] = "east"
    on_east["metadata"]["labels"][labels.CLUSTER] = "east"
    refused = condition(
        composite(functions.render(on_east, REPLICA, required=[*fleet, xr])), "Admitted"
    )
    assert refused["message"].startswith("not judged: engine serve: members[0] (Standalone)")


def _placed_on_east(functions, admitted: bool) -> dict:
    """The deployment's replica as placed on east a minute ago, before east reserved team-a:
    admitted and running, or waiting for an admission east now refuses."""
    rendered = functions.render(
        deployment(), DEPLOYMENT, required=[cluster("east"), t.namespace("team-a")]
    )
    (replica,) = by_kind(rendered, "ModelReplica")
    body = _a_minute_ago(replica)
    body["metadata"].pop("ownerReferences", None)  # as observed: Crossplane's own reference
    placed = body["metadata"]["annotations"][labels.PLACED_AT]
    if admitted:
        body["status"] = {
            "admission": {"placedAt": placed, "verdict": "Admitted"},
            "conditions": [
                {"type": "PodsScheduled", "status": "True", "reason": "AllPodsScheduled"},
                {"type": "Ready", "status": "True", "reason": "Available"},
            ],
            "scheduledAt": placed,
        }
    else:
        body["status"] = {
            "conditions": [
                {
                    "type": "Admitted",
                    "status": "False",
                    "reason": "WaitingForAdmission",
                    "message": "not judged: metadata.namespace: is reserved on this workload "
                    'cluster (spec.tenancy.reservedNamespaces) (got "team-a")',
                }
            ]
        }
    return body


@pytest.mark.parametrize(
    ("admitted", "cluster_after", "message"),
    [
        pytest.param(
            False,
            "west",
            "1 of 1 replicas placed",
            id="waiting for an admission east now refuses: moved to west",
        ),
        pytest.param(
            True,
            "east",
            "1 of 1 replicas placed; 1 on a cluster that reserves the namespace",
            id="admitted and running: kept on east and reported",
        ),
    ],
)
def test_a_replica_on_a_cluster_that_starts_reserving_its_namespace(
    functions, admitted, cluster_after, message
):
    own = _placed_on_east(functions, admitted)
    fleet = [cluster("east", reserved_namespaces=["team-a"]), cluster("west")]
    rendered = functions.render(
        deployment(), DEPLOYMENT, observed=[own], required=[*fleet, t.namespace("team-a")]
    )
    (replica,) = by_kind(rendered, "ModelReplica")
    assert replica["spec"]["clusterName"] == cluster_after
    assert scheduled(rendered) == ("True", "AllReplicasScheduled", message)
