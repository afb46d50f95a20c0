"""Table-driven specs for matching device requests to pool device kinds with DRA CEL."""

from __future__ import annotations

import dataclasses

import pytest
from modelplane_common.cel import celenv
from modelplane_common.cel import devices as matching
from modelplane_common.cel.devices import (
    KindMatch,
    SelectorError,
    cache_info,
    clear_caches,
    compile_selector,
    match_requests,
    selector_matches,
)
from modelplane_common.devices import DeviceRequest, read_device_kind, read_device_kinds

NV = "gpu.nvidia.com"

A100 = {
    "name": "a100",
    "driver": NV,
    "deviceClassName": "gpu.nvidia.com",
    "count": 4,
    "attributes": {
        f"{NV}/productName": {"string": "NVIDIA A100-SXM4-40GB"},
        "architecture": {"string": "Ampere"},
        "cudaComputeCapability": {"version": "8.0.0"},
        "mig": {"bool": True},
    },
    "capacity": {"memory": {"value": "40Gi"}},
}
H100 = {
    "name": "gpu",
    "driver": NV,
    "deviceClassName": "gpu.nvidia.com",
    "count": 8,
    "attributes": {
        f"{NV}/productName": {"string": "NVIDIA H100 80GB HBM3"},
        "architecture": {"string": "Hopper"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "driverVersion": {"version": "550.54.15"},
        "mig": {"bool": False},
        "sm": {"int": 132},
    },
    "capacity": {"memory": {"value": "80Gi"}, "powerWatts": {"value": 700}},
}
NIC = {
    "name": "rdma",
    "driver": "rdma.example.com",
    "deviceClassName": "rdma.example.com",
    "count": 8,
    "attributes": {"linkSpeedGbps": {"int": 400}, "rdma.example.com/roce": {"bool": True}},
}
CPU_SLOT = {
    "name": "cpu-slot",
    "claim": "Synthetic",
    "count": 4,
    "attributes": {"modelplane.ai/kind": {"string": "cpu"}},
}
KINDS = read_device_kinds((A100, H100, NIC, CPU_SLOT))


@pytest.fixture(autouse=True)
def _fresh_caches():
    clear_caches()
    yield
    clear_caches()


def req(name="dev", count=1, *expressions):
    return DeviceRequest(name, count, expressions)


def kinds(*declared):
    """Declared device kinds (wire form) as the readers hand them to the matcher."""
    return read_device_kinds(declared)


# --------------------------------------------------------------------------- one request

ONE_REQUEST = [
    pytest.param(
        f'device.attributes["{NV}"].productName.startsWith("NVIDIA H100")',
        ("gpu", True),
        id="a product-name selector picks the H100 kind",
    ),
    pytest.param(
        'device.driver == "rdma.example.com"',
        ("rdma", True),
        id="a driver selector picks the kind of that driver",
    ),
    pytest.param(
        f'device.attributes["{NV}"].architecture == "Hopper"',
        ("gpu", True),
        id="an unqualified attribute name lives in the kind's driver domain",
    ),
    pytest.param(
        'device.attributes["rdma.example.com"].linkSpeedGbps >= 400',
        ("rdma", True),
        id="an int attribute compares as an int",
    ),
    pytest.param(
        f'device.attributes["{NV}"].mig',
        ("a100", True),
        id="a bool attribute is usable as a condition",
    ),
    pytest.param(
        f'!device.attributes["{NV}"].mig',
        ("gpu", True),
        id="a negated bool attribute picks the kind where it is false",
    ),
    pytest.param(
        f'device.attributes["{NV}"].cudaComputeCapability.isGreaterThan(semver("8.9.0"))',
        ("gpu", True),
        id="a version attribute compares as a semantic version",
    ),
    pytest.param(
        f'device.attributes["{NV}"].cudaComputeCapability.major() == 8',
        ("a100", True),
        id="major() reads the major number of a version attribute",
    ),
    pytest.param(
        f'device.attributes["{NV}"].driverVersion.compareTo(semver("550.0.0")) >= 0',
        ("gpu", True),
        id="compareTo on versions orders numerically, not lexically",
    ),
    pytest.param(
        f'device.capacity["{NV}"].memory.isGreaterThan(quantity("40Gi"))',
        ("gpu", True),
        id="a capacity compared with isGreaterThan picks the larger-memory kind",
    ),
    pytest.param(
        f'device.capacity["{NV}"].memory.compareTo(quantity("40960Mi")) == 0',
        ("a100", True),
        id="compareTo treats 40Gi and 40960Mi as equal quantities",
    ),
    pytest.param(
        f'device.capacity["{NV}"].memory.isLessThan(quantity("64G"))',
        ("a100", True),
        id="isLessThan compares binary and decimal suffixes by value",
    ),
    pytest.param(
        f'device.capacity["{NV}"].powerWatts == quantity("700")',
        ("gpu", True),
        id="a capacity given as a plain integer is a quantity",
    ),
    pytest.param(
        f'device.capacity["{NV}"].memory == quantity("81920Mi")',
        ("gpu", True),
        id="quantities are equal by value whatever their suffix",
    ),
    pytest.param(
        f'cel.bind(g, device.attributes["{NV}"], g.architecture == "Ampere" && g.mig)',
        ("a100", True),
        id="cel.bind names a domain once",
    ),
    pytest.param(
        f'device.attributes["{NV}"].sm > 100',
        ("gpu", True),
        id="a kind missing the attribute does not match, a later kind that has it does",
    ),
    pytest.param(
        f'device.attributes["{NV}"].sm > 100 && device.attributes["{NV}"].nvlink',
        None,
        id="two missing attributes joined by && are still just no match",
    ),
    pytest.param(
        f'device.attributes["{NV}"].sm > 200 || device.attributes["{NV}"].mig',
        ("a100", True),
        id="|| lets a true side win over a missing attribute on the other",
    ),
    pytest.param(
        f'has(device.attributes["{NV}"].sm) && device.attributes["{NV}"].sm > 100',
        ("gpu", True),
        id="has() guards an attribute some kinds lack",
    ),
    pytest.param(
        f'device.attributes["{NV}"].mig ? false : device.attributes["{NV}"].sm > 100',
        ("gpu", True),
        id="a missing attribute in a ternary condition is no match, not an error",
    ),
    pytest.param(
        'device.attributes["modelplane.ai"].kind == "cpu"',
        ("cpu-slot", False),
        id="a synthetic kind is matched but not claimed",
    ),
    pytest.param(
        f'device.attributes["{NV}"].productName.lowerAscii().contains("h100")',
        ("gpu", True),
        id="lowerAscii from the strings extension works on attributes",
    ),
    pytest.param(
        'device.attributes["example.com"].nothing == 1',
        None,
        id="a missing attribute in an unknown domain matches no kind",
    ),
    pytest.param(
        '"example.com" in device.attributes',
        None,
        id="an unknown domain is not in device.attributes",
    ),
    pytest.param(
        'device.attributes["rdma.example.com"].linkSpeedGbps == "400"',
        None,
        id="an int attribute never equals a string",
    ),
    pytest.param(
        f'device.attributes["{NV}"].productName == "AMD MI300X"',
        None,
        id="a selector no kind satisfies yields None",
    ),
]


@pytest.mark.parametrize(("expression", "expected"), ONE_REQUEST)
def test_one_selector_picks_a_kind(expression, expected):
    result = match_requests([req("dev", 1, expression)], KINDS)
    if expected is None:
        assert result is None
    else:
        kind, claimed = expected
        assert result == (KindMatch(request="dev", kind=kind, count=1, claimed=claimed),)


# --------------------------------------------------------------------------- several requests

H100_ONLY = f'device.attributes["{NV}"].architecture == "Hopper"'
ANY_GPU = f'device.driver == "{NV}"'

SEVERAL = [
    pytest.param(
        [req("gpu", 1)],
        [("gpu", "gpu", 1, True)],
        id="a request prefers the kind named like it over an earlier declared kind",
    ),
    pytest.param(
        [req("accel", 1)],
        [("accel", "a100", 1, True)],
        id="without a same-named kind the first declared kind wins",
    ),
    pytest.param(
        [req("gpu", 1, 'device.attributes["rdma.example.com"].roce')],
        [("gpu", "rdma", 1, True)],
        id="the same-named kind is not preferred when its selectors fail",
    ),
    pytest.param(
        [req("a100", 8, ANY_GPU)],
        [("a100", "gpu", 8, True)],
        id="a same-named kind with too few devices per node gives way to one with enough",
    ),
    pytest.param(
        [req("gpu", 16, ANY_GPU)],
        None,
        id="a count larger than every matching kind's per-node count yields None",
    ),
    pytest.param(
        [req("dev", 5, 'device.attributes["modelplane.ai"].kind == "cpu"')],
        None,
        id="a synthetic kind also caps the count at its per-node count",
    ),
    pytest.param(
        [req("gpu", 4, H100_ONLY), req("gpu2", 4, H100_ONLY)],
        [("gpu", "gpu", 4, True), ("gpu2", "gpu", 4, True)],
        id="two requests share a kind when their sum fits its per-node count",
    ),
    pytest.param(
        [req("gpu", 4, H100_ONLY), req("gpu2", 5, H100_ONLY)],
        None,
        id="two requests cannot share a kind beyond its per-node count",
    ),
    pytest.param(
        [req("big", 6, ANY_GPU), req("small", 4, ANY_GPU)],
        [("big", "gpu", 6, True), ("small", "a100", 4, True)],
        id="a request that would overcommit its first choice takes its next choice",
    ),
    pytest.param(
        [req("small", 4, ANY_GPU), req("big", 6, ANY_GPU)],
        [("small", "a100", 4, True), ("big", "gpu", 6, True)],
        id="requests keep their order in the result",
    ),
    pytest.param(
        [req("x", 3, ANY_GPU), req("y", 8, ANY_GPU)],
        [("x", "a100", 3, True), ("y", "gpu", 8, True)],
        id="backtracking finds the assignment the greedy choice would miss",
    ),
    pytest.param(
        [req("gpu", 8, H100_ONLY), req("nic", 1, 'device.driver == "none.example.com"')],
        None,
        id="one unmatched request makes the whole member unplaceable",
    ),
    pytest.param(
        [req("gpu", 2, H100_ONLY), req("rdma", 2), req("slot", 1, 'device.driver == ""')],
        [("gpu", "gpu", 2, True), ("rdma", "rdma", 2, True), ("slot", "cpu-slot", 1, False)],
        id="a gpu, a nic and a synthetic slot are matched side by side",
    ),
    pytest.param(
        [req("dev", 1, ANY_GPU, 'device.attributes["gpu.nvidia.com"].mig == false')],
        [("dev", "gpu", 1, True)],
        id="every selector of a request must hold",
    ),
    pytest.param(
        [req("dev", 1)],
        [("dev", "a100", 1, True)],
        id="a request without selectors, named like no kind, takes the first kind",
    ),
    pytest.param([], [], id="no requests match trivially"),
]


@pytest.mark.parametrize(("requests", "expected"), SEVERAL)
def test_requests_of_one_member(requests, expected):
    result = match_requests(requests, KINDS)
    if expected is None:
        assert result is None
    else:
        assert result == tuple(KindMatch(*row) for row in expected)


def test_no_kinds_matches_nothing():
    assert match_requests([req("gpu", 1)], ()) is None


# --------------------------------------------------------------------------- selector errors

SELECTOR_ERRORS = [
    pytest.param('device.driver == "x" &&', "does not parse", id="a malformed expression"),
    pytest.param("nvidia(device)", "undeclared reference", id="an unknown function"),
    pytest.param("gpu.memory > 1", "undeclared reference", id="an undeclared variable"),
    pytest.param('device.vendor == "x"', "undefined field", id="an unknown field of device"),
    pytest.param("device.driver", "must evaluate to bool", id="a non-bool result"),
    pytest.param(
        'device.attributes["rdma.example.com"].linkSpeedGbps > "100"',
        "no such overload",
        id="ordering an int attribute against a string",
    ),
    pytest.param(
        f'device.capacity["{NV}"].memory > quantity("1Gi")',
        "no matching overload",
        id="the < > operators on quantities (use isGreaterThan)",
    ),
    pytest.param('quantity("12 apples").sign() == 1', "resource.Quantity", id="a bad quantity"),
    pytest.param('semver("v1.2") == semver("1.2.0")', "semantic version", id="a bad version"),
    pytest.param(
        f'device.capacity["{NV}"].memory.isGreaterThan(semver("1.0.0"))',
        "no such overload",
        id="comparing a quantity with a version",
    ),
    pytest.param("", "empty", id="an empty expression"),
    pytest.param("true || " * 1300 + "true", "longer than", id="an expression over 10 Ki"),
]


@pytest.mark.parametrize(("expression", "cause"), SELECTOR_ERRORS)
def test_a_broken_selector_raises_selector_error(expression, cause):
    with pytest.raises(SelectorError) as raised:
        match_requests([req("dev", 1, expression)], KINDS)
    assert cause in str(raised.value)
    assert expression[:40] in str(raised.value)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    "expression",
    [
        pytest.param("device.driver ==", id="compile_selector rejects a truncated expression"),
        pytest.param("size(device) == 3 && bogus()", id="compile_selector rejects unknown calls"),
    ],
)
def test_compile_selector_raises(expression):
    with pytest.raises(SelectorError):
        compile_selector(expression)


