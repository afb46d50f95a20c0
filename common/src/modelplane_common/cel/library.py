"""The CEL function library of DRA device selectors and CEL's own operator semantics.

What Kubernetes adds to CEL for device selectors (quantities, semantic
versions, ``lowerAscii``/``upperAscii``) and where celpy's operators differ
from CEL's specification (heterogeneous equality, commutative ``&&``/``||``
absorbing errors, a conditional that propagates an error), as one function
table handed to every compiled program, plus the names the static checker
accepts.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError, base_functions

from modelplane_common.cel.errors import CelValueError
from modelplane_common.cel.quantity import Quantity
from modelplane_common.cel.semver import Semver

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def no_overload(name: str, *args: Any) -> TypeError:
    kinds = ", ".join(type(a).__name__ for a in args)
    return TypeError(f"no such overload: {name}({kinds})")


def _cel_int(value: int) -> ct.IntType:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise CelValueError("integer overflow")
    return ct.IntType(value)


def _quantity(text: Any) -> Quantity:
    if not isinstance(text, str):
        raise no_overload("quantity", text)
    return Quantity.parse(str(text))


def _is_quantity(text: Any) -> ct.BoolType:
    if not isinstance(text, str):
        raise no_overload("isQuantity", text)
    try:
        Quantity.parse(str(text))
    except CelValueError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def _is_bool_or_none(value: Any) -> bool:
    return value is None or isinstance(value, (bool, ct.BoolType))


def _semver(text: Any, normalize: Any = None) -> Semver:
    if not isinstance(text, str) or not _is_bool_or_none(normalize):
        raise no_overload("semver", text, normalize)
    return Semver.parse(str(text), bool(normalize))


def _is_semver(text: Any, normalize: Any = None) -> ct.BoolType:
    if not isinstance(text, str) or not _is_bool_or_none(normalize):
        raise no_overload("isSemver", text, normalize)
    try:
        Semver.parse(str(text), bool(normalize))
    except CelValueError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def _same_kind(name: str, a: Any, b: Any) -> None:
    if not (
        (isinstance(a, Quantity) and isinstance(b, Quantity))
        or (isinstance(a, Semver) and isinstance(b, Semver))
    ):
        raise no_overload(name, a, b)


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
            raise no_overload(name, v)
        return ct.IntType(getattr(v, name))

    part.__name__ = name
    return part


def _need_quantity(name: str, q: Any) -> Quantity:
    if not isinstance(q, Quantity):
        raise no_overload(name, q)
    return q


def _quantity_operand(name: str, q: Any, other: Any) -> Fraction:
    if isinstance(other, Quantity):
        return other.value
    if isinstance(other, ct.IntType) and not isinstance(other, ct.BoolType):
        return Fraction(int(other))
    raise no_overload(name, q, other)


def _whole_sum(q: Quantity, other: Any) -> bool:
    """Kubernetes adds two int64-held quantities at the smaller scale (an int counts as
    scale 0), so a sum is whole when both operands are; otherwise it is not."""
    return q.whole and (not isinstance(other, Quantity) or other.whole)


def _add(q: Any, other: Any) -> Quantity:
    q = _need_quantity("add", q)
    return Quantity(q.value + _quantity_operand("add", q, other), _whole_sum(q, other))


def _sub(q: Any, other: Any) -> Quantity:
    q = _need_quantity("sub", q)
    return Quantity(q.value - _quantity_operand("sub", q, other), _whole_sum(q, other))


def _sign(q: Any) -> ct.IntType:
    q = _need_quantity("sign", q)
    return ct.IntType((q.value > 0) - (q.value < 0))


def _is_integer(q: Any) -> ct.BoolType:
    q = _need_quantity("isInteger", q)
    v = q.value
    return ct.BoolType(q.whole and _INT64_MIN <= v.numerator <= _INT64_MAX)


def _as_integer(q: Any) -> ct.IntType:
    q = _need_quantity("asInteger", q)
    if not q.whole:
        raise CelValueError("cannot convert value to integer")
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
            raise no_overload(name, s)
        table = str.maketrans(
            "abcdefghijklmnopqrstuvwxyz" if upper else "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if upper else "abcdefghijklmnopqrstuvwxyz",
        )
        return ct.StringType(str(s).translate(table))

    convert.__name__ = name
    return convert


def category(v: Any) -> str:
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
    kind = category(a)
    if kind != category(b):
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
    # Kubernetes' Quantity and Semver refuse to be compared with anything else (but
    # null): cel-go asks the left operand, so `quantity == 1` is an error while
    # `1 == quantity` is false.
    if isinstance(a, (Quantity, Semver)) and b is not None and type(b) is not type(a):
        raise no_overload("_==_", a, b)
    return ct.BoolType(_equal(a, b))


def _cel_ne(a: Any, b: Any) -> Any:
    """cel-go's ``!=`` is "not equal to true": where ``==`` is an error between two
    values (a quantity or version against another type), ``!=`` is true."""
    for v in (a, b):
        if isinstance(v, CELEvalError):
            return v
    try:
        return ct.BoolType(not _cel_eq(a, b))
    except TypeError:
        return ct.BoolType(True)


def _ordering(name: str) -> Any:
    """CEL's ``<``/``<=``/``>``/``>=``: only between values of one kind (numbers of any
    width count as one); celpy alone would order a bool against an int."""
    base = base_functions[name]

    def operator(a: Any, b: Any) -> Any:
        for v in (a, b):
            if isinstance(v, CELEvalError):
                return v
        if isinstance(a, (Quantity, Semver)) or category(a) != category(b):
            raise no_overload(name, a, b)
        return base(a, b)

    operator.__name__ = name
    return operator


def _cel_add(a: Any, b: Any) -> Any:
    """CEL's ``+``: numbers, strings, bytes, lists (and time) of one kind; celpy alone adds
    two bools as ints and returns a plain Python str that has no CEL methods."""
    for v in (a, b):
        if isinstance(v, CELEvalError):
            return v
    timed = isinstance(a, ct.TimestampType) or isinstance(b, ct.TimestampType)
    mixed = isinstance(a, (ct.BoolType, Quantity, Semver)) or category(a) != category(b)
    if mixed and not timed:
        raise no_overload("_+_", a, b)
    result = a + b
    return ct.StringType(result) if type(result) is str else result


def _arithmetic(name: str) -> Any:
    """CEL's ``-``/``*``/``/``/``%``: an error operand is the result (the left one
    first), and bools are not numbers (celpy alone would compute ``true - false``)."""
    base = base_functions[name]

    def operator(a: Any, b: Any) -> Any:
        for v in (a, b):
            if isinstance(v, CELEvalError):
                return v
        if isinstance(a, (ct.BoolType, Quantity, Semver)) or isinstance(b, ct.BoolType):
            raise no_overload(name, a, b)
        return base(a, b)

    operator.__name__ = name
    return operator


def _cel_in(item: Any, container: Any) -> Any:
    """CEL's ``in``: list membership by CEL equality (so `1 in ["a"]` is false, and a
    quantity or version against anything else is an error), map membership by key."""
    for v in (item, container):
        if isinstance(v, CELEvalError):
            return v
    if isinstance(container, ct.MapType):
        return ct.BoolType(any(_equal(item, key) for key in container))
    if not isinstance(container, ct.ListType):
        raise no_overload("@in", item, container)
    for element in container:
        if _cel_eq(item, element):
            return ct.BoolType(True)
    return ct.BoolType(False)


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
        raise no_overload(name, x, y)

    operator.__name__ = name
    return operator


def _conditional(condition: Any, when_true: Any, when_false: Any) -> Any:
    if isinstance(condition, CELEvalError):
        return condition
    if not isinstance(condition, ct.BoolType):
        raise no_overload("_?_:_", condition, when_true, when_false)
    return when_true if condition else when_false


FUNCTIONS: dict[str, Any] = {
    "_?_:_": _conditional,
    "_&&_": _logical("_&&_", absorbing=False),
    "_||_": _logical("_||_", absorbing=True),
    "_==_": _cel_eq,
    "_!=_": _cel_ne,
    "_<_": _ordering("_<_"),
    "_<=_": _ordering("_<=_"),
    "_>_": _ordering("_>_"),
    "_>=_": _ordering("_>=_"),
    "_in_": _cel_in,
    "_+_": _cel_add,
    "_-_": _arithmetic("_-_"),
    "_*_": _arithmetic("_*_"),
    "_/_": _arithmetic("_/_"),
    "_%_": _arithmetic("_%_"),
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
    "sign": _sign,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_approximate_float,
    "lowerAscii": _ascii_case("lowerAscii", upper=False),
    "upperAscii": _ascii_case("upperAscii", upper=True),
}

MACROS = frozenset({"has", "dyn", "all", "exists", "exists_one", "map", "filter"})
BINDING_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
KNOWN_FUNCTIONS = frozenset(
    {name for name in base_functions if name[0] not in "_!-"} | set(FUNCTIONS) | MACROS
)
TYPE_NAMES = frozenset(
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
DEVICE_FIELDS = frozenset({"driver", "attributes", "capacity"})
