"""An orphaned ModelReplica, through the real CLI (modelplane_common.orphans).

`kubectl delete modeldeployment --cascade=orphan` leaves the deployment's
ModelReplicas with the `crossplane.io/composite` label Crossplane set and
without the controller ownerReference the garbage collector removed. Such a
replica composes nothing (Crossplane removes its workloads) and says it holds
no capacity; the same replica with its owner composes as before.
"""

from __future__ import annotations

import copy

from modelplane_common.orphans import COMPOSITE_LABEL
from modelplane_common.pods_created import released
from modelplane_devtools import deployment_builders as t
from modelplane_devtools import render
from modelplane_devtools.rendered import by_kind, composite, condition

DEPLOYMENT = render.ROOT / "apis/modeldeployment/composition.yaml"
REPLICA = render.ROOT / "apis/modelreplica/composition.yaml"


def fleet() -> list[dict]:
    east = t.cluster(
        "east", [t.pool("h100", 2, histogram=[({"gpu": 8}, 2)], observed_at="__NOW-10s__")]
    )
    # What compose-inference-cluster publishes once the cluster is up.
    east["status"]["providerConfigRef"] = {"name": "east"}
    east["status"]["agent"] = {"present": True}
    return [east]


def deployment() -> dict:
    return t.deployment("llm", "team-a", engines=[t.standalone("serve", gpus=8)])


def composed_replica(functions) -> dict:
    rendered = functions.render(deployment(), DEPLOYMENT, required=fleet())
    (replica,) = by_kind(rendered, "ModelReplica")
    return replica


def run_replica(functions, replica: dict) -> list[dict]:
    return functions.render(replica, REPLICA, required=[*fleet(), deployment()])


def test_crossplane_marks_a_composed_replica_with_the_label_and_its_controller(functions):
    replica = composed_replica(functions)
    assert replica["metadata"]["labels"][COMPOSITE_LABEL] == "llm"
    (owner,) = replica["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("ModelDeployment", "llm", True)


def test_a_replica_whose_owner_reference_was_removed_composes_nothing_and_holds_nothing(
    functions,
):
    orphan = copy.deepcopy(composed_replica(functions))
    del orphan["metadata"]["ownerReferences"]
    rendered = run_replica(functions, orphan)
    assert by_kind(rendered, "Object") == []
    created = condition(composite(rendered), "PodsCreated")
    assert (created["status"], created["reason"]) == ("False", "Orphaned")
    assert released(created["status"], created["reason"])


def test_the_same_replica_with_its_owner_composes_as_before(functions):
    rendered = run_replica(functions, composed_replica(functions))
    assert by_kind(rendered, "Object") != []
    created = condition(composite(rendered), "PodsCreated")
    assert created["reason"] != "Orphaned"