# --------------------------------------------------------------------------- CEL library

LIBRARY = [
    pytest.param('quantity("1k") == quantity("1000")', True, id="1k equals 1000"),
    pytest.param('quantity("1Ki") == quantity("1024")', True, id="1Ki equals 1024"),
    pytest.param('quantity("1.5") == quantity("1500m")', True, id="1.5 equals 1500m"),
    pytest.param('quantity("1e3").compareTo(quantity("1k")) == 0', True, id="1e3 equals 1k"),
    pytest.param('quantity("200M").compareTo(quantity("0.2G")) == 0', True, id="200M is 0.2G"),
    pytest.param('quantity("50M").compareTo(quantity("50Mi")) == -1', True, id="50M < 50Mi"),
    pytest.param(
        'quantity("1n").isGreaterThan(quantity("0.0000000001"))',
        False,
        id="sub-nano quantities round up to 1n",
    ),
    pytest.param(
        'quantity("-1").sign() == -1 && quantity("0").sign() == 0', True, id="sign of a quantity"
    ),
    pytest.param(
        'quantity("2Gi").add(quantity("1Gi")) == quantity("3Gi")', True, id="add two quantities"
    ),
    pytest.param(
        'quantity("50k").sub(20000).asInteger() == 30000',
        True,
        id="sub an int and read back an int",
    ),
    pytest.param('quantity("1.5").isInteger()', False, id="1.5 is not an integer quantity"),
    pytest.param('isQuantity("200K")', False, id="upper-case K is not a quantity suffix"),
    pytest.param('isQuantity("1.3Gi")', True, id="isQuantity accepts 1.3Gi"),
    pytest.param(
        'semver("1.2.3").compareTo(semver("1.10.0")) == -1', True, id="1.2.3 precedes 1.10.0"
    ),
    pytest.param(
        'semver("1.0.0-alpha").isLessThan(semver("1.0.0"))',
        True,
        id="a prerelease precedes its release",
    ),
    pytest.param(
        'semver("1.0.0-alpha.1").isLessThan(semver("1.0.0-alpha.beta"))',
        True,
        id="numeric prerelease identifiers precede alphanumeric ones",
    ),
    pytest.param(
        'semver("1.0.0-2").isLessThan(semver("1.0.0-10"))',
        True,
        id="numeric prerelease identifiers compare numerically",
    ),
    pytest.param(
        'semver("1.0.0+build.1") == semver("1.0.0+build.2")',
        True,
        id="build metadata does not take part in comparison",
    ),
    pytest.param(
        'semver("v1.2", true) == semver("1.2.0")',
        True,
        id="semver normalization drops v and fills in the patch",
    ),
    pytest.param(
        'semver("1.02.3", true).minor() == 2', True, id="semver normalization drops leading zeros"
    ),
    pytest.param('isSemver("1.02.3")', False, id="leading zeros are not strict semver"),
    pytest.param('semver("2.7.1").patch() == 1', True, id="patch() reads the patch number"),
    pytest.param("1 == 1.0", True, id="numbers compare by value across int and double"),
    pytest.param(
        '[1, 2].exists(i, i == 2) && "a" != 1', True, id="macros and heterogeneous inequality"
    ),
]


