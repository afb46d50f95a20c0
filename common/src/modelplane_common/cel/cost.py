"""The cost limit of a selector: a worst-case estimate at compile time, a budget at run time.

Kubernetes bounds a DRA selector twice: its cost estimator refuses an
expression whose worst case is over a limit when the claim is created, and
the evaluator stops one that spends more than the limit. Selectors here are
written by tenants and evaluated by the shared scheduler, so they are bounded
the same two ways, in one unit, the *step*:

* evaluating one node of the syntax tree costs one step (celpy interprets
  the tree node by node; `_Evaluator._visit_tree` in `celenv` is where every
  node passes), and
* a node that computes a value (`computes`: every node but those that only
  pass their one child's value on) costs one more step per `SIZE_UNIT`
  characters or elements of a string, bytes, list or map value (building,
  copying or scanning a value is proportional to its size; Kubernetes
  charges string traversal the same way, 0.1 per character).

`estimate` bounds the steps of one evaluation from the syntax tree alone, on
any device: a comprehension (`all`, `exists`, `exists_one`, `map`,
`filter`) costs its body once per element of the largest collection its
range can be, so nested comprehensions multiply; ``+`` adds the sizes of its
operands. Collection and string sizes are bounded by what they come from: a
literal by its length, anything read from ``device`` by `DEVICE_VALUE_SIZE`
(Kubernetes' own limits on a published device), a bound variable by the
value it is bound to. The estimate is an upper bound of the run-time count
for the library here, except for ``string()``/``bytes()`` of a collection
(its rendering is counted as the collection's size); the run-time budget
charges the real sizes, so that case is still bounded.

`Budget` counts the steps of one evaluation and raises `CostExceeded` past
its limit; `celenv` gives each evaluation a budget of `MAX_COST`, so a
selector the estimate accepted can only be stopped if the estimate was wrong.
design/cel-matching.md ("Cost limit") gives the figures the limit is chosen
from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import lark

from modelplane_common.cel.check import ident_name, is_cel_bind
from modelplane_common.cel.library import BINDING_MACROS

# The most steps one evaluation of one selector on one device may take (and the most
# the estimate may say). design/cel-matching.md ("Cost limit") says why this figure.
MAX_COST = 10_000
# One step per this many characters or elements of a value (Kubernetes: 0.1 a character).
SIZE_UNIT = 10
# The longest string, and the largest map, a device holds: Kubernetes allows at most 32
# attributes and capacities per device and 64 characters per string or version value
# (k8s.io/api/resource: ResourceSliceMaxAttributesAndCapacitiesPerDevice,
# DeviceAttributeMaxValueLength); domains and qualified names are shorter than 64 too.
DEVICE_VALUE_SIZE = 64

_STRING_TOKENS = frozenset({"STRING_LIT", "MLSTRING_LIT", "BYTES_LIT"})


class CostExceeded(Exception):
    """An evaluation spent more steps than its budget.

    Deliberately not a ValueError, TypeError or KeyError: celpy turns those into
    CEL error values that ``&&``/``||`` may absorb, and a budget must stop the
    whole evaluation.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(f"exceeded the cost limit of {limit} steps while evaluating")
        self.limit = limit


class Budget:
    """The steps one evaluation may still take."""

    __slots__ = ("limit", "spent")

    def __init__(self, limit: int = MAX_COST) -> None:
        self.limit = limit
        self.spent = 0

    def spend(self, steps: int) -> None:
        self.spent += steps
        if self.spent > self.limit:
            raise CostExceeded(self.limit)


_COLLECTIONS = frozenset({"list_lit", "map_lit", "exprlist", "mapinits", "fieldinits"})


def computes(tree: lark.Tree) -> bool:
    """Whether a node computes its value (a literal, collection, operator, call, index or
    field), rather than only passing on the value of its one child (``expr`` around a
    plain ``conditionalor``, ``primary``, ``paren_expr``, an ``ident`` naming a variable)."""
    if tree.data in _COLLECTIONS or tree.data == "literal":
        return True
    if tree.data == "primary":
        # celpy evaluates a primary's literal, collection or call in place, never visiting
        # that child: the primary is where such a value is made.
        child = tree.children[0] if tree.children else None
        return getattr(child, "data", None) not in {"ident", "paren_expr"}
    return tree.data != "ident" and len(tree.children) != 1


