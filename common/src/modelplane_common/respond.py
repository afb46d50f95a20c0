"""Conditions and events onto a RunFunctionResponse: the functions' side of `outcome`.

`outcome` holds the values, which the agent shares; this module needs the
Function SDK (the `function` extra of modelplane-common), which the agent's
image does not carry.
"""

from __future__ import annotations

from collections.abc import Iterable

from crossplane.function import resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from modelplane_common.outcome import Condition, Event, capped


def emit(
    rsp: fnv1.RunFunctionResponse, conditions: Iterable[Condition], events: Iterable[Event]
) -> None:
    """Write conditions onto the XR and events as function results, each message
    `capped`: the last cap, so no core can emit an oversized one."""
    response.set_conditions(
        rsp,
        *(
            resource.Condition(
                typ=c.type, status=c.status, reason=capped(c.reason), message=capped(c.message)
            )
            for c in conditions
        ),
    )
    for event in events:
        write = response.warning if event.severity == "Warning" else response.normal
        write(rsp, capped(event.message))
