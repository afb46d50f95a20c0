"""What a function's core says back to the user: conditions and events.

Pure values; `emit` is the one place that writes them onto a response.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


_KEPT_METADATA = ("name", "namespace", "labels", "annotations")


def unchanged(observed: Mapping) -> dict:
    """An observed composed resource as desired state: identity, labels and spec only.

    How every function keeps what it observed but did not (or could not)
    decide about. Server-set metadata (uid, resourceVersion, managedFields,
    owners) and status are never applied back. Tolerates any shape: a
    resource that is kept must be kept even when it is malformed.
    """
    meta = observed.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    out: dict = {
        "apiVersion": observed.get("apiVersion"),
        "kind": observed.get("kind"),
        "metadata": {k: meta[k] for k in _KEPT_METADATA if k in meta},
    }
    if "spec" in observed:
        out["spec"] = observed["spec"]
    return out


def log_fields(conditions: Iterable[Condition], events: Iterable[Event]) -> dict[str, object]:
    """A decision's conditions and events as a few log fields (`logs.py`)."""
    listed = list(events)
    return {
        "conditions": {c.type: f"{c.status}/{c.reason}" for c in conditions},
        "events": len(listed),
        "warnings": sum(1 for e in listed if e.severity == "Warning"),
    }