def value_steps(tree: lark.Tree, value: Any) -> int:
    """What a node's value costs beyond its step: one step per SIZE_UNIT characters or
    elements, for a node that computes it."""
    if isinstance(value, str | bytes | list | dict) and computes(tree):
        return len(value) // SIZE_UNIT
    return 0


@dataclass(frozen=True, slots=True)
class Estimate:
    cost: int  # the most steps evaluating the subtree takes
    size: int  # the longest string, list or map (at any depth) its value can hold


_SCALAR = Estimate(cost=0, size=0)


def estimate(ast: lark.Tree) -> int:
    """The most steps one evaluation of a compiled selector can take, on any device."""
    return _estimate(ast, {"device": DEVICE_VALUE_SIZE}).cost


def _estimate(node: Any, bound: Mapping[str, int]) -> Estimate:
    """Steps and value size of one subtree, given the sizes of the variables in scope."""
    if not isinstance(node, lark.Tree):
        return _token(node)
    if node.data == "member_dot_arg" and is_cel_bind(node):
        return _bind(node, bound)
    if node.data == "member_dot_arg" and str(node.children[1]) in BINDING_MACROS:
        return _comprehension(node, bound)
    if node.data == "ident":
        return Estimate(cost=1, size=bound.get(str(node.children[0]), 0))
    parts = [_estimate(child, bound) for child in node.children]
    cost = 1 + sum(p.cost for p in parts)
    largest = max((p.size for p in parts), default=0)
    if node.data in _COLLECTIONS:
        size = max(len(node.children), largest)
    elif node.data == "addition" and _is_concatenation(node):
        size = sum(p.size for p in parts)
    else:
        size = largest
    if node.data in {"relation", "member_dot_arg", "ident_arg", "dot_ident_arg"}:
        # A comparison, membership test or function reads its operands whole.
        cost += sum(p.size for p in parts) // SIZE_UNIT
    return _charged(node, cost, size)


def _token(token: Any) -> Estimate:
    if isinstance(token, lark.Token) and token.type in _STRING_TOKENS:
        return Estimate(cost=0, size=len(token))
    return _SCALAR


def _charged(node: lark.Tree, cost: int, size: int) -> Estimate:
    """A node's steps (its own and its children's) plus what its value costs by size."""
    return Estimate(cost=cost + (size // SIZE_UNIT if computes(node) else 0), size=size)


def _is_concatenation(node: lark.Tree) -> bool:
    first = node.children[0] if node.children else None
    return isinstance(first, lark.Tree) and first.data == "addition_add"


def _macro_parts(node: lark.Tree) -> tuple[str | None, Any, Any]:
    args = node.children[2].children if len(node.children) > 2 else []
    if len(args) == 2:
        return ident_name(args[0]), None, args[1]
    if len(args) == 3:
        return ident_name(args[0]), args[1], args[2]
    return None, None, None


def _comprehension(node: lark.Tree, bound: Mapping[str, int]) -> Estimate:
    """``range.m(v, body)``: the body once per element of the largest range, plus one step each."""
    over = _estimate(node.children[0], bound)
    var, _, body_tree = _macro_parts(node)
    if var is None:  # check() refuses this shape; cost it as a plain call
        return _charged(node, 1 + over.cost, over.size)
    body = _estimate(body_tree, {**bound, var: over.size})
    cost = 1 + over.cost + over.size * (body.cost + 1)
    kept = max(over.size, body.size) if str(node.children[1]) == "map" else over.size
    return _charged(node, cost, kept)


def _bind(node: lark.Tree, bound: Mapping[str, int]) -> Estimate:
    """``cel.bind(v, init, body)``: init once, body once with v as large as init."""
    var, init_tree, body_tree = _macro_parts(node)
    if var is None or init_tree is None:  # check() refuses this shape
        return _charged(node, 1, 0)
    init = _estimate(init_tree, bound)
    body = _estimate(body_tree, {**bound, var: init.size})
    return _charged(node, 1 + init.cost + body.cost, body.size)
