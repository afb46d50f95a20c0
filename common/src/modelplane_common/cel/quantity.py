"""Kubernetes resource quantities as CEL values (``quantity()``, device capacity)."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from modelplane_common.cel.errors import CelValueError

_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY_RE = re.compile(
    r"([+-]?)(\d+(?:\.\d*)?|\.\d*)?"
    r"(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?"
)
_NANO = 10**9
_INT64_MAX = 2**63 - 1


def _held_as_whole_int64(number: str, binary_exponent: int | None, exponent: int) -> bool:
    """Whether ``resource.ParseQuantity`` stores the value as an int64 with a
    non-negative decimal scale, the only form whose ``AsInt64`` (CEL ``isInteger``,
    ``asInteger``) succeeds: so "1.0", "2000m" and "1.5Gi" are not integers there."""
    whole, _, fraction = number.partition(".")
    whole = whole.lstrip("0") or "0"
    if binary_exponent is not None:
        if fraction or 15 - len(whole) - int(binary_exponent * 3 / 10) - 1 < 0:
            return False
        return int(whole) << binary_exponent <= _INT64_MAX
    scale = exponent - len(fraction)
    if 18 - len(whole + fraction) < 0 or scale < 0:
        return False
    return int(whole + fraction) * 10**scale <= _INT64_MAX


class Quantity:
    """A Kubernetes resource.Quantity, held exactly as a rational number.

    Parsing follows ``resource.ParseQuantity``'s grammar (signed decimal number,
    then a binary-SI, decimal-SI or ``e<exp>`` suffix). Values finer than 1n are
    rounded up to 1n, as Kubernetes does. There is no upper bound (Kubernetes
    refuses or clamps values beyond its int64-scaled range).
    """

    __slots__ = ("value", "whole")

    def __init__(self, value: Fraction, whole: bool | None = None) -> None:
        scaled = value * _NANO
        if scaled.denominator != 1:
            value = Fraction(math.ceil(scaled), _NANO)
        self.value = value
        # Kubernetes' isInteger/asInteger depend on how it holds the value (see
        # _held_as_whole_int64); a computed quantity is whole when its value is.
        if whole is None:
            whole = value.denominator == 1 and abs(value.numerator) <= _INT64_MAX
        self.whole = whole

    @classmethod
    def parse(cls, text: str) -> Quantity:
        # ParseQuantity reads a missing number as 0 ("Gi", "-", "." are quantities).
        match = _QUANTITY_RE.fullmatch(text) if isinstance(text, str) and text else None
        if match is None:
            raise CelValueError(
                f"quantities must match the regular expression of resource.Quantity, got {text!r}"
            )
        sign, number, suffix, exponent = match.groups()
        number = number or ""
        value = Fraction(number if number.strip(".") else "0")
        binary, power = None, 0
        if suffix in _BINARY_SUFFIXES:
            binary = 10 * _BINARY_SUFFIXES[suffix]
            value *= 2**binary
        elif suffix in _DECIMAL_SUFFIXES:
            power = _DECIMAL_SUFFIXES[suffix]
        elif exponent is not None:
            if abs(int(exponent)) > 1000:
                raise CelValueError(f"quantity exponent out of range in {text!r}")
            power = int(exponent)
        value *= Fraction(10) ** power
        whole = _held_as_whole_int64(number, binary, power)
        return cls(-value if sign == "-" else value, whole)

    def cmp(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(("quantity", self.value))

    def __repr__(self) -> str:
        return f"Quantity({self.value})"
