"""What a core says back to the user: conditions and events.

Pure values, shared by the functions and the agent; nothing here imports the
Function SDK, so the agent's image carries neither it nor grpcio nor protobuf
(`modelplane_common.respond.emit` is the one place that writes them onto a
RunFunctionResponse).

The one rule for message sizes (design/robustness.md, "Shared rules")
    - A condition message, an event, a Fatal result and a status reason
      carry at most MAX_MESSAGE characters (`capped`).
    - A string read from a workload cluster (an agent's condition message,
      a workload's status) is `capped` once where it is read, so nothing
      downstream ever holds more than MAX_MESSAGE characters of it.
    - A message over many items (pools, defects) names at most MAX_NAMED of
      them and then says "and N more" (`listed`). Items' details (a pool's
      reason) stay whole while the message fits MAX_MESSAGE, else each is
      cut to MAX_DETAIL characters (`within_cap`, `brief`). With the XRDs'
      limits (64 pools of 63-character names, two fallbacks, observed pools
      too) the longest such message stays under MAX_MESSAGE, so its "and N
      more" is never cut off.
    - `respond.emit` caps every condition and event once more, so no
      function can write an oversized one whatever a core built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

# The longest message any of our conditions, events, Fatal results or status
# reasons carries (the XRDs' `maxLength` on such fields), in characters.
MAX_MESSAGE = 1024


# An aggregated message names at most this many items before "and N more".
MAX_NAMED = 3
# Inside an aggregated message, each item's own detail (a pool's reason, say)
# is cut to this many characters; the whole detail is in that item's event.
MAX_DETAIL = 48

_CUT = "..."


def capped(message: str) -> str:
    """A message cut to MAX_MESSAGE characters: the one cap every writer applies."""
    return message[:MAX_MESSAGE]


def brief(detail: str) -> str:
    """An item's detail inside an aggregated message: at most MAX_DETAIL characters,
    marked with "..." when cut."""
    if len(detail) <= MAX_DETAIL:
        return detail
    return detail[: MAX_DETAIL - len(_CUT)] + _CUT


def within_cap(build: Callable[[Callable[[str], str]], str]) -> str:
    """An aggregated message whose items carry details: `build` is given what to do with
    each detail. Details stay whole when the message then fits MAX_MESSAGE; otherwise
    each is `brief`."""
    whole = build(lambda detail: detail)
    return whole if len(whole) <= MAX_MESSAGE else build(brief)


def listed(items: Sequence[str], separator: str = ", ") -> str:
    """The first MAX_NAMED items joined by `separator`, then "and N more" for the rest."""
    named = separator.join(items[:MAX_NAMED])
    rest = len(items) - MAX_NAMED
    return f"{named} and {rest} more" if rest > 0 else named


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
