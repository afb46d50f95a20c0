"""Label values that carry a name: one rule for every writer and every selector."""

from __future__ import annotations

import pytest
from modelplane_common.labels import VALUE_MAX, label_value

LONG = "gpu-east-" + "a" * 244  # 253 characters: the longest InferenceCluster name


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("gpu-east", "gpu-east", id="a short name is its own label value"),
        pytest.param("x" * 63, "x" * 63, id="a name of 63 characters still fits whole"),
        pytest.param(
            LONG, "gpu-east-" + "a" * 47 + "-", id="a longer one is cut to 56 plus a 6-hex digest"
        ),
    ],
)
def test_a_name_becomes_a_valid_label_value(name, expected):
    value = label_value(name)
    assert len(value) <= VALUE_MAX
    assert value.startswith(expected)
    assert value[0].isalnum() and value[-1].isalnum()


def test_long_names_that_share_a_prefix_get_distinct_label_values():
    assert label_value(LONG) != label_value(LONG[:-1] + "b")


def test_the_rule_is_stable_across_calls():
    assert label_value(LONG) == label_value(LONG)