@pytest.mark.parametrize(("expression", "expected"), LIBRARY)
def test_cel_library(expression, expected):
    assert selector_matches(expression, read_device_kind(H100)) is expected


# Divergences from Kubernetes the CEL parity oracle found (test_parity.py), fixed here;
# each expected outcome is Kubernetes' (true / false / a no-match / SelectorError).
PARITY_FIXES = [
    pytest.param('quantity("4Gi").mul(2) == quantity("8Gi")', "error", id="quantity has no mul"),
    pytest.param('semver("1.0.0") == "1.0.0"', "error", id="a version == a string is an error"),
    pytest.param('1 == quantity("1")', "false", id="an int == a quantity is false (left decides)"),
    pytest.param('semver("1.0.0") != "1.0.0"', "match", id="!= is true where == is an error"),
    pytest.param(f'device.attributes["{NV}"].nope in []', "false", id="x in [] is false unread"),
    pytest.param('"Hopper" in [1, "Hopper"]', "match", id="in compares mixed types by equality"),
    pytest.param(f'device.attributes["{NV}"].mig < 1', "error", id="a bool is not ordered with 1"),
    pytest.param("true - false == 1", "error", id="bools are not numbers"),
    pytest.param(
        '(device.driver + "x").contains("x")', "match", id="a concatenated string has methods"
    ),
    pytest.param(
        f'1 / device.attributes["{NV}"].nope == 1', "missing", id="a missing key passes through /"
    ),
    pytest.param('quantity("2000m").isInteger()', "false", id="2000m is not held as an integer"),
    pytest.param('quantity("1.5Gi").isInteger()', "false", id="1.5Gi is not held as an integer"),
    pytest.param('quantity("2Ki").isInteger()', "match", id="2Ki is held as an integer"),
    pytest.param('isQuantity("Gi")', "match", id="a quantity without a number reads as 0"),
]


