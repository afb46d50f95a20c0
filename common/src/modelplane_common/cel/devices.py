"""Evaluate DRA device selectors on devices, and match requests to pool device kinds.

A *device* here is anything CEL can see as ``device``: a pool's declared
device kind (a :class:`~modelplane_common.devices.DeviceKind`, read from
``nodePools[].devices[]``) when the scheduler places work, or a device a
ResourceSlice publishes (``{driver, attributes, capacity}``) when the agent
counts free devices. Either is reduced to a hashable :data:`DeviceView`
(``modelplane_common.devices``), so identical devices share one evaluation.

A member requests devices (typed :class:`~modelplane_common.devices.DeviceRequest`
values, read from ``nodeSelector.devices[]``); :func:`match_requests` decides
which kind satisfies each request, evaluating selectors the way Kubernetes DRA
does (see the package docstring for the CEL model).

Public interface: :class:`KindMatch`, :func:`match_requests`,
:func:`selector_matches`, :func:`all_selectors_match`, :func:`evaluate`,
:func:`device_view`, :func:`cache_info` and :func:`clear_caches`;
:class:`SelectorError` and :func:`compile_selector` are re-exported from their modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError

from modelplane_common.cel.celenv import compile_selector
from modelplane_common.cel.cost import CostExceeded
from modelplane_common.cel.errors import CelValueError, SelectorError
from modelplane_common.cel.library import category
from modelplane_common.cel.quantity import Quantity
from modelplane_common.cel.semver import Semver

# DeviceView and device_view are defined with the device types; re-exported for the agent.
from modelplane_common.devices import DeviceKind, DeviceRequest, DeviceView, device_view

__all__ = [
    "DeviceView",
    "KindMatch",
    "SelectorError",
    "all_selectors_match",
    "cache_info",
    "clear_caches",
    "compile_selector",
    "device_view",
    "evaluate",
    "match_requests",
    "selector_matches",
]

_EVAL_CACHE_SIZE = 8192
_DEVICE_CACHE_SIZE = 1024


@dataclass(frozen=True, slots=True)
class KindMatch:
    request: str  # the request's name
    kind: str  # the pool device kind's name
    count: int  # devices per pod (the request's count)
    claimed: bool  # False when the kind is Synthetic (matched for placement, never claimed)


# --------------------------------------------------------------------------- devices


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
            except CelValueError as error:
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
        except CelValueError as error:
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

# The outcomes of one selector on one device. MISSING (a "no such key" on a
# missing attribute or capacity) and UNUSABLE (the device's own data is invalid)
# decide like FALSE: the device does not match. ERROR is a selector that is wrong
# (does not compile, or a type error): the caller fails loudly.
MATCH, FALSE, MISSING, UNUSABLE, ERROR = "match", "false", "missing", "unusable", "error"
_DOES_NOT_MATCH = frozenset({FALSE, MISSING, UNUSABLE})


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
    if isinstance(cause, type) and issubclass(cause, CelValueError) and detail:
        return "; ".join(str(d) for d in detail)
    if detail:
        message = f"{message}: {'; '.join(str(d) for d in detail)}"
    return message


@lru_cache(maxsize=_EVAL_CACHE_SIZE)
def evaluate(expression: str, view: DeviceView) -> tuple[str, str]:
    """(outcome, reason) of one selector on one device view, cached. Never raises.

    The outcome is one of MATCH, FALSE, MISSING, UNUSABLE, ERROR (see above).
    """
    try:
        program = compile_selector(expression)
    except SelectorError as error:
        return (ERROR, error.cause)
    activation = _activation(view)
    if isinstance(activation, str):
        return (UNUSABLE, activation)
    try:
        result = program.evaluate(activation)
    except CELEvalError as error:
        if _is_missing_key(error):
            return (MISSING, _describe(error))
        return (ERROR, _describe(error))
    except CostExceeded as error:
        return (ERROR, str(error))
    except RecursionError:
        return (ERROR, "nested too deeply")
    except Exception as error:  # a celpy internal error or an unsupported feature
        return (ERROR, f"{type(error).__name__}: {error}")
    if not isinstance(result, ct.BoolType):
        return (ERROR, f"must evaluate to bool, not {category(result)}")
    return (MATCH, "") if result else (FALSE, "evaluated to false")


def selector_matches(expression: str, kind: DeviceKind) -> bool:
    """Whether one selector is true for one pool device kind (cached).

    False when it is false or fails with a "no such key" error; raises
    :class:`SelectorError` when it does not compile or fails with a type error.
    """
    outcome, reason = evaluate(expression, kind.view)
    if outcome == ERROR:
        raise SelectorError(expression, reason)
    return outcome == MATCH


def cache_info() -> dict[str, Any]:
    """Hit/miss counters of the compile and evaluation caches (``functools`` CacheInfo)."""
    return {"compile": compile_selector.cache_info(), "evaluate": evaluate.cache_info()}


def clear_caches() -> None:
    """Drop every compiled program and evaluation result (for tests)."""
    compile_selector.cache_clear()
    evaluate.cache_clear()
    _activation.cache_clear()


# --------------------------------------------------------------------------- matching


def match_requests(
    requests: Sequence[DeviceRequest], kinds: Sequence[DeviceKind]
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
    wanted: list[tuple[str, int, list[int]]] = []
    for request in requests:
        name, count = request.name, request.count
        candidates = []
        for index, kind in enumerate(kinds):
            if all_selectors_match(request.selectors, kind.view) and 1 <= count <= kind.count:
                candidates.append(index)
        same_name = [i for i in candidates if kinds[i].name == name][:1]
        ordered = same_name + [i for i in candidates if i not in same_name]
        if not ordered:
            return None
        wanted.append((name, count, ordered))

    assignment = _assign(wanted, [k.count for k in kinds])
    if assignment is None:
        return None
    return tuple(
        KindMatch(request=name, kind=kinds[index].name, count=count, claimed=kinds[index].claimed)
        for (name, count, _), index in zip(wanted, assignment, strict=True)
    )


def all_selectors_match(expressions: tuple[str, ...], view: DeviceView) -> bool:
    """Whether every selector is true for one device view, as the DRA allocator decides.

    Selectors are evaluated in order and the first false (or missing key) decides.
    Raises :class:`SelectorError` for a selector that does not compile or fails
    with a type error.
    """
    for expression in expressions:
        outcome, reason = evaluate(expression, view)
        if outcome == ERROR:
            raise SelectorError(expression, reason)
        if outcome in _DOES_NOT_MATCH:
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
