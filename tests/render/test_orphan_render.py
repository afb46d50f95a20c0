"""An orphaned ModelReplica, through the real CLI (modelplane_common.orphans).

`kubectl delete modeldeployment --cascade=orphan` leaves the deployment's
ModelReplicas with the `crossplane.io/composition-resource-name` annotation
Crossplane wrote and without the controller ownerReference the garbage
collector removed. Such a replica composes nothing (Crossplane removes its
workloads) and says it holds no capacity, whatever `crossplane.io/composite`
label its tenant had Crossplane copy onto it; the same replica with its
owner composes as before. Once it says so, a replica of another tenant placed
into the room it held is admitted there.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

from modelplane_common import labels
from modelplane_common.orphans import COMPOSED_ANNOTATION
from modelplane_common.pods_created import released
from modelplane_common.timeutil import format_time
from modelplane_devtools import render
from modelplane_testkit import deployment_builders as t
from modelplane_testkit.rendered import by_kind, composite, condition

DEPLOYMENT = render.ROOT / "apis/modeldeployment/composition.yaml"
REPLICA = render.ROOT / "apis/modelreplica/composition.yaml"
COMPOSITE_LABEL = "crossplane.io/composite"


def fleet() -> list[dict]:
    """east/h100: two free 8-GPU nodes, observed ten seconds ago."""
    east = t.cluster(
        "east", [t.pool("h100", 2, histogram=[({"gpu": 8}, 2)], observed_at="__NOW-10s__")]
    )
    # What compose-inference-cluster publishes once the cluster is up.
    east["status"]["providerConfigRef"] = {"name": "east"}
    east["status"]["agent"]["present"] = True
    return [east]


def deployment(
    name: str = "llm", namespace: str = "team-a", copies: int = 1, composite_label: str = ""
) -> dict:
    xr = t.deployment(name, namespace, engines=[t.standalone("serve", gpus=8, copies=copies)])
    if composite_label:  # a tenant may set it on its own deployment
        xr["metadata"].setdefault("labels", {})[COMPOSITE_LABEL] = composite_label
    return xr


def composed_replica(functions, xr: dict | None = None, others=()) -> dict:
    rendered = functions.render(xr or deployment(), DEPLOYMENT, required=[*fleet(), *others])
    (replica,) = by_kind(rendered, "ModelReplica")
    return replica


def run_replica(functions, replica: dict, required=None) -> list[dict]:
    return functions.render(
        replica, REPLICA, required=[*fleet(), deployment()] if required is None else required
    )


def orphaned(replica: dict) -> dict:
    """The replica once the garbage collector removed its deployment's reference."""
    orphan = copy.deepcopy(replica)
    del orphan["metadata"]["ownerReferences"]
    return orphan


def test_crossplane_marks_a_composed_replica_with_the_annotation_and_its_controller(functions):
    replica = composed_replica(functions)
    assert replica["metadata"]["annotations"][COMPOSED_ANNOTATION] == "replica-0"
    assert replica["metadata"]["labels"][COMPOSITE_LABEL] == "llm"
    (owner,) = replica["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("ModelDeployment", "llm", True)


def test_a_replica_whose_owner_reference_was_removed_composes_nothing_and_holds_nothing(
    functions,
):
    rendered = run_replica(functions, orphaned(composed_replica(functions)))
    assert by_kind(rendered, "Object") == []
    created = condition(composite(rendered), "PodsCreated")
    assert (created["status"], created["reason"]) == ("False", "Orphaned")
    assert released(created["status"], created["reason"])


def test_the_same_replica_with_its_owner_composes_as_before(functions):
    rendered = run_replica(functions, composed_replica(functions))
    assert by_kind(rendered, "Object") != []
    created = condition(composite(rendered), "PodsCreated")
    assert created["reason"] != "Orphaned"


def test_a_tenant_set_composite_label_does_not_hide_an_orphan(functions):
    """The tenant labels its deployment with its replica's name: Crossplane copies the label
    onto the replica, which then carries its own name, as a root composite does."""
    replica = composed_replica(functions, deployment(composite_label="llm-0"))
    assert replica["metadata"]["labels"][COMPOSITE_LABEL] == replica["metadata"]["name"]
    rendered = run_replica(functions, orphaned(replica))
    assert by_kind(rendered, "Object") == []
    created = condition(composite(rendered), "PodsCreated")
    assert (created["status"], created["reason"]) == ("False", "Orphaned")


def as_existing(replica: dict, placed_at: datetime, status: dict | None = None) -> dict:
    """A composed ModelReplica as the API server holds it, placed at `placed_at`."""
    body = copy.deepcopy(replica)
    body["metadata"].setdefault("annotations", {})[labels.PLACED_AT] = format_time(placed_at)
    if status is not None:
        body["status"] = status
    return body


def test_a_replica_placed_into_the_room_an_orphan_held_is_admitted(functions):
    """The orphan was placed at 2 copies of 8 GPUs (both nodes) a minute before, and never
    admitted: it says it is Orphaned, and another tenant's replica placed after it on the
    same nodes is admitted there."""
    now = datetime.now(UTC)
    placed = as_existing(
        composed_replica(functions, deployment(copies=2)), now - timedelta(seconds=61)
    )
    said = composite(run_replica(functions, orphaned(placed), [*fleet()]))
    orphan = as_existing(orphaned(placed), now - timedelta(seconds=61), said["status"])
    assert condition(orphan, "PodsCreated")["reason"] == "Orphaned"

    other = deployment("other", "team-b")
    mine = as_existing(composed_replica(functions, other, [orphan]), now - timedelta(seconds=60))
    assert mine["spec"]["clusterName"] == "east"
    rendered = run_replica(functions, mine, [*fleet(), orphan, mine, other])
    admitted = condition(composite(rendered), "Admitted")
    assert (admitted["status"], admitted["reason"]) == ("True", "Admitted"), admitted
    assert by_kind(rendered, "Object") != []
