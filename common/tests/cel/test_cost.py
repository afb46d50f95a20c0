"""The cost limit of a selector: refused when its worst case is over the limit at compile
time, stopped when it spends more at evaluation (`modelplane_common.cel.cost`)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from modelplane_common.cel import celenv, cost
from modelplane_common.cel.devices import ERROR, _activation, evaluate
from modelplane_common.cel.errors import SelectorError
from modelplane_common.devices import device_view

TEN = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"


def nested(levels: int, over: str = TEN, body: str = "true") -> str:
    """`levels` comprehensions nested over the same range."""
    for level in range(levels):
        body = f"{over}.all(x{level}, {body})"
    return body


def doubled(times: int) -> str:
    """A string bound and concatenated with itself `times` times."""
    body = f"s{times}.size() > 0"
    for level in reversed(range(times)):
        body = f"cel.bind(s{level + 1}, s{level} + s{level}, {body})"
    return f'cel.bind(s0, "{"x" * 60}", {body})'


def rendered(times: int) -> str:
    """A string rendered from a list of ten of itself, `times` times (the estimate's blind
    spot: it counts string() of a collection as the collection's size)."""
    body = f"s{times}.size() > 0"
    for level in reversed(range(times)):
        body = f"cel.bind(s{level + 1}, string([{', '.join([f's{level}'] * 10)}]), {body})"
    return f'cel.bind(s0, "{"x" * 60}", {body})'


DEVICE = device_view(
    {
        "driver": "gpu.nvidia.com",
        "attributes": {
            "gpu.nvidia.com/productName": {"string": "NVIDIA-H100-80GB-HBM3"},
            "architecture": {"string": "Hopper"},
            "driverVersion": {"version": "550.54.15"},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }
)


def context() -> dict[str, Any]:
    found = _activation(DEVICE)
    assert isinstance(found, dict)
    return found


# The selectors of examples/ and the tests: what tenants write today.
LEGITIMATE = [
    pytest.param('device.driver == "gpu.nvidia.com"', id="a driver"),
    pytest.param('device.attributes["gpu.nvidia.com"].productName == "NVIDIA-H100-80GB-HBM3"',
                 id="an attribute by domain"),
    pytest.param('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0',
                 id="a capacity as a quantity"),
    pytest.param('device.driver == "gpu.nvidia.com" && device.capacity["gpu.nvidia.com"].memory'
                 '.compareTo(quantity("40Gi")) >= 0 && device.attributes["gpu.nvidia.com"]'
                 '.architecture == "Hopper"', id="three clauses"),
    pytest.param('device.attributes["gpu.nvidia.com"].productName in ["NVIDIA-H100-80GB-HBM3", '
                 '"NVIDIA-H200", "NVIDIA-B200", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S"]',
                 id="one of five products"),
    pytest.param('device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))',
                 id="a version"),
    pytest.param('device.attributes.exists(d, has(device.attributes[d].architecture))',
                 id="an attribute in any domain (one comprehension over the device)"),
    pytest.param(nested(2), id="two comprehensions over ten elements"),
]  # fmt: skip


@pytest.mark.parametrize("expression", LEGITIMATE)
def test_a_legitimate_selector_compiles_and_its_estimate_bounds_what_it_spends(expression):
    estimate = cost.estimate(celenv.ENV.compile(expression))
    celenv.compile_selector(expression)
    assert celenv.measured_steps(expression, context()) <= estimate <= cost.MAX_COST


# (selector, the start of the refusal's cause)
HOSTILE = [
    pytest.param(nested(3), id="three comprehensions nested over ten elements are refused"),
    pytest.param(nested(6), id="six comprehensions nested over ten elements (10^6) are refused"),
    pytest.param(nested(2, over="device.attributes"),
                 id="two comprehensions nested over the device's attributes are refused"),
    pytest.param(nested(4, over="device.attributes"),
                 id="four comprehensions over the device's attributes (refused by Kubernetes too)"),
    pytest.param(doubled(12), id="a string doubled twelve times is refused"),
]  # fmt: skip


@pytest.mark.parametrize("expression", HOSTILE)
def test_a_selector_whose_worst_case_is_over_the_limit_is_refused_at_compile_time(expression):
    start = time.monotonic()
    with pytest.raises(SelectorError) as refused:
        celenv.compile_selector(expression)
    assert refused.value.cause.startswith("estimated cost ")
    assert f"exceeds the limit of {cost.MAX_COST} steps" in refused.value.cause
    assert time.monotonic() - start < 1.0


def test_an_evaluation_that_spends_past_the_limit_is_stopped():
    expression = rendered(4)  # 60 x 10^4 characters rendered; the estimate sees 60
    celenv.compile_selector(expression)  # accepted: the estimate's blind spot
    start = time.monotonic()
    outcome, reason = evaluate(expression, DEVICE)
    assert (outcome, reason) == (
        ERROR,
        f"exceeded the cost limit of {cost.MAX_COST} steps while evaluating",
    )
    assert time.monotonic() - start < 1.0


def test_the_limit_stops_what_the_attack_in_the_issue_would_spend():
    """Figures for design/cel-matching.md: the steps of nested comprehensions grow tenfold
    a level, and the estimate stays above them."""
    spent = [celenv.measured_steps(nested(levels), {}) for levels in (1, 2)]
    estimates = [cost.estimate(celenv.ENV.compile(nested(levels))) for levels in (1, 2, 3)]
    assert spent[0] <= estimates[0] and spent[1] <= estimates[1]
    assert estimates[1] <= cost.MAX_COST < estimates[2]


@pytest.mark.parametrize(
    "depth", [pytest.param(200, id="200 levels"), pytest.param(2000, id="2,000 levels")]
)
def test_a_selector_nested_too_deeply_to_estimate_is_refused_not_a_crash(depth):
    with pytest.raises(SelectorError) as refused:
        celenv.compile_selector("(" * depth + "true" + ")" * depth)
    assert refused.value.cause == "nested too deeply"