@pytest.mark.parametrize(("expression", "outcome"), PARITY_FIXES)
def test_parity_fixes(expression, outcome):
    assert matching.evaluate(expression, read_device_kind(H100).view)[0] == outcome


# --------------------------------------------------------------------------- kind data


def _kind(**changes):
    return {**H100, "name": "odd", **changes}


KIND_DATA = [
    pytest.param(
        _kind(attributes={"cudaComputeCapability": {"version": "9.0"}}),
        'device.driver == "gpu.nvidia.com"',
        False,
        id="a kind with an unparsable version attribute matches no selector",
    ),
    pytest.param(
        _kind(attributes={"x": {"int": 1, "string": "1"}}),
        "true",
        False,
        id="an attribute with two values matches no selector",
    ),
    pytest.param(
        _kind(capacity={"memory": {"value": "lots"}}),
        "true",
        False,
        id="a kind with an unparsable capacity matches no selector",
    ),
    pytest.param(
        _kind(attributes={"productName": "H100"}, capacity={"memory": "80Gi"}),
        f'device.attributes["{NV}"].productName == "H100" && '
        f'device.capacity["{NV}"].memory == quantity("80Gi")',
        True,
        id="bare attribute and capacity values are read leniently",
    ),
    pytest.param(
        _kind(driver="", attributes={"productName": {"string": "H100"}}),
        'device.attributes[""].productName == "H100"',
        True,
        id="without a driver, unqualified names live in the empty domain",
    ),
]


