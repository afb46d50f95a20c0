"""The template digest: one value per JSON template, whatever order or number form it came in."""

from __future__ import annotations

import copy
import hashlib

import pytest
from crossplane.function import resource
from modelplane_common import template_digest

TEMPLATE = {
    "metadata": {"labels": {"app": "vllm", "tier": "serving"}},
    "spec": {
        "containers": [
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.11.0",
                "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct"],
                "ports": [{"containerPort": 8000}],
            }
        ],
        "terminationGracePeriodSeconds": 120,
    },
}


def test_the_digest_is_sha256_of_the_sorted_compact_json():
    text = (
        '{"metadata":{"labels":{"app":"vllm","tier":"serving"}},"spec":{"containers":'
        '[{"args":["--model","meta-llama/Llama-3.1-8B-Instruct"],"image":'
        '"vllm/vllm-openai:v0.11.0","name":"vllm","ports":[{"containerPort":8000}]}],'
        '"terminationGracePeriodSeconds":120}}'
    )
    assert template_digest.canonical(TEMPLATE) == text.encode()
    assert template_digest.of(TEMPLATE) == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    assert template_digest.PATTERN.match(template_digest.of(TEMPLATE))


def _reordered(value):
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


@pytest.mark.parametrize(
    "same",
    [
        pytest.param(_reordered(TEMPLATE), id="keys in another order give the same digest"),
        pytest.param(
            resource.struct_to_dict(resource.dict_to_struct(TEMPLATE)),
            id="read back from a protobuf Struct (whole numbers as floats) gives the same digest",
        ),
        pytest.param(copy.deepcopy(TEMPLATE), id="an equal copy gives the same digest"),
    ],
)
def test_equal_templates_have_one_digest(same):
    assert template_digest.of(same) == template_digest.of(TEMPLATE)


def _edited(edit):
    template = copy.deepcopy(TEMPLATE)
    edit(template)
    return template


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(
            _edited(lambda t: t["spec"]["containers"][0].update(image="vllm:v2")),
            id="another image changes the digest",
        ),
        pytest.param(
            _edited(lambda t: t["spec"]["containers"][0]["args"].reverse()),
            id="the same list in another order changes the digest",
        ),
        pytest.param(
            _edited(lambda t: t["spec"].update(nodeName="gpu-1")),
            id="an added field changes the digest",
        ),
        pytest.param(
            _edited(lambda t: t["metadata"]["labels"].pop("tier")),
            id="a removed label changes the digest",
        ),
        pytest.param(
            _edited(lambda t: t["spec"].update(terminationGracePeriodSeconds=120.5)),
            id="a number that is not whole changes the digest",
        ),
        pytest.param(
            _edited(lambda t: t["spec"].update(terminationGracePeriodSeconds="120")),
            id="a number written as a string changes the digest",
        ),
        pytest.param(TEMPLATE["spec"], id="a bare pod spec differs from its PodTemplateSpec"),
    ],
)
def test_any_change_to_the_template_changes_the_digest(other):
    assert template_digest.of(other) != template_digest.of(TEMPLATE)
