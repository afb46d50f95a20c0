"""Conditions on the wire: a transition time that means "since when".

A condition keeps its previous `lastTransitionTime` while its status holds
(reason and message may change under it, as in Kubernetes' own
conditions), and takes `now` when the status flips.
"""

from __future__ import annotations

from datetime import datetime

from modelplane_common.inputs import condition_in
from modelplane_common.outcome import Condition
from modelplane_common.timeutil import format_time


def stamp(condition: Condition, previous: object, now: datetime, generation: int) -> dict:
    """The wire form of `condition`, given the status' previous `conditions` list."""
    before = condition_in(previous, condition.type)
    since = format_time(now)
    if before.get("status") == condition.status and isinstance(
        before.get("lastTransitionTime"), str
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
