"""Object names and the workload Namespace's Object (remote_object.py, workload_namespace.py)."""

from __future__ import annotations

import pytest
from modelplane_common import remote_object, workload_namespace


@pytest.mark.parametrize(
    ("parts", "limit", "earlier"),
    [
        pytest.param(("llm-0", "gpu-east", "serve"), 63, "llm-0-gpu-east-serve-963745",
                     id="a workload Object keeps the name an earlier release gave it"),
        pytest.param(("llm-0", "serve"), 40, "llm-0-serve-1f697c",
                     id="a workload on the cluster keeps its 40-character name"),
        pytest.param(("a" * 70, "gpu.east", "serve", "leader", "claims"), 63,
                     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-accec3",
                     id="a long claim template's Object is cut and keeps its digest"),
    ],
)  # fmt: skip
def test_names_are_those_an_earlier_release_gave(parts, limit, earlier):
    # Moved from compose-model-replica's workloads.py: a changed name would make Crossplane
    # replace every running workload on upgrade.
    assert remote_object.bounded_name(*parts, limit=limit) == earlier


def test_the_namespace_object_name_is_bounded_and_distinct_from_three_and_five_parts():
    name = workload_namespace.namespace_object_name("d" * 63, "c" * 253)
    assert len(name) <= remote_object.NAME_MAX
    ours = workload_namespace.namespace_object_name("llm", "b")
    assert ours not in {
        remote_object.bounded_name("llm", "b", "deployment"),
        remote_object.bounded_name("llm", "b", "namespace"),
        remote_object.bounded_name("llm", "b", "deployment", "namespace", "claims"),
    }
    assert ours != workload_namespace.namespace_object_name("llm-b", "")


@pytest.mark.parametrize(
    ("message", "namespace", "says_who"),
    [
        pytest.param('cannot create object: namespaces "team-a" not found', "team-a", True,
                     id="the workload namespace missing says who composes it"),
        pytest.param('cannot create object: namespaces "team-b" not found', "team-a", False,
                     id="another namespace missing is quoted as it is"),
        pytest.param('admission webhook "deny.example" denied the request', "team-a", False,
                     id="any other reason is quoted as it is"),
    ],
)  # fmt: skip
def test_an_unapplied_object_says_who_composes_a_missing_namespace(message, namespace, says_who):
    explained = workload_namespace.explain_unapplied(message, namespace)
    assert explained.startswith(message)
    assert ("composed on the cluster by the replica's ModelDeployment" in explained) == says_who
