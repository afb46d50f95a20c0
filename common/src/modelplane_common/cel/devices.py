"""Match a member's device requests to the device kinds a node pool declares.

A pool declares device KINDS (``nodePools[].devices[]``): ``{name, claim, driver,
deviceClassName, count, attributes, capacity}``. A ModelDeployment member requests
devices (``nodeSelector.devices[]``): ``{name, count, selectors[].cel.expression}``.
This module decides which kind satisfies each request by evaluating the request's
CEL selectors against each kind the way Kubernetes DRA evaluates a device selector:

* the only variable is ``device`` with ``device.driver``,
  ``device.attributes[domain].<id>`` and ``device.capacity[domain].<id>``; a
  qualified name ``gpu.nvidia.com/productName`` splits at its first ``/`` into
  domain and id, an unqualified name belongs to the kind's driver domain;
* an unknown domain reads as an empty map, an unknown id inside a domain is an
  evaluation error ("no such key"): the kind does not match;
* ``quantity()``/``isQuantity()`` and capacity values are Kubernetes quantities
  (``compareTo``, ``isGreaterThan``, ``isLessThan``, ``add``, ``sub``, ``mul``,
  ``sign``, ``asInteger``, ``isInteger``, ``asApproximateFloat``);
* ``semver()``/``isSemver()`` and version attributes are semantic versions
  (``compareTo``, ``isGreaterThan``, ``isLessThan``, ``major``, ``minor``, ``patch``);
* ``cel.bind(var, init, body)`` is available, as in Kubernetes.

The CEL engine is cel-python (``celpy``); see design/cel-matching.md for why, and
for every place where this diverges from Kubernetes.

Public interface: :class:`SelectorError`, :class:`KindMatch`, :func:`match_requests`,
:func:`compile_selector`. :func:`selector_matches`, :func:`device_view`, :func:`cache_info`
and :func:`clear_caches` are helpers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import celpy
import celpy.celtypes as ct
import lark
from celpy.evaluation import CELEvalError, Evaluator, base_functions

__all__ = [
    "KindMatch",
    "SelectorError",
    "cache_info",
    "clear_caches",
    "compile_selector",
    "device_view",
    "match_requests",
    "selector_matches",
]

# Kubernetes caps a DRA CEL selector at 10 Ki characters (the XRD does too).
MAX_EXPRESSION_LENGTH = 10 * 1024
_COMPILE_CACHE_SIZE = 1024
_EVAL_CACHE_SIZE = 8192
_DEVICE_CACHE_SIZE = 1024


class SelectorError(ValueError):
    """A selector that does not compile, or fails at evaluation with a type error.

    The message names the expression and the cause.
    """

    def __init__(self, expression: str, cause: str) -> None:
        shown = expression if len(expression) <= 200 else expression[:200] + "..."
        super().__init__(f"CEL selector {shown!r}: {cause}")
        self.expression = expression
        self.cause = cause


@dataclass(frozen=True, slots=True)
class KindMatch:
    request: str  # the request's name
    kind: str  # the pool device kind's name
    count: int  # devices per pod (the request's count)
    claimed: bool  # False when the kind is Synthetic (matched for placement, never claimed)


# --------------------------------------------------------------------------- quantity


class _CelValueError(ValueError):
    """A CEL library function rejected its argument (bad quantity or version string...).

    A ValueError subclass so that celpy turns it into a CEL error value (which
    ``&&``/``||`` may absorb) instead of aborting the evaluation.
    """


_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY_RE = re.compile(
    r"([+-]?)(\d+(?:\.\d*)?|\.\d+)"
    r"(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?"
)
_NANO = 10**9
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class Quantity:
    """A Kubernetes resource.Quantity, held exactly as a rational number.

    Parsing follows ``resource.ParseQuantity``'s grammar (signed decimal number,
    then a binary-SI, decimal-SI or ``e<exp>`` suffix). Values finer than 1n are
    rounded up to 1n, as Kubernetes does. There is no upper bound (Kubernetes
    refuses or clamps values beyond its int64-scaled range).
    """

    __slots__ = ("value",)

    def __init__(self, value: Fraction) -> None:
        scaled = value * _NANO
        if scaled.denominator != 1:
            value = Fraction(math.ceil(scaled), _NANO)
        self.value = value

    @classmethod
    def parse(cls, text: str) -> Quantity:
        match = _QUANTITY_RE.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise _CelValueError(
                f"quantities must match the regular expression of resource.Quantity, got {text!r}"
            )
        sign, number, suffix, exponent = match.groups()
        value = Fraction(number)
        if suffix in _BINARY_SUFFIXES:
            value *= 1024 ** _BINARY_SUFFIXES[suffix]
        elif suffix in _DECIMAL_SUFFIXES:
            value *= Fraction(10) ** _DECIMAL_SUFFIXES[suffix]
        elif exponent is not None:
            if abs(int(exponent)) > 1000:
                raise _CelValueError(f"quantity exponent out of range in {text!r}")
            value *= Fraction(10) ** int(exponent)
        return cls(-value if sign == "-" else value)

    def cmp(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(("quantity", self.value))

    def __repr__(self) -> str:
        return f"Quantity({self.value})"


# --------------------------------------------------------------------------- semver

_NUM = r"(0|[1-9]\d*)"
_IDENTS = r"[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*"
_SEMVER_RE = re.compile(rf"{_NUM}\.{_NUM}\.{_NUM}(?:-({_IDENTS}))?(?:\+({_IDENTS}))?")


class Semver:
    """A strict semantic version (semver.org 2.0.0), as Kubernetes' blang/semver parses it."""

    __slots__ = ("build", "major", "minor", "patch", "pre")

    def __init__(
        self, major: int, minor: int, patch: int, pre: tuple[str | int, ...], build: str
    ) -> None:
        self.major, self.minor, self.patch, self.pre, self.build = major, minor, patch, pre, build

    @classmethod
    def parse(cls, text: str, normalize: bool = False) -> Semver:
        if not isinstance(text, str):
            raise _CelValueError(f"semver needs a string, got {text!r}")
        source = text
        if normalize:
            text = _normalize_semver(text)
        match = _SEMVER_RE.fullmatch(text)
        if match is None:
            raise _CelValueError(f"invalid semantic version {source!r}")
        major, minor, patch, pre, build = match.groups()
        identifiers: list[str | int] = []
        for part in pre.split(".") if pre else ():
            if part.isdigit():
                if len(part) > 1 and part.startswith("0"):
                    raise _CelValueError(
                        f"invalid semantic version {source!r}: "
                        f"numeric prerelease {part!r} has a leading zero"
                    )
                identifiers.append(int(part))
            else:
                identifiers.append(part)
        return cls(int(major), int(minor), int(patch), tuple(identifiers), build or "")

    def _key(self) -> tuple:
        # A release sorts after all its prereleases; numeric identifiers sort before
        # alphanumeric ones; a shorter prerelease sorts first when it is a prefix.
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, not self.pre, pre)

    def cmp(self, other: Semver) -> int:
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(("semver", self._key()))

    def __repr__(self) -> str:
        pre = "-" + ".".join(map(str, self.pre)) if self.pre else ""
        build = "+" + self.build if self.build else ""
        return f"Semver({self.major}.{self.minor}.{self.patch}{pre}{build})"


