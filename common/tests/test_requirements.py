"""Required resources written one way (modelplane_common.requirements)."""

from __future__ import annotations

import pytest
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from google.protobuf import json_format
from modelplane_common.requirements import ResourceRequirement, require

API = "modelplane.ai/v1alpha1"


def _wire(selector: fnv1.ResourceSelector) -> dict:
    """The selector as it goes on the wire: a field set (even empty) is listed, one
    never set is not."""
    return json_format.MessageToDict(selector, preserving_proto_field_name=True)


@pytest.mark.parametrize(
    ("requirement", "wire"),
    [
        pytest.param(
            ResourceRequirement.by_name("cluster", API, "InferenceCluster", "east"),
            {"api_version": API, "kind": "InferenceCluster", "match_name": "east"},
            id="by name: match_name only, no namespace",
        ),
        pytest.param(
            ResourceRequirement.by_name("d", API, "ModelDeployment", "llm", namespace="team-a"),
            {
                "api_version": API,
                "kind": "ModelDeployment",
                "match_name": "llm",
                "namespace": "team-a",
            },
            id="by name in a namespace",
        ),
        pytest.param(
            ResourceRequirement.by_labels("r", API, "ModelReplica", {"a": "1", "b": "2"}),
            {
                "api_version": API,
                "kind": "ModelReplica",
                "match_labels": {"labels": {"a": "1", "b": "2"}},
            },
            id="by labels: every pair, no name",
        ),
        pytest.param(
            ResourceRequirement.by_labels("c", API, "InferenceCluster", {}),
            {"api_version": API, "kind": "InferenceCluster", "match_labels": {}},
            id="by no label: match_labels set and empty, which selects every object",
        ),
        pytest.param(
            ResourceRequirement.by_labels("q", "v1", "ResourceQuota", {}, namespace="team-a"),
            {
                "api_version": "v1",
                "kind": "ResourceQuota",
                "match_labels": {},
                "namespace": "team-a",
            },
            id="every object of a kind in one namespace",
        ),
        pytest.param(
            ResourceRequirement.by_name("d", API, "ModelDeployment", "llm", namespace=""),
            {"api_version": API, "kind": "ModelDeployment", "match_name": "llm", "namespace": ""},
            id="a namespace given empty is still written",
        ),
        pytest.param(
            ResourceRequirement("n", "v1", "Namespace", match_name="team-a"),
            {"api_version": "v1", "kind": "Namespace", "match_name": "team-a"},
            id="a match_name with the default labels selects by name",
        ),
    ],
)
def test_a_requirement_on_the_wire(requirement, wire):
    assert _wire(requirement.selector()) == wire


def test_match_name_and_match_labels_together_are_refused():
    with pytest.raises(ValueError, match="requirement x: match_name and match_labels"):
        ResourceRequirement("x", "v1", "Namespace", match_name="a", match_labels={"b": "c"})


def test_require_writes_each_under_its_name_and_a_later_one_of_a_name_wins():
    rsp = fnv1.RunFunctionResponse()
    first = ResourceRequirement.by_name("cluster", API, "InferenceCluster", "east")
    other = ResourceRequirement.by_labels("replicas", API, "ModelReplica", {"a": "1"})
    again = ResourceRequirement.by_name("cluster", API, "InferenceCluster", "west")
    require(rsp, first, other, again)
    written = {name: _wire(s) for name, s in rsp.requirements.resources.items()}
    assert written == {"cluster": _wire(again.selector()), "replicas": _wire(other.selector())}


def test_require_with_nothing_writes_no_requirement():
    rsp = fnv1.RunFunctionResponse()
    require(rsp)
    assert not rsp.HasField("requirements")


def test_equal_requirements_hash_equal():
    a = ResourceRequirement.by_labels("r", API, "ModelReplica", {"a": "1"})
    b = ResourceRequirement.by_labels("r", API, "ModelReplica", {"a": "1"})
    assert a == b
    assert hash(a) == hash(b)
