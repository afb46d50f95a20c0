"""Kubernetes resource quantities as CEL values (``quantity()``, device capacity)."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from modelplane_common.cel.errors import CelValueError

_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY_RE = re.compile(
    r"([+-]?)(\d+(?:\.\d*)?|\.\d+)"
    r"(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?"
)
_NANO = 10**9


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
            raise CelValueError(
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
                raise CelValueError(f"quantity exponent out of range in {text!r}")
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