def _normalize_semver(text: str) -> str:
    """Kubernetes' semver(s, true): drop a leading v, leading zeros, fill in .0 parts."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or not part[0].isdigit():
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise _CelValueError(f"short version {text!r} cannot carry prerelease or build data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


# --------------------------------------------------------------------------- CEL library


def _no_overload(name: str, *args: Any) -> TypeError:
    kinds = ", ".join(type(a).__name__ for a in args)
    return TypeError(f"no such overload: {name}({kinds})")


def _cel_int(value: int) -> ct.IntType:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise _CelValueError("integer overflow")
    return ct.IntType(value)


def _quantity(text: Any) -> Quantity:
    if not isinstance(text, str):
        raise _no_overload("quantity", text)
    return Quantity.parse(str(text))


def _is_quantity(text: Any) -> ct.BoolType:
    if not isinstance(text, str):
        raise _no_overload("isQuantity", text)
    try:
        Quantity.parse(str(text))
    except _CelValueError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def _is_bool_or_none(value: Any) -> bool:
    return value is None or isinstance(value, (bool, ct.BoolType))


def _semver(text: Any, normalize: Any = None) -> Semver:
    if not isinstance(text, str) or not _is_bool_or_none(normalize):
        raise _no_overload("semver", text, normalize)
    return Semver.parse(str(text), bool(normalize))


def _is_semver(text: Any, normalize: Any = None) -> ct.BoolType:
    if not isinstance(text, str) or not _is_bool_or_none(normalize):
        raise _no_overload("isSemver", text, normalize)
    try:
        Semver.parse(str(text), bool(normalize))
    except _CelValueError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def _same_kind(name: str, a: Any, b: Any) -> None:
    if not (
        (isinstance(a, Quantity) and isinstance(b, Quantity))
        or (isinstance(a, Semver) and isinstance(b, Semver))
    ):
        raise _no_overload(name, a, b)


def _compare_to(a: Any, b: Any) -> ct.IntType:
    _same_kind("compareTo", a, b)
    return ct.IntType(a.cmp(b))


def _is_greater_than(a: Any, b: Any) -> ct.BoolType:
    _same_kind("isGreaterThan", a, b)
    return ct.BoolType(a.cmp(b) == 1)


def _is_less_than(a: Any, b: Any) -> ct.BoolType:
    _same_kind("isLessThan", a, b)
    return ct.BoolType(a.cmp(b) == -1)


def _semver_part(name: str) -> Any:
    def part(v: Any) -> ct.IntType:
        if not isinstance(v, Semver):
            raise _no_overload(name, v)
        return ct.IntType(getattr(v, name))

    part.__name__ = name
    return part


def _need_quantity(name: str, q: Any) -> Quantity:
    if not isinstance(q, Quantity):
        raise _no_overload(name, q)
    return q


def _quantity_operand(name: str, q: Any, other: Any) -> Fraction:
    if isinstance(other, Quantity):
        return other.value
    if isinstance(other, ct.IntType) and not isinstance(other, ct.BoolType):
        return Fraction(int(other))
    raise _no_overload(name, q, other)


def _add(q: Any, other: Any) -> Quantity:
    q = _need_quantity("add", q)
    return Quantity(q.value + _quantity_operand("add", q, other))


def _sub(q: Any, other: Any) -> Quantity:
    q = _need_quantity("sub", q)
    return Quantity(q.value - _quantity_operand("sub", q, other))


def _mul(q: Any, factor: Any) -> Quantity:
    q = _need_quantity("mul", q)
    if not isinstance(factor, ct.IntType) or isinstance(factor, ct.BoolType):
        raise _no_overload("mul", q, factor)
    return Quantity(q.value * int(factor))


def _sign(q: Any) -> ct.IntType:
    q = _need_quantity("sign", q)
    return ct.IntType((q.value > 0) - (q.value < 0))


def _is_integer(q: Any) -> ct.BoolType:
    q = _need_quantity("isInteger", q)
    v = q.value
    return ct.BoolType(v.denominator == 1 and _INT64_MIN <= v.numerator <= _INT64_MAX)


def _as_integer(q: Any) -> ct.IntType:
    q = _need_quantity("asInteger", q)
    if q.value.denominator != 1:
        raise _CelValueError("cannot convert value to integer")
    return _cel_int(q.value.numerator)


def _as_approximate_float(q: Any) -> ct.DoubleType:
    q = _need_quantity("asApproximateFloat", q)
    try:
        return ct.DoubleType(float(q.value))
    except OverflowError:
        return ct.DoubleType(math.copysign(math.inf, q.value))


def _ascii_case(name: str, upper: bool) -> Any:
    def convert(s: Any) -> ct.StringType:
        if not isinstance(s, str):
            raise _no_overload(name, s)
        table = str.maketrans(
            "abcdefghijklmnopqrstuvwxyz" if upper else "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if upper else "abcdefghijklmnopqrstuvwxyz",
        )
        return ct.StringType(str(s).translate(table))

    convert.__name__ = name
    return convert


def _category(v: Any) -> str:
    if isinstance(v, ct.BoolType):
        return "bool"
    if isinstance(v, (ct.IntType, ct.UintType, ct.DoubleType)):
        return "number"
    if isinstance(v, ct.StringType):
        return "string"
    if isinstance(v, ct.BytesType):
        return "bytes"
    if isinstance(v, ct.MapType):
        return "map"
    if isinstance(v, ct.ListType):
        return "list"
    if v is None:
        return "null"
    return type(v).__name__


def _equal(a: Any, b: Any) -> bool:
    """CEL heterogeneous equality: values of different kinds are unequal, numbers compare
    by value across int/uint/double, lists and maps element-wise."""
    kind = _category(a)
    if kind != _category(b):
        return False
    if kind == "number":
        return (
            float(a) == float(b)
            if isinstance(a, float) or isinstance(b, float)
            else int(a) == int(b)
        )
    if kind == "list":
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if kind == "map":
        if len(a) != len(b):
            return False
        for key, value in a.items():
            other = next((v for k, v in b.items() if _equal(k, key)), _MISSING)
            if other is _MISSING or not _equal(value, other):
                return False
        return True
    return bool(a == b)


_MISSING = object()


def _cel_eq(a: Any, b: Any) -> Any:
    if isinstance(a, CELEvalError):
        return a
    if isinstance(b, CELEvalError):
        return b
    return ct.BoolType(_equal(a, b))


def _cel_ne(a: Any, b: Any) -> Any:
    result = _cel_eq(a, b)
    return result if isinstance(result, CELEvalError) else ct.BoolType(not result)


def _logical(name: str, absorbing: bool) -> Any:
    """CEL's commutative ``&&``/``||``: the absorbing value wins over errors on either side,
    otherwise an error operand is the result (the left one first)."""

    def operator(x: Any, y: Any) -> Any:
        if isinstance(x, ct.BoolType) and isinstance(y, ct.BoolType):
            return ct.BoolType(bool(x) and bool(y)) if not absorbing else ct.BoolType(x or y)
        for v in (x, y):
            if isinstance(v, ct.BoolType) and bool(v) is absorbing:
                return ct.BoolType(absorbing)
        for v in (x, y):
            if isinstance(v, CELEvalError):
                return v
        raise _no_overload(name, x, y)

    operator.__name__ = name
    return operator


def _conditional(condition: Any, when_true: Any, when_false: Any) -> Any:
    if isinstance(condition, CELEvalError):
        return condition
    if not isinstance(condition, ct.BoolType):
        raise _no_overload("_?_:_", condition, when_true, when_false)
    return when_true if condition else when_false


_FUNCTIONS: dict[str, Any] = {
    "_?_:_": _conditional,
    "_&&_": _logical("_&&_", absorbing=False),
    "_||_": _logical("_||_", absorbing=True),
    "_==_": _cel_eq,
    "_!=_": _cel_ne,
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _compare_to,
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "major": _semver_part("major"),
    "minor": _semver_part("minor"),
    "patch": _semver_part("patch"),
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "sign": _sign,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_approximate_float,
    "lowerAscii": _ascii_case("lowerAscii", upper=False),
    "upperAscii": _ascii_case("upperAscii", upper=True),
}

_MACROS = frozenset({"has", "dyn", "all", "exists", "exists_one", "map", "filter"})
_BINDING_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_KNOWN_FUNCTIONS = frozenset(
    {name for name in base_functions if name[0] not in "_!-"} | set(_FUNCTIONS) | _MACROS
)
_TYPE_NAMES = frozenset(
    {
        "bool",
        "bytes",
        "double",
        "duration",
        "int",
        "list",
        "map",
        "null_type",
        "string",
        "timestamp",
        "uint",
        "type",
        "dyn",
    }
)
_DEVICE_FIELDS = frozenset({"driver", "attributes", "capacity"})


# --------------------------------------------------------------------------- cel.bind


def _ident_name(tree: Any) -> str | None:
    """The identifier a ``member``/``expr`` subtree consists of, if it is only that."""
    node = tree
    while isinstance(node, lark.Tree):
        if node.data == "ident":
            return str(node.children[0])
        if len(node.children) != 1:
            return None
        node = node.children[0]
    return None


def _is_cel_bind(tree: lark.Tree) -> bool:
    return (
        len(tree.children) >= 2
        and str(tree.children[1]) == "bind"
        and _ident_name(tree.children[0]) == "cel"
    )


class _Evaluator(Evaluator):
    """celpy's interpreter plus the ``cel.bind(var, init, body)`` macro Kubernetes enables."""

    def sub_evaluator(self, ast: lark.Tree) -> Evaluator:
        return _Evaluator(ast, activation=self.activation)

    def member_dot_arg(self, tree: lark.Tree) -> Any:
        if not _is_cel_bind(tree):
            return super().member_dot_arg(tree)
        var_tree, init_tree, body_tree = tree.children[2].children
        init = self.visit(init_tree)
        if isinstance(init, CELEvalError):
            return init
        try:
            return self.sub_evaluator(body_tree).evaluate({_ident_name(var_tree): init})
        except CELEvalError as error:
            return error