@pytest.mark.parametrize(("kind", "expression", "expected"), KIND_DATA)
def test_kind_data(kind, expression, expected):
    assert selector_matches(expression, read_device_kind(kind)) is expected


def test_a_request_without_selectors_ignores_bad_kind_data():
    odd = _kind(attributes={"cudaComputeCapability": {"version": "nine"}})
    assert match_requests([req("dev", 1)], kinds(odd)) == (KindMatch("dev", "odd", 1, True),)


# --------------------------------------------------------------------------- caches


def test_a_repeated_expression_is_compiled_once(monkeypatch):
    calls = []
    real = celenv.ENV.compile
    monkeypatch.setattr(celenv.ENV, "compile", lambda text: calls.append(text) or real(text))
    requests = [req("gpu", 1, H100_ONLY), req("gpu2", 1, H100_ONLY)]
    for _ in range(5):
        match_requests(requests, KINDS)
    assert calls == [H100_ONLY]
    assert cache_info()["compile"].misses == 1


def test_an_expression_is_evaluated_once_per_distinct_device(monkeypatch):
    program = compile_selector(H100_ONLY)
    calls = []
    real = program.evaluate
    monkeypatch.setattr(program, "evaluate", lambda ctx: calls.append(1) or real(ctx))
    twin = {**H100, "name": "h100-other-pool", "count": 2}  # same device, other name/count
    for _ in range(3):
        assert match_requests([req("dev", 1, H100_ONLY)], kinds(A100, H100, twin)) is not None
    assert len(calls) == 2  # A100 and H100; the twin and the repeats are cache hits
    assert cache_info()["evaluate"].hits >= 7


def test_caches_are_bounded():
    assert compile_selector.cache_parameters()["maxsize"] is not None
    assert matching.evaluate.cache_parameters()["maxsize"] is not None


def test_device_view_ignores_declaration_order():
    shuffled = {**H100, "attributes": dict(reversed(list(H100["attributes"].items())))}
    assert matching.device_view(shuffled) == matching.device_view(H100)
    hash(matching.device_view(H100))


def test_kind_match_is_a_frozen_value():
    match = KindMatch("dev", "gpu", 2, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        match.count = 3  # type: ignore[misc]
    assert match == KindMatch(request="dev", kind="gpu", count=2, claimed=True)
