"""Deeply nested pod templates, through the real CLI (design/tenancy.md, "Nesting").

A member template nested deeper than `nesting.MAX_TEMPLATE_DEPTH` (20) is refused at
the deployment, InvalidDeployment naming the field and the depth, so no ModelReplica
of it is composed; one at the limit is placed, and its replica, among another
deployment's required resources, breaks nothing. A template nested past what
protobuf decodes fails only its own request, and the function serves the next one.
"""

from __future__ import annotations

import pytest
from modelplane_common import nesting
from modelplane_devtools import render
from modelplane_testkit import deployment_builders as t
from modelplane_testkit.rendered import by_kind, composite, condition

from tests.render.test_admission_render import fleet

DEPLOYMENT = render.ROOT / "apis/modeldeployment/composition.yaml"


def nested(levels: int) -> dict:
    """A pod template of `levels` nested maps (the template itself is the first)."""
    inner: dict = {"leaf": "x"}
    for _ in range(levels - 3):
        inner = {"deeper": inner}
    # Under a field PodSpec does not have: the XRD keeps the template opaque.
    return {"spec": {"containers": [{"name": "serve", "image": "vllm"}], "extra": inner}}


def deep_deployment(name: str, levels: int) -> dict:
    body = t.deployment(name, "team-a", engines=[t.standalone("serve", gpus=8)])
    body["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"] = nested(levels)
    return body


def place(functions, xr: dict, others=()) -> list[dict]:
    return functions.render(xr, DEPLOYMENT, required=[*fleet(), *others])


def test_the_nesting_helper_counts_the_template_as_the_first_level():
    assert nesting.depth(nested(nesting.MAX_TEMPLATE_DEPTH)) == nesting.MAX_TEMPLATE_DEPTH


@pytest.mark.parametrize(
    "levels",
    [
        pytest.param(nesting.MAX_TEMPLATE_DEPTH + 1, id="one-level-past-the-limit"),
        pytest.param(25, id="the-deepest-a-deployment-request-still-decodes"),
    ],
)
def test_a_template_nested_past_the_limit_is_an_invalid_deployment(functions, levels):
    rendered = place(functions, deep_deployment("deep", levels))
    scheduled = condition(composite(rendered), "ReplicasScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "InvalidDeployment")
    assert scheduled["message"].startswith(
        "spec.template.spec.engines[0].members[0].template: nests more than 20 maps and lists "
        f"deep (got {levels})"
    ), scheduled
    assert by_kind(rendered, "ModelReplica") == []


def test_a_template_at_the_limit_is_placed_and_its_replica_breaks_no_other_request(functions):
    (replica,) = by_kind(
        place(functions, deep_deployment("deep", nesting.MAX_TEMPLATE_DEPTH)), "ModelReplica"
    )
    replica["metadata"].pop("ownerReferences", None)
    other = place(
        functions, t.deployment("other", "team-b", engines=[t.standalone(gpus=8)]), [replica]
    )
    assert condition(composite(other), "ReplicasScheduled")["status"] == "True"
    assert len(by_kind(other, "ModelReplica")) == 1


def test_a_request_nested_past_what_protobuf_decodes_fails_alone(functions):
    with pytest.raises(render.RenderFailed) as failed:
        place(functions, deep_deployment("abyss", 40))
    # Crossplane reports the function's error for this composite alone.
    assert "Exceeded upb_DecodeOptions_MaxDepth" in failed.value.stderr, failed.value
    # The same server answers the next request.
    rendered = place(functions, t.deployment("after", "team-a", engines=[t.standalone(gpus=8)]))
    assert condition(composite(rendered), "ReplicasScheduled")["status"] == "True"
