"""What a function's core says back to the user: conditions and events.

Pure values; `emit` is the one place that writes them onto a response.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from crossplane.function import resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Event:
    severity: str  # "Normal" | "Warning"
    message: str


def emit(
    rsp: fnv1.RunFunctionResponse, conditions: Iterable[Condition], events: Iterable[Event]
) -> None:
    """Write conditions onto the XR and events as function results."""
    response.set_conditions(
        rsp,
        *(
            resource.Condition(typ=c.type, status=c.status, reason=c.reason, message=c.message)
            for c in conditions
        ),
    )
    for event in events:
        (response.warning if event.severity == "Warning" else response.normal)(rsp, event.message)
