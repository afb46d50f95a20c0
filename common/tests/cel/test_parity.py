"""Differential test: `modelplane_common.cel` against Kubernetes' own DRA CEL.

Random selectors (from a typed grammar of what DRA selectors use, with
deliberate ill-typed, undeclared, malformed and expensive ones) are evaluated
on random devices both here and by the oracle (`.tools/bin/cel-oracle`,
`k8s.io/dynamic-resource-allocation/cel` v0.35.4, see
modelplane_testkit.cel_oracle). Both answers are reduced to one class:

    true, false   the selector evaluated to that
    missing       it read an attribute or capacity the device lacks ("no such key")
    compile       the expression is rejected before any device is seen
    runtime       evaluation on this device failed otherwise (type error, bad literal...)
    cost          a cost limit rejects it (estimated at compile time, or exceeded
                  at evaluation)

and the classes must be equal, except for the divergences design/cel-matching.md
lists ("Known divergences"), each recognised by `known_divergence` and pinned by
`test_known_divergence`. Seed policy: `make test` runs a fixed, derandomized
set (the same cases every run, so no run is flaky); MODELPLANE_FUZZ=long runs
many more random ones (a new seed each run; Hypothesis prints the failing case).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from modelplane_common.cel import devices as matching
from modelplane_common.cel.celenv import compile_selector
from modelplane_common.cel.errors import SelectorError
from modelplane_common.devices import device_view
from modelplane_testkit.cel_oracle import Oracle

LONG = os.environ.get("MODELPLANE_FUZZ", "ci") == "long"
EXAMPLES = 4000 if LONG else 500
CASES_PER_EXAMPLE = 5  # one selector on this many devices
MIN_CASES = 2000

DRIVERS = ("gpu.example.com", "dra.example.com")
DOMAINS = (*DRIVERS, "other.example.org")
IDS = ("model", "sm", "mig", "cc", "family", "numa")
CAPACITY_IDS = ("memory", "cores", "bandwidth")
INTS = (-3, 0, 1, 7, 80, 132, 2**31, 2**63 - 1)
STRINGS = ("", "H100", "h100", "A100-SXM4", "Hopper", "gpu.example.com", "a,b")
VERSIONS = ("0.1.0", "1.0.0", "8.0.0", "9.0.0", "550.54.15", "1.2.3-alpha", "1.2.3-alpha.1",
            "1.2.3-1", "1.2.3+build.5", "10.0.0-rc.1")  # fmt: skip
BAD_VERSIONS = ("v1.2.3", "1.2", "01.2.3", "1.02.3", "bad", "1.2.3.4", "v01.2", "1")
QUANTITIES = ("80Gi", "40Gi", "1k", "1Ki", "500m", "1.5", "0", "-1", "1e3", "1E3", "1.5Gi",
              "1M", "0.5", "100n", "3u", "2Ti", "1024Mi", "7")  # fmt: skip
BAD_QUANTITIES = ("12 apples", "200K", "1.5.5", "", "Gi", "1ki", "--1")
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


# --------------------------------------------------------------------------- devices


def _attribute_value(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    values = {"int": INTS, "bool": (True, False), "string": STRINGS, "version": VERSIONS}[kind]
    return st.sampled_from(values).map(lambda v: {kind: v})


@st.composite
def devices(draw: st.DrawFn) -> dict[str, Any]:
    """A device as a pool declares it (the project's wire shape)."""
    driver = draw(st.sampled_from(DRIVERS))
    attributes = {}
    for name in draw(st.lists(st.sampled_from(IDS), max_size=5, unique=True)):
        domain = draw(st.sampled_from(("", *DOMAINS)))
        kind = draw(st.sampled_from(("int", "bool", "string", "version")))
        attributes[f"{domain}/{name}" if domain else name] = draw(_attribute_value(kind))
    capacity = {}
    for name in draw(st.lists(st.sampled_from(CAPACITY_IDS), max_size=3, unique=True)):
        domain = draw(st.sampled_from(("", *DOMAINS)))
        qualified = f"{domain}/{name}" if domain else name
        capacity[qualified] = {"value": draw(st.sampled_from(QUANTITIES))}
    return {"driver": driver, "attributes": attributes, "capacity": capacity}


def oracle_device(device: dict[str, Any]) -> dict[str, Any]:
    """The same device as the oracle reads it (capacity as bare quantity strings)."""
    capacity = {name: c["value"] for name, c in device["capacity"].items()}
    return {**device, "capacity": capacity}


# --------------------------------------------------------------------------- selectors

Grammar = Callable[[st.DrawFn, int], str]


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _lookup(draw: st.DrawFn, field: str, ids: tuple[str, ...]) -> str:
    domain, ident = draw(st.sampled_from(DOMAINS)), draw(st.sampled_from(ids))
    style = draw(st.sampled_from(("dot", "index")))
    if style == "dot":
        return f"device.{field}[{_quote(domain)}].{ident}"
    return f"device.{field}[{_quote(domain)}][{_quote(ident)}]"


def _literal(draw: st.DrawFn, kind: str) -> str:
    if kind == "int":
        return str(draw(st.sampled_from(INTS)))
    if kind == "string":
        return _quote(draw(st.sampled_from(STRINGS)))
    if kind == "bool":
        return draw(st.sampled_from(("true", "false")))
    if kind == "double":
        return draw(st.sampled_from(("1.0", "0.5", "-2.5")))
    return "null"


def _any_kind(draw: st.DrawFn) -> str:
    """Usually the kind asked for; sometimes another, to make type errors."""
    return draw(st.sampled_from(("int", "string", "bool", "quantity", "semver", "dyn", "double")))


def e_int(draw: st.DrawFn, depth: int) -> str:
    options = ["literal", "dyn", "size"]
    if depth > 0:
        options += ["arith", "compareTo", "sign", "asInteger", "semverPart"]
    choice = draw(st.sampled_from(options))
    if choice == "literal":
        return _literal(draw, "int")
    if choice == "dyn":
        return _lookup(draw, "attributes", IDS)
    if choice == "size":
        return f"size({e_string(draw, depth - 1)})"
    if choice == "arith":
        op = draw(st.sampled_from(("+", "-", "*", "/", "%")))
        return f"({e_int(draw, depth - 1)} {op} {e_int(draw, depth - 1)})"
    if choice == "compareTo":
        kind = draw(st.sampled_from((e_quantity, e_semver)))
        return f"{kind(draw, depth - 1)}.compareTo({kind(draw, depth - 1)})"
    if choice == "sign":
        return f"{e_quantity(draw, depth - 1)}.sign()"
    if choice == "asInteger":
        return f"{e_quantity(draw, depth - 1)}.asInteger()"
    part = draw(st.sampled_from(("major", "minor", "patch")))
    return f"{e_semver(draw, depth - 1)}.{part}()"


def e_string(draw: st.DrawFn, depth: int) -> str:
    options = ["literal", "driver", "dyn"]
    if depth > 0:
        options += ["concat", "case"]
    choice = draw(st.sampled_from(options))
    if choice == "literal":
        return _literal(draw, "string")
    if choice == "driver":
        return "device.driver"
    if choice == "dyn":
        return _lookup(draw, "attributes", IDS)
    if choice == "concat":
        return f"({e_string(draw, depth - 1)} + {e_string(draw, depth - 1)})"
    case = draw(st.sampled_from(("lowerAscii", "upperAscii")))
    return f"{e_string(draw, depth - 1)}.{case}()"


def e_quantity(draw: st.DrawFn, depth: int) -> str:
    options = ["literal", "capacity"]
    if depth > 0:
        options += ["add", "sub"]
    choice = draw(st.sampled_from(options))
    if choice == "literal":
        text = draw(st.sampled_from(QUANTITIES + BAD_QUANTITIES[:2]))
        return f"quantity({_quote(text)})"
    if choice == "capacity":
        return _lookup(draw, "capacity", CAPACITY_IDS)
    other = draw(st.sampled_from((e_quantity, e_int)))
    return f"{e_quantity(draw, depth - 1)}.{choice}({other(draw, depth - 1)})"


def e_semver(draw: st.DrawFn, depth: int) -> str:
    choice = draw(st.sampled_from(("literal", "normalized", "dyn")))
    if choice == "dyn":
        return _lookup(draw, "attributes", ("cc", "family", "model"))
    text = draw(st.sampled_from(VERSIONS + BAD_VERSIONS))
    if choice == "normalized":
        return f"semver({_quote(text)}, {draw(st.sampled_from(('true', 'false')))})"
    return f"semver({_quote(text)})"


def _operand(draw: st.DrawFn, kind: str, depth: int) -> str:
    return KINDS[kind](draw, depth) if kind in KINDS else _literal(draw, kind)


def b_compare(draw: st.DrawFn, depth: int) -> str:
    kind = draw(st.sampled_from(("int", "string", "dyn", "quantity", "semver", "bool")))
    right = kind if draw(st.integers(0, 9)) else _any_kind(draw)  # 1 in 10: mixed types
    op = draw(st.sampled_from(COMPARISONS))
    left = _operand(draw, kind, depth - 1)
    if kind == "dyn":  # a dynamic value beside a literal of any type
        return f"{left} {op} {_literal(draw, draw(st.sampled_from(('int', 'string', 'bool'))))}"
    return f"{left} {op} {_operand(draw, right, depth - 1)}"


def b_quantity(draw: st.DrawFn, depth: int) -> str:
    method = draw(st.sampled_from(("isGreaterThan", "isLessThan", "isInteger", "compareTo")))
    q = e_quantity(draw, depth - 1)
    if method == "isInteger":
        return f"{q}.isInteger()"
    other = e_quantity(draw, depth - 1) if draw(st.integers(0, 9)) else e_int(draw, depth - 1)
    if method == "compareTo":
        return f"{q}.compareTo({other}) {draw(st.sampled_from(COMPARISONS))} 0"
    return f"{q}.{method}({other})"


def b_semver(draw: st.DrawFn, depth: int) -> str:
    method = draw(st.sampled_from(("isGreaterThan", "isLessThan", "compareTo", "isSemver")))
    if method == "isSemver":
        text = _quote(draw(st.sampled_from(VERSIONS + BAD_VERSIONS)))
        flag = draw(st.sampled_from(("", ", true", ", false")))
        return f"isSemver({text}{flag})"
    left, right = e_semver(draw, depth - 1), e_semver(draw, depth - 1)
    if method == "compareTo":
        return f"{left}.compareTo({right}) {draw(st.sampled_from(COMPARISONS))} 0"
    return f"{left}.{method}({right})"


def b_string(draw: st.DrawFn, depth: int) -> str:
    method = draw(st.sampled_from(("startsWith", "endsWith", "contains", "matches", "isQuantity")))
    if method == "isQuantity":
        return f"isQuantity({_quote(draw(st.sampled_from(QUANTITIES + BAD_QUANTITIES)))})"
    pattern = draw(st.sampled_from(("H", "^h1", "[0-9]+", "(", "example")))
    argument = _quote(pattern) if draw(st.integers(0, 4)) else e_string(draw, depth - 1)
    return f"{e_string(draw, depth - 1)}.{method}({argument})"


def b_membership(draw: st.DrawFn, depth: int) -> str:
    kind = draw(st.sampled_from(("int", "string")))
    items = ", ".join(_literal(draw, kind) for _ in range(draw(st.integers(0, 3))))
    left = _operand(draw, draw(st.sampled_from((kind, "dyn"))), depth - 1)
    if draw(st.integers(0, 3)) == 0:  # membership in a domain's map of attributes
        return f"{_quote(draw(st.sampled_from(IDS)))} in device.attributes[{_quote(DRIVERS[0])}]"
    return f"{left} in [{items}]"


def b_has(draw: st.DrawFn, depth: int) -> str:
    field, ids = draw(st.sampled_from((("attributes", IDS), ("capacity", CAPACITY_IDS))))
    domain, ident = draw(st.sampled_from(DOMAINS)), draw(st.sampled_from(ids))
    return f"has(device.{field}[{_quote(domain)}].{ident})"


def b_bind(draw: st.DrawFn, depth: int) -> str:
    domain = _quote(draw(st.sampled_from(DOMAINS)))
    ident = draw(st.sampled_from(IDS))
    body = draw(
        st.sampled_from(
            (
                f"has(a.{ident}) && a.{ident} == {_literal(draw, 'string')}",
                f"a.{ident} {draw(st.sampled_from(COMPARISONS))} {_literal(draw, 'int')}",
                f"!has(a.{ident}) || {b_expr(draw, depth - 1)}",
            )
        )
    )
    if draw(st.booleans()):
        return f"cel.bind(a, device.attributes[{domain}], {body})"
    q = e_quantity(draw, depth - 1)
    return f"cel.bind(q, {q}, q.isGreaterThan(quantity('1')) || q.compareTo(q) == 0)"


def b_logic(draw: st.DrawFn, depth: int) -> str:
    shape = draw(st.sampled_from(("and", "or", "not", "cond")))
    left, right = b_expr(draw, depth - 1), b_expr(draw, depth - 1)
    if shape == "and":
        return f"({left} && {right})"
    if shape == "or":
        return f"({left} || {right})"
    if shape == "not":
        return f"!({left})"
    return f"({b_expr(draw, depth - 1)} ? {left} : {right})"


def b_leaf(draw: st.DrawFn, depth: int) -> str:
    return draw(
        st.sampled_from(
            (
                "true",
                "false",
                f"device.driver == {_quote(draw(st.sampled_from(DRIVERS)))}",
                b_has(draw, depth),
            )
        )
    )


def b_expr(draw: st.DrawFn, depth: int) -> str:
    if depth <= 0:
        return b_leaf(draw, depth)
    grammar = draw(st.sampled_from(BOOL_GRAMMARS))
    return grammar(draw, depth)


KINDS: dict[str, Grammar] = {
    "int": e_int,
    "string": e_string,
    "quantity": e_quantity,
    "semver": e_semver,
    "dyn": lambda draw, depth: _lookup(draw, "attributes", IDS),
    "bool": b_expr,
}
BOOL_GRAMMARS: tuple[Grammar, ...] = (
    b_leaf,
    b_compare,
    b_compare,
    b_quantity,
    b_semver,
    b_string,
    b_membership,
    b_has,
    b_bind,
    b_logic,
    b_logic,
)

# Expressions Kubernetes rejects before seeing a device, or whose cost it refuses.
BROKEN: tuple[Callable[[str], str], ...] = (
    lambda e: e + ")",  # syntax
    lambda e: f"({e}",
    lambda e: f"{e} &&",
    lambda e: f"gpu.model == 'x' || {e}",  # undeclared variable
    lambda e: f"{e} && device.name == 'x'",  # unknown field of device
    lambda e: f"{e} && device.allowMultipleAllocations",  # feature-gated field, off
    lambda e: f"{e} || device.driver.split('.').size() > 1",  # function not in the library
    lambda e: f"{e} && quantity('1').mul(2).isInteger()",
    lambda e: f"{e} || foo(1)",
    lambda e: f"{e} ? 1 : 2",  # result is not a bool
    lambda e: "device.driver",
)


def EXPENSIVE(e: str) -> str:
    """Worst-case cost over 1,000,000: four nested loops over the attribute domains."""
    return (
        "device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, "
        f"device.attributes.all(d, {e}))))"
    )


@st.composite
def selectors(draw: st.DrawFn) -> str:
    expression = b_expr(draw, draw(st.integers(1, 4)))
    if draw(st.integers(0, 4)) == 0:
        expression = draw(st.sampled_from(BROKEN))(expression)
    elif draw(st.integers(0, 19)) == 0:
        expression = EXPENSIVE(expression)
    return expression


# --------------------------------------------------------------------------- verdicts


def python_class(expression: str, device: dict[str, Any]) -> tuple[str, str]:
    """This package's verdict, as one of the classes the module docstring defines."""
    try:
        compile_selector(expression)
    except SelectorError as error:
        refused_for_cost = error.cause.startswith("estimated cost")
        return ("cost" if refused_for_cost else "compile", error.cause)
    outcome, reason = matching.evaluate(expression, device_view(device))
    if outcome == matching.ERROR and reason.startswith("exceeded the cost limit"):
        return ("cost", reason)
    classes = {
        matching.MATCH: "true",
        matching.FALSE: "false",
        matching.MISSING: "missing",
        matching.ERROR: "runtime",
        matching.UNUSABLE: "unusable",  # never generated: devices here are valid
    }
    return (classes[outcome], reason)


def kubernetes_class(oracle: Oracle, expression: str, device: dict[str, Any]) -> tuple[str, str]:
    verdict = oracle.judge(expression, oracle_device(device))
    if verdict.outcome == "runtime" and verdict.message.startswith("no such key"):
        return ("missing", verdict.message)
    return (verdict.outcome, verdict.message)


# Functions of Kubernetes' CEL environment this package does not provide (extended
# strings, lists, regex, url/ip/cidr/format libraries): an "undeclared reference" here.
KUBERNETES_ONLY_FUNCTIONS = frozenset(
    {"split", "replace", "indexOf", "lastIndexOf", "join", "substring", "trim", "charAt",
     "reverse", "quote", "format", "isSorted", "sum", "min", "max", "find", "findAll",
     "url", "isURL", "ip", "isIP", "cidr", "isCIDR", "optional"}
)  # fmt: skip
_UNDECLARED = re.compile(r"undeclared reference to function '(\w+)'")


_COMPUTED_RIGHT = re.compile(r"==\s*[^=]*\.(add|sub)\(")


def known_divergence(
    kubernetes: tuple[str, str], python: tuple[str, str], expression: str = ""
) -> str | None:
    """The design's name ("Known divergences") for what these two verdicts show, or None."""
    (k_class, k_message), (p_class, p_message) = kubernetes, python
    if p_class == "cost" and k_class != "cost":
        return "a stricter cost limit"
    type_checked = "found no matching overload" in k_message or "must evaluate to bool" in k_message
    if k_class == "compile" and type_checked and p_class != "compile":
        return "no type checker"
    if k_class == "compile" and "invalid matches argument" in k_message and p_class != "compile":
        return "regular expressions checked at evaluation"
    if (
        k_class == "runtime"
        and k_message == "no such overload"
        and _COMPUTED_RIGHT.search(expression)
    ):
        return "computed quantity on the right of =="
    undeclared = _UNDECLARED.search(p_message)
    if (
        p_class == "compile"
        and k_class != "compile"
        and undeclared
        and undeclared.group(1) in KUBERNETES_ONLY_FUNCTIONS
    ):
        return "functions not provided"
    return None


# --------------------------------------------------------------------------- the test


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracle]:
    """One oracle process for the module; a missing binary fails (run `make setup`)."""
    log = Path(tmp_path_factory.mktemp("cel-oracle")) / "stderr.log"
    running = Oracle(log)
    yield running
    running.stop()


