"""Conditions on the wire: a transition time that means "since when".

A condition keeps its previous `lastTransitionTime` while its status holds
(reason and message may change under it, as in Kubernetes' own
conditions), and takes `now` when the status flips.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from modelplane_common.outcome import Condition
from modelplane_common.timeutil import format_time


def previous_condition(conditions: object, kind: str) -> Mapping | None:
    """The condition of one type in a status' `conditions` list, if it is there."""
    if not isinstance(conditions, list):
        return None
    for condition in conditions:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return None


def stamp(condition: Condition, previous: object, now: datetime, generation: int) -> dict:
    """The wire form of `condition`, given the status' previous `conditions` list."""
    before = previous_condition(previous, condition.type)
    since = format_time(now)
    if (
        before is not None
        and before.get("status") == condition.status
        and isinstance(before.get("lastTransitionTime"), str)
    ):
        since = str(before["lastTransitionTime"])
    return {
        "type": condition.type,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }
