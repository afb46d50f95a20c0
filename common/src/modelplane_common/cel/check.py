"""Compile-time checks celpy leaves to evaluation but Kubernetes' type checker makes.

celpy resolves names only when it evaluates, so a misspelt function or field
would surface as an evaluation error on some devices and silently not match
on others. These checks walk the parsed syntax tree (lark) once per
expression instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lark

from modelplane_common.cel.errors import SelectorError
from modelplane_common.cel.library import (
    BINDING_MACROS,
    DEVICE_FIELDS,
    KNOWN_FUNCTIONS,
    TYPE_NAMES,
)


def ident_name(tree: Any) -> str | None:
    """The identifier a ``member``/``expr`` subtree consists of, if it is only that."""
    node = tree
    while isinstance(node, lark.Tree):
        if node.data == "ident":
            return str(node.children[0])
        if len(node.children) != 1:
            return None
        node = node.children[0]
    return None


def is_empty_list_literal(tree: Any) -> bool:
    """Whether a subtree is only the literal ``[]``."""
    node = tree
    while isinstance(node, lark.Tree):
        if node.data == "list_lit":
            return not node.children
        if len(node.children) != 1:
            return False
        node = node.children[0]
    return False


def is_cel_bind(tree: lark.Tree) -> bool:
    return (
        len(tree.children) >= 2
        and str(tree.children[1]) == "bind"
        and ident_name(tree.children[0]) == "cel"
    )


def _walk(tree: lark.Tree) -> Iterator[lark.Tree]:
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in reversed(node.children) if isinstance(c, lark.Tree))


def _bound_variable(expression: str, node: lark.Tree) -> str | None:
    """The variable a cel.bind or a binding macro (all, exists, map, ...) introduces."""
    if node.data != "member_dot_arg":
        return None
    name = str(node.children[1])
    args = node.children[2].children if len(node.children) > 2 else []
    if is_cel_bind(node):
        var = ident_name(args[0]) if len(args) == 3 else None
        if var is None:
            raise SelectorError(expression, "cel.bind needs (identifier, init, body)")
        return var
    if name in BINDING_MACROS and args:
        var = ident_name(args[0])
        if len(args) != 2 or var is None:
            raise SelectorError(expression, f"{name}() needs (identifier, expression)")
        return var
    return None


def _undeclared(node: lark.Tree, bound: set[str]) -> str | None:
    """What is wrong with one node's names given the bound variables, or None."""
    if (node.data == "member_dot_arg" and not is_cel_bind(node)) or node.data == "ident_arg":
        name = str(node.children[1] if node.data == "member_dot_arg" else node.children[0])
        return None if name in KNOWN_FUNCTIONS else f"undeclared reference to function {name!r}"
    if node.data == "ident":
        name = str(node.children[0])
        known = name in bound or name in TYPE_NAMES or name in {"device", "cel"}
        return None if known else f"undeclared reference to {name!r}"
    if node.data == "member_dot" and ident_name(node.children[0]) == "device":
        field = str(node.children[1])
        if "device" not in bound and field not in DEVICE_FIELDS:
            return f"undefined field {field!r} (device has driver, attributes, capacity)"
    return None


def check(expression: str, ast: lark.Tree) -> None:
    """Compile-time checks celpy leaves to evaluation but Kubernetes' type checker makes:
    unknown functions, undeclared identifiers, unknown fields of ``device``, macro shape."""
    bound = {v for node in _walk(ast) if (v := _bound_variable(expression, node)) is not None}
    for node in _walk(ast):
        wrong = _undeclared(node, bound)
        if wrong is not None:
            raise SelectorError(expression, wrong)
