"""How deep a pod template may nest: below what every function's protobuf runtime decodes.

A member's pod template is the one part of a ModelDeployment the schema does
not bound (`x-kubernetes-preserve-unknown-fields`): it is copied onto each
ModelReplica and into the workload Objects, and every copy reaches a function
inside a RunFunctionRequest. protobuf's upb runtime refuses to decode a
message nested more than 100 messages deep, and a JSON map costs three of
them in a Struct (Struct, map entry, Value), a list two (ListValue, Value).
Measured on the request shapes the functions receive, a template of 26 nested
maps no longer decodes as the deployment's own composite, 27 as an observed
LeaderWorkerSet Object and 28 as a ModelReplica among the scheduler's
required resources (design/tenancy.md, "Nesting").

So compose-model-deployment refuses a template that nests more than
MAX_TEMPLATE_DEPTH maps and lists (the template itself is level 1): its own
request still decodes, so it can say why (InvalidDeployment), and no replica
or Object it composes nests deep enough to break another request. A real pod
template nests about 10 deep (affinity's matchExpressions values).

`depth` walks iteratively: a value too deep for the protobuf runtime never
reaches it, but nothing here relies on that.
"""

from __future__ import annotations

from collections.abc import Mapping

MAX_TEMPLATE_DEPTH = 20


def depth(value: object) -> int:
    """How many maps and lists nest in value (a scalar is 0, `{}` and `{"a": 1}` are 1)."""
    deepest = 0
    todo: list[tuple[object, int]] = [(value, 0)]
    while todo:
        node, level = todo.pop()
        if isinstance(node, Mapping):
            children: list[object] = list(node.values())
        elif isinstance(node, list | tuple):
            children = list(node)
        else:
            continue
        deepest = max(deepest, level + 1)
        todo.extend((child, level + 1) for child in children)
    return deepest
