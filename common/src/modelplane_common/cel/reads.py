"""Which attributes and capacities of ``device`` a selector can read, found statically.

Real devices differ in attributes no selector looks at (a GPU's ``uuid``,
its PCI address), so evaluating a selector on every device of a cluster
would evaluate it once per device. If every use of ``device`` in the
expression is ``device.driver`` or a literal path
``device.attributes["<domain>"].<id>`` / ``device.attributes["<domain>"]["<id>"]``
(the same for ``capacity``), the selector's result depends only on the driver
and those entries, and devices that agree on them can share one evaluation
(:func:`project`). Any other use of ``device`` (the map passed whole, a
computed key, ``device`` rebound by a macro) makes :func:`device_reads`
answer None: no projection, every device evaluated on its own.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import celpy
import lark

from modelplane_common.cel.celenv import ENV
from modelplane_common.cel.check import ident_name
from modelplane_common.cel.devices import DeviceView

# ("attributes" | "capacity", domain, id)
Read = tuple[str, str, str]


def _parents(tree: lark.Tree) -> dict[int, lark.Tree]:
    parents: dict[int, lark.Tree] = {}
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in node.children:
            if isinstance(child, lark.Tree):
                parents[id(child)] = node
                stack.append(child)
    return parents


def _string_literal(tree: Any) -> str | None:
    """The value of a subtree that is only a plain quoted string literal without escapes."""
    node = tree
    while isinstance(node, lark.Tree):
        if node.data == "literal":
            text = str(node.children[0])
            if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" and "\\" not in text:
                inner = text[1:-1]
                return None if text[0] in inner else inner
            return None
        if len(node.children) != 1:
            return None
        node = node.children[0]
    return None


def _up(node: lark.Tree, parents: dict[int, lark.Tree], data: str) -> lark.Tree | None:
    """The parent of `node` through its ``member`` wrapper, if it is a `data` node."""
    member = parents.get(id(node))
    if member is None or member.data != "member":
        return None
    parent = parents.get(id(member))
    return parent if parent is not None and parent.data == data else None


def _key(node: lark.Tree) -> str | None:
    """The literal key a member_dot or member_index node selects."""
    if node.data == "member_dot":
        return str(node.children[1])
    return _string_literal(node.children[1])


def _read_of(ident: lark.Tree, parents: dict[int, lark.Tree]) -> Read | str | None:
    """What one use of ``device`` reads: a Read, "driver", or None when not a literal path."""
    primary = parents.get(id(ident))
    if primary is None or primary.data != "primary":
        return None
    field = _up(primary, parents, "member_dot")
    if field is None:
        return None
    name = str(field.children[1])
    if name == "driver":
        return "driver"
    if name not in ("attributes", "capacity"):
        return None
    by_domain = _up(field, parents, "member_index")
    domain = None if by_domain is None else _key(by_domain)
    if by_domain is None or domain is None:
        return None
    by_id = _up(by_domain, parents, "member_dot") or _up(by_domain, parents, "member_index")
    ident_key = None if by_id is None else _key(by_id)
    if ident_key is None:
        return None
    return (name, domain, ident_key)


@lru_cache(maxsize=1024)
def device_reads(expression: str) -> frozenset[Read] | None:
    """The entries of ``device`` the expression reads, or None when that cannot be told."""
    try:
        ast = ENV.compile(expression)
    except (celpy.CELParseError, RecursionError):
        return None
    parents = _parents(ast)
    reads: set[Read] = set()
    stack = [ast]
    while stack:
        node = stack.pop()
        stack.extend(c for c in node.children if isinstance(c, lark.Tree))
        if node.data == "member_dot_arg" and node.children[2:]:
            # A macro binding its own variable called "device" shadows ours.
            args = node.children[2].children
            if args and ident_name(args[0]) == "device":
                return None
        if node.data == "ident" and str(node.children[0]) == "device":
            read = _read_of(node, parents)
            if read is None:
                return None
            if read != "driver":
                reads.add(read)  # type: ignore[arg-type]
    return frozenset(reads)


def project(view: DeviceView, reads: frozenset[Read]) -> DeviceView:
    """The view with only the attributes and capacities in `reads` (names resolved as CEL
    does: an unqualified name belongs to the driver's domain)."""
    driver, attributes, capacity = view

    def wanted(kind: str, name: str) -> bool:
        domain, sep, ident = name.partition("/")
        return (kind, domain, ident) in reads if sep else (kind, driver, name) in reads

    return (
        driver,
        tuple(entry for entry in attributes if wanted("attributes", entry[0])),
        tuple(entry for entry in capacity if wanted("capacity", entry[0])),
    )
