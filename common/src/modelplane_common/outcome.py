"""What a core says back to the user: conditions and events.

Pure values, shared by the functions and the agent; nothing here imports the
Function SDK, so the agent's image carries neither it nor grpcio nor protobuf
(`modelplane_common.respond.emit` is the one place that writes them onto a
RunFunctionResponse).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# The longest message any of our conditions, events, Fatal results or status
# reasons carries (the XRDs' `maxLength` on such fields), in characters.
MAX_MESSAGE = 1024


def capped(message: str) -> str:
    """A message cut to MAX_MESSAGE characters: the one cap every writer applies."""
    return message[:MAX_MESSAGE]


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
