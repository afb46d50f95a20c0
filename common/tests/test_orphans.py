import pytest
from modelplane_common import orphans, pods_created

CONTROLLER = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment", "name": "llm"}
COMPOSITE = "crossplane.io/composite"
# What Crossplane writes on the replica llm-0 it composes from the deployment llm.
COMPOSED = {
    "name": "llm-0",
    "labels": {COMPOSITE: "llm"},
    "annotations": {orphans.COMPOSED_ANNOTATION: "replica-0"},
}


@pytest.mark.parametrize(
    ("metadata", "orphaned"),
    [
        ({**COMPOSED, "ownerReferences": [{**CONTROLLER, "controller": True}]}, False),
        (COMPOSED, True),
        ({**COMPOSED, "ownerReferences": []}, True),
        ({**COMPOSED, "ownerReferences": [{**CONTROLLER, "controller": False}]}, True),
        ({**COMPOSED, "ownerReferences": "garbage"}, True),
        ({**COMPOSED, "labels": {COMPOSITE: "llm-0"}}, True),
        ({**COMPOSED, "labels": {COMPOSITE: "llm-0"}, "ownerReferences": [CONTROLLER]}, True),
        (
            {
                **COMPOSED,
                "labels": {COMPOSITE: "llm-0"},
                "ownerReferences": [{**CONTROLLER, "controller": True}],
            },
            False,
        ),
        ({**COMPOSED, "labels": {}}, True),
        ({"name": "llm-0", "labels": {COMPOSITE: "llm"}}, False),
        ({"labels": {"modelplane.ai/deployment": "llm"}}, False),
        ({"name": "llm-0", "labels": {COMPOSITE: "llm-0"}}, False),
        ({**COMPOSED, "annotations": {orphans.COMPOSED_ANNOTATION: ""}}, False),
        ({**COMPOSED, "annotations": "garbage"}, False),
        ({}, False),
    ],
    ids=[
        "composed with its controller: owned",
        "composed, its ownerReferences removed: orphaned",
        "composed, an empty list: orphaned",
        "composed, only a reference that is not a controller: orphaned",
        "composed, ownerReferences not a list: orphaned",
        "composed, the tenant set its deployment's composite label to the replica's name: "
        "orphaned still",
        "composed, a tenant-set composite label, a reference without controller: orphaned",
        "composed, a tenant-set composite label, its controller kept: owned",
        "composed, no composite label at all: orphaned (the annotation decides)",
        "the composite label without Crossplane's annotation (not composed): judged as before",
        "never composed (written by hand), no owner: judged as before",
        "labelled with its own name (an XR Crossplane reconciles): judged as before",
        "an empty composition-resource-name: judged as before",
        "annotations not a mapping: judged as before",
        "no metadata at all: judged as before",
    ],
)
def test_a_replica_is_orphaned_when_composed_and_without_its_controller(metadata, orphaned):
    assert orphans.orphaned(metadata) is orphaned


def test_an_orphaned_replica_holds_no_capacity():
    assert pods_created.released("False", orphans.ORPHANED)