def test_python_and_kubernetes_agree_on_random_selectors(oracle: Oracle) -> None:
    seen: list[tuple[str, str]] = []
    divergences: dict[str, int] = {}

    @settings(
        max_examples=EXAMPLES,
        derandomize=not LONG,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(selectors(), st.lists(devices(), min_size=CASES_PER_EXAMPLE, max_size=CASES_PER_EXAMPLE))
    def agree(expression: str, cases: list[dict[str, Any]]) -> None:
        for device in cases:
            kubernetes = kubernetes_class(oracle, expression, device)
            python = python_class(expression, device)
            seen.append((kubernetes[0], python[0]))
            if kubernetes[0] == python[0]:
                continue
            listed = known_divergence(kubernetes, python, expression)
            assert listed is not None, (
                f"{expression!r} on {device}: Kubernetes {kubernetes}, here {python}; "
                f"oracle log: {oracle.stderr()}"
            )
            divergences[listed] = divergences.get(listed, 0) + 1

    agree()
    assert len(seen) >= MIN_CASES
    classes = {k for k, _ in seen}
    # The grammar reaches every class, so none of them goes untested.
    assert classes >= {"true", "false", "missing", "compile", "runtime", "cost"}, classes
    print(f"cel parity: {len(seen)} cases, divergences (listed) {divergences}")


# Each listed divergence, pinned: (expression, Kubernetes' class, this package's class).
DIVERGENCES = [
    pytest.param(
        "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9].all(a, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].all(b, "
        "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9].all(c, a + b + c >= 0)))", "true", "cost",
        id="a stricter cost limit: three comprehensions nested over ten elements are refused here",
    ),
    pytest.param(
        'device.driver > 1 || true', "compile", "true",
        id="no type checker: an ill-typed operand is absorbed by || here",
    ),
    pytest.param(
        '"a" != 1', "compile", "true", id="no type checker: mixed-type literals compare here"
    ),
    pytest.param(
        'device.driver.split(".").size() == 3', "true", "compile",
        id="functions not provided: extended strings are undeclared here",
    ),
    pytest.param(
        'device.driver.matches("(")', "compile", "runtime",
        id="regular expressions checked at evaluation: a bad literal pattern",
    ),
    pytest.param(
        'quantity("1k") == quantity("1Ki").add(3)', "runtime", "false",
        id="computed quantity on the right of ==: an error in Kubernetes, false here",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("expression", "kubernetes", "python"), DIVERGENCES)
def test_known_divergence(oracle: Oracle, expression: str, kubernetes: str, python: str) -> None:
    device = {"driver": DRIVERS[0], "attributes": {}, "capacity": {}}
    k8s, here = kubernetes_class(oracle, expression, device), python_class(expression, device)
    assert (k8s[0], here[0]) == (kubernetes, python)
    assert known_divergence(k8s, here, expression) is not None