class _Runner(celpy.InterpretedRunner):
    def evaluate(self, context: Any) -> Any:
        return _Evaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)


_ENV = celpy.Environment(runner_class=_Runner)


def _walk(tree: lark.Tree) -> Iterator[lark.Tree]:
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in reversed(node.children) if isinstance(c, lark.Tree))


def _check(expression: str, ast: lark.Tree) -> None:
    """Compile-time checks celpy leaves to evaluation but Kubernetes' type checker makes:
    unknown functions, undeclared identifiers, unknown fields of ``device``, macro shape."""
    bound: set[str] = set()
    for node in _walk(ast):
        if node.data == "member_dot_arg":
            name = str(node.children[1])
            args = node.children[2].children if len(node.children) > 2 else []
            if _is_cel_bind(node):
                var = _ident_name(args[0]) if len(args) == 3 else None
                if var is None:
                    raise SelectorError(expression, "cel.bind needs (identifier, init, body)")
                bound.add(var)
            elif name in _BINDING_MACROS and args:
                var = _ident_name(args[0])
                if len(args) != 2 or var is None:
                    raise SelectorError(expression, f"{name}() needs (identifier, expression)")
                bound.add(var)
    for node in _walk(ast):
        if node.data == "member_dot_arg" and not _is_cel_bind(node):
            name = str(node.children[1])
            if name not in _KNOWN_FUNCTIONS:
                raise SelectorError(expression, f"undeclared reference to function {name!r}")
        elif node.data == "ident_arg":
            name = str(node.children[0])
            if name not in _KNOWN_FUNCTIONS:
                raise SelectorError(expression, f"undeclared reference to function {name!r}")
        elif node.data == "ident":
            name = str(node.children[0])
            if name not in bound and name not in _TYPE_NAMES and name not in {"device", "cel"}:
                raise SelectorError(expression, f"undeclared reference to {name!r}")
        elif node.data == "member_dot" and _ident_name(node.children[0]) == "device":
            field = str(node.children[1])
            if "device" not in bound and field not in _DEVICE_FIELDS:
                raise SelectorError(
                    expression,
                    f"undefined field {field!r} (device has driver, attributes, capacity)",
                )


