"""Network-attached devices: which nodes a device published for no single node serves.

Model (design/observation.md, "The agent's rules, precisely")
    Besides a node's own slices (`nodeName`), kube-scheduler's allocator offers a
    claim on node N every device of a slice that serves N: one with `allNodes`,
    one whose `nodeSelector` matches N, or, in a slice with
    `perDeviceNodeSelection`, each device whose own `nodeName` is N, whose
    `allNodes` is set or whose `nodeSelector` matches N
    (k8s.io/dynamic-resource-allocation structured `GatherPools` and
    `NodeMatches`, the same in v1.35, v1.36 and v1.37).

    A device pinned to one node by its own `nodeName` that consumes no counter
    serves that node alone: it counts there like the node's own
    (`devices.DeviceIndex.pinned`). Any other such device serves many nodes
    at once. Counted on each, the fleet would place a pod on it from every
    node it serves, where kube-scheduler gives it to one claim; counted on
    one, the count would depend on a choice the allocator does not make. So
    the agent counts it on no node's vector, and says so: a node a free
    network-attached device of one of the pool's kinds serves names
    `NETWORK_ATTACHED` among its uncounted devices (`devices`), and the
    pool's condition reads True/`NetworkAttachedDevices`. A claim there may
    get more than the vector says: an under-count, declared.

A node selector matches as core/v1's does: when any of its terms does; a term
when every requirement holds (a term with none matches no node); label
requirements `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt` (integers);
field requirements on `metadata.name` with `In` or `NotIn`. A selector the
agent cannot read (`Reach.unreadable`, an unknown operator or field) is taken
to serve the node: it only adds the declaration, never a device.
"""

from __future__ import annotations

from collections.abc import Mapping

from modelplane_agent.snapshot import Node, Reach, Requirement, Term


class _Unreadable(Exception):
    """A requirement of a shape the agent cannot judge."""


def serves(reach: Reach, node: Node) -> bool:
    """Whether a device of this `reach` is offered to claims on `node`."""
    if reach.node:
        return reach.node == node.name
    if reach.all_nodes or reach.unreadable:
        return True
    try:
        return any(_term_matches(term, node) for term in reach.terms)
    except _Unreadable:
        return True


def _term_matches(term: Term, node: Node) -> bool:
    if not term.expressions and not term.fields:
        return False
    fields = {"metadata.name": node.name}
    return all(_holds(r, node.labels) for r in term.expressions) and all(
        _holds(r, fields, field=True) for r in term.fields
    )


def _holds(requirement: Requirement, values: Mapping[str, str], field: bool = False) -> bool:
    """Whether one requirement holds of a node's labels (or, `field`, its fields)."""
    key, operator, wanted = requirement
    if field and (key != "metadata.name" or operator not in ("In", "NotIn")):
        raise _Unreadable(key)
    present = key in values
    value = values.get(key)
    if operator == "In":
        return present and value in wanted
    if operator == "NotIn":
        return not present or value not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            held, bound = int(str(value)), int(wanted[0])
        except ValueError:
            return False
        return held > bound if operator == "Gt" else held < bound
    if operator in ("Gt", "Lt"):
        return False
    raise _Unreadable(operator)
