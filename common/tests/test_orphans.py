import pytest
from modelplane_common import orphans, pods_created

CONTROLLER = {"apiVersion": "modelplane.ai/v1alpha1", "kind": "ModelDeployment", "name": "llm"}
COMPOSED = {orphans.COMPOSITE_LABEL: "llm"}  # the replica is llm-0


@pytest.mark.parametrize(
    ("metadata", "orphaned"),
    [
        ({"labels": COMPOSED, "ownerReferences": [{**CONTROLLER, "controller": True}]}, False),
        ({"labels": COMPOSED}, True),
        ({"labels": COMPOSED, "ownerReferences": []}, True),
        ({"labels": COMPOSED, "ownerReferences": [{**CONTROLLER, "controller": False}]}, True),
        ({"labels": COMPOSED, "ownerReferences": "garbage"}, True),
        ({"labels": {"modelplane.ai/deployment": "llm"}}, False),
        ({"name": "llm-0", "labels": {orphans.COMPOSITE_LABEL: "llm-0"}}, False),
        ({}, False),
    ],
    ids=[
        "composed with its controller: owned",
        "composed, its ownerReferences removed: orphaned",
        "composed, an empty list: orphaned",
        "composed, only a reference that is not a controller: orphaned",
        "composed, ownerReferences not a list: orphaned",
        "never composed (written by hand), no owner: judged as before",
        "labelled with its own name (an XR Crossplane reconciles): judged as before",
        "no labels at all: judged as before",
    ],
)
def test_a_replica_is_orphaned_when_composed_and_without_its_controller(metadata, orphaned):
    assert orphans.orphaned(metadata) is orphaned


def test_an_orphaned_replica_holds_no_capacity():
    assert pods_created.released("False", orphans.ORPHANED)