@lru_cache(maxsize=_COMPILE_CACHE_SIZE)
def compile_selector(expression: str) -> celpy.Runner:
    """Compile one selector expression into a reusable program (cached by expression).

    Raises :class:`SelectorError` when the expression does not parse, is too long, or
    references a function, variable or ``device`` field that does not exist.
    """
    if not isinstance(expression, str) or not expression.strip():
        raise SelectorError(str(expression), "the expression is empty")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise SelectorError(expression, f"longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        ast = _ENV.compile(expression)
    except celpy.CELParseError as error:
        raise SelectorError(expression, "does not parse: " + " ".join(str(error).split())) from None
    except RecursionError:
        raise SelectorError(expression, "nested too deeply") from None
    _check(expression, ast)
    return _ENV.program(ast, functions=_FUNCTIONS)


# --------------------------------------------------------------------------- devices

# A hashable, order-independent view of what a selector can see of a kind: the
# driver, (name, type, value) attribute triples and (name, value) capacity pairs.
# A kind's name, count and claim mode are not visible to CEL and are not part of it,
# so identical device kinds in different pools or clusters share cache entries.
DeviceView = tuple[str, tuple[tuple[str, str, Any], ...], tuple[tuple[str, str], ...]]

_ATTRIBUTE_TYPES = ("string", "int", "bool", "version")


def _attribute_entry(name: str, raw: Any) -> tuple[str, str, Any]:
    if isinstance(raw, Mapping):
        present = [t for t in _ATTRIBUTE_TYPES if raw.get(t) is not None]
        if len(present) != 1 or len(raw) != 1:
            return (name, "invalid", repr(sorted(raw)))
        kind = present[0]
        value = raw[kind]
    elif isinstance(raw, bool):  # lenient: a bare scalar carries its own type
        kind, value = "bool", raw
    elif isinstance(raw, int):
        kind, value = "int", raw
    elif isinstance(raw, str):
        kind, value = "string", raw
    else:
        return (name, "invalid", repr(raw))
    expected = {"string": str, "version": str, "bool": bool, "int": int}[kind]
    if not isinstance(value, expected) or (kind == "int" and isinstance(value, bool)):
        return (name, "invalid", repr(value))
    return (name, kind, value)


def _capacity_entry(name: str, raw: Any) -> tuple[str, str]:
    value = raw.get("value") if isinstance(raw, Mapping) else raw  # lenient: bare quantity
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return (name, f"invalid:{value!r}")
    return (name, str(value) if not isinstance(value, float) else repr(value))


def device_view(kind: Mapping) -> DeviceView:
    """The part of a pool device kind a selector can see, frozen and hashable."""
    attributes = kind.get("attributes") or {}
    capacity = kind.get("capacity") or {}
    return (
        str(kind.get("driver") or ""),
        tuple(sorted(_attribute_entry(str(n), v) for n, v in dict(attributes).items())),
        tuple(sorted(_capacity_entry(str(n), v) for n, v in dict(capacity).items())),
    )


class _DomainMap(ct.MapType):
    """``device.attributes`` / ``device.capacity``: an unknown domain reads as an empty map."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            if isinstance(key, str):
                return ct.MapType({})
            raise


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


@lru_cache(maxsize=_DEVICE_CACHE_SIZE)
def _activation(view: DeviceView) -> dict[str, Any] | str:
    """The ``device`` variable for a view, or why the kind's own data is unusable."""
    driver, attributes, capacity = view
    attribute_maps: dict[str, dict] = {}
    for name, kind, value in attributes:
        if kind == "invalid":
            return f"attribute {name}: exactly one of string, int, bool, version, got {value}"
        if kind == "version":
            try:
                cel_value: Any = Semver.parse(value)
            except _CelValueError as error:
                return f"attribute {name}: {error}"
        elif kind == "int":
            cel_value = ct.IntType(value)
        elif kind == "bool":
            cel_value = ct.BoolType(value)
        else:
            cel_value = ct.StringType(value)
        domain, ident = _split(name, driver)
        attribute_maps.setdefault(domain, {})[ct.StringType(ident)] = cel_value
    capacity_maps: dict[str, dict] = {}
    for name, raw in capacity:
        if raw.startswith("invalid:"):
            return f"capacity {name}: not a quantity: {raw.removeprefix('invalid:')}"
        try:
            quantity = Quantity.parse(raw)
        except _CelValueError as error:
            return f"capacity {name}: {error}"
        domain, ident = _split(name, driver)
        capacity_maps.setdefault(domain, {})[ct.StringType(ident)] = quantity
    device = ct.MapType(
        {
            ct.StringType("driver"): ct.StringType(driver),
            ct.StringType("attributes"): _DomainMap(
                {ct.StringType(d): ct.MapType(m) for d, m in attribute_maps.items()}
            ),
            ct.StringType("capacity"): _DomainMap(
                {ct.StringType(d): ct.MapType(m) for d, m in capacity_maps.items()}
            ),
        }
    )
    return {"device": device}


# --------------------------------------------------------------------------- evaluation

_MATCH, _NO_MATCH, _ERROR = "match", "no-match", "error"


def _is_missing_key(error: CELEvalError) -> bool:
    message = str(error.args[0]) if error.args else ""
    cause = error.args[1] if len(error.args) > 1 else None
    return (
        isinstance(cause, type)
        and issubclass(cause, KeyError)
        and not message.startswith("undeclared reference")
    )


def _describe(error: CELEvalError) -> str:
    message = str(error.args[0]) if error.args else "evaluation error"
    cause = error.args[1] if len(error.args) > 1 else None
    detail = error.args[2] if len(error.args) > 2 else None
    if isinstance(cause, type) and issubclass(cause, _CelValueError) and detail:
        return "; ".join(str(d) for d in detail)
    if detail:
        message = f"{message}: {'; '.join(str(d) for d in detail)}"
    return message


@lru_cache(maxsize=_EVAL_CACHE_SIZE)
def _evaluate(expression: str, view: DeviceView) -> tuple[str, str]:
    """(outcome, reason) of one selector on one device view, cached. Never raises."""
    try:
        program = compile_selector(expression)
    except SelectorError as error:
        return (_ERROR, error.cause)
    activation = _activation(view)
    if isinstance(activation, str):
        return (_NO_MATCH, activation)  # the kind's own data is unusable: no match
    try:
        result = program.evaluate(activation)
    except CELEvalError as error:
        if _is_missing_key(error):
            return (_NO_MATCH, _describe(error))
        return (_ERROR, _describe(error))
    except RecursionError:
        return (_ERROR, "nested too deeply")
    except Exception as error:  # a celpy internal error or an unsupported feature
        return (_ERROR, f"{type(error).__name__}: {error}")
    if not isinstance(result, ct.BoolType):
        return (_ERROR, f"must evaluate to bool, not {_category(result)}")
    return (_MATCH, "") if result else (_NO_MATCH, "evaluated to false")


def selector_matches(expression: str, kind: Mapping) -> bool:
    """Whether one selector is true for one pool device kind (cached).

    False when it is false or fails with a "no such key" error; raises
    :class:`SelectorError` when it does not compile or fails with a type error.
    """
    outcome, reason = _evaluate(expression, device_view(kind))
    if outcome == _ERROR:
        raise SelectorError(expression, reason)
    return outcome == _MATCH


def cache_info() -> dict[str, Any]:
    """Hit/miss counters of the compile and evaluation caches (``functools`` CacheInfo)."""
    return {"compile": compile_selector.cache_info(), "evaluate": _evaluate.cache_info()}


def clear_caches() -> None:
    """Drop every compiled program and evaluation result (for tests)."""
    compile_selector.cache_clear()
    _evaluate.cache_clear()
    _activation.cache_clear()


# --------------------------------------------------------------------------- matching


def _expressions(request: Mapping) -> tuple[str, ...]:
    expressions = []
    for selector in request.get("selectors") or ():
        cel = selector.get("cel") if isinstance(selector, Mapping) else selector
        if isinstance(cel, Mapping):
            cel = cel.get("expression")
        if not isinstance(cel, str):
            raise SelectorError(repr(selector), "a selector needs cel.expression (a string)")
        expressions.append(cel)
    return tuple(expressions)


def _int(value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return value


def match_requests(
    requests: Sequence[Mapping], kinds: Sequence[Mapping]
) -> tuple[KindMatch, ...] | None:
    """Which pool device kind satisfies each of one pod's device requests.

    Returns one :class:`KindMatch` per request, in request order, or None when the
    requests cannot all be satisfied by one node of the pool.

    * A request matches a kind when every selector evaluates to true for it (no
      selectors: any kind) and the kind's per-node ``count`` is at least the
      request's ``count``.
    * Among matching kinds, the kind named like the request is preferred, then the
      first in the pool's declared order.
    * Requests of one pod may share a kind, but together they may not take more than
      the kind's per-node ``count`` (DRA never gives two requests the same device).
      When the preferred choices overcommit a kind, later preferences are tried in
      order (a deterministic backtracking search); None when nothing fits.
    * Synthetic kinds match like DRA kinds (count included) but ``claimed`` is False.

    Raises :class:`SelectorError` for a selector that does not compile or that fails
    with a type error on some kind. A selector reading a missing attribute or
    capacity simply does not match that kind.
    """
    slots = [
        (str(k.get("name", "")), _int(k.get("count"), 0), k.get("claim", "DRA") != "Synthetic")
        for k in kinds
    ]
    views = [device_view(k) for k in kinds]
    wanted: list[tuple[str, int, list[int]]] = []
    for request in requests:
        name = str(request.get("name", ""))
        count = _int(request.get("count"), 1)
        expressions = _expressions(request)
        candidates = []
        for index, view in enumerate(views):
            if _all_true(expressions, view) and count >= 1 and slots[index][1] >= count:
                candidates.append(index)
        same_name = [i for i in candidates if slots[i][0] == name][:1]
        ordered = same_name + [i for i in candidates if i not in same_name]
        if not ordered:
            return None
        wanted.append((name, count, ordered))

    assignment = _assign(wanted, [count for _, count, _ in slots])
    if assignment is None:
        return None
    return tuple(
        KindMatch(request=name, kind=slots[index][0], count=count, claimed=slots[index][2])
        for (name, count, _), index in zip(wanted, assignment, strict=True)
    )


def _all_true(expressions: tuple[str, ...], view: DeviceView) -> bool:
    # Like the DRA allocator: selectors in order, the first false (or missing key) decides.
    for expression in expressions:
        outcome, reason = _evaluate(expression, view)
        if outcome == _ERROR:
            raise SelectorError(expression, reason)
        if outcome == _NO_MATCH:
            return False
    return True


def _assign(wanted: list[tuple[str, int, list[int]]], capacity: list[int]) -> list[int] | None:
    """The first assignment, in preference order, whose per-kind sums fit the counts."""
    used = [0] * len(capacity)
    chosen: list[int] = []
    failed: set[tuple[int, tuple[int, ...]]] = set()

    def place(position: int) -> bool:
        if position == len(wanted):
            return True
        state = (position, tuple(used))
        if state in failed:
            return False
        _, count, ordered = wanted[position]
        for index in ordered:
            if used[index] + count <= capacity[index]:
                used[index] += count
                chosen.append(index)
                if place(position + 1):
                    return True
                chosen.pop()
                used[index] -= count
        failed.add(state)
        return False

    return chosen if place(0) else None
