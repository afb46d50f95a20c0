"""Reports as status documents, and what makes two of them the same.

`observedAt` is stamped `now` here; the shell then bounds it by what the
agent knows to be current (`modelplane_agent.freshness`, which also adds the
`Current` condition after the report's own). Two statuses that differ only in
their times of currency (`observedAt`, and a pool's `replicasCurrentAt`) carry
the same news: the shell writes such a status only as a pool's heartbeat, so
`content` is the comparison key.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from modelplane_common.currency import REPLICAS_CURRENT_AT
from modelplane_common.inputs import condition_in
from modelplane_common.timeutil import format_time

from modelplane_agent.conditions import stamp
from modelplane_agent.pools import PoolReport
from modelplane_agent.replicas import ReplicaReport


def pool_status(
    report: PoolReport,
    kind_names: tuple[str, ...],
    now: datetime,
    previous: Mapping | None,
    generation: int,
) -> dict:
    """A PoolObservation status; an unobservable pool publishes no histogram (null clears it)."""
    previous_conditions = (previous or {}).get("conditions")
    buckets = (
        None
        if report.histogram is None
        else [
            {"free": dict(zip(kind_names, vector, strict=True)), "nodes": nodes}
            for vector, nodes in report.histogram.buckets
        ]
    )
    return {
        "observedAt": format_time(now),
        "observedNodes": report.observed_nodes,
        "nodesByFreeDevices": buckets,
        "conditions": [stamp(report.condition, previous_conditions, now, generation)],
    }


def replica_status(
    report: ReplicaReport, now: datetime, previous: Mapping | None, generation: int
) -> dict:
    """A ReplicaObservation status; a flip of its condition is stamped `transition_time`."""
    previous_conditions = (previous or {}).get("conditions")
    since = transition_time(now)
    return {
        "observedAt": format_time(now),
        "pods": report.pods,
        "scheduledPods": report.scheduled_pods,
        "conditions": [stamp(report.condition, previous_conditions, since, generation)],
    }


def transition_time(snapshot: datetime) -> datetime:
    """When a replica report computed at `snapshot` says its condition flipped: the
    first whole second after it.

    The wire carries whole seconds and a pool's `observedAt` rounds down, so a pool
    whose snapshot was taken earlier in the same second would read as recent as the
    replica's flip; the fleet takes a replica scheduled at or before a pool's
    `observedAt` to be in that pool's histogram already. Past its second, the flip
    is older than the `observedAt` only of pools whose snapshot was taken after the
    replica's, which hold what it holds (design/agent.md, "Publishing")."""
    return snapshot.replace(microsecond=0) + timedelta(seconds=1)


# A pool's replicasCurrentAt (modelplane_common.currency) rides on its heartbeats
# and is no news of its own.
_TIMES = frozenset({"observedAt", REPLICAS_CURRENT_AT})


def content(status: Mapping | None) -> object:
    """The part of a status that is news: all of it but its times of currency.

    Absent keys and null values read alike, so a status read back from the API
    server (which drops nulls) compares equal to the one written.
    """
    if not status:
        return None
    return {k: v for k, v in status.items() if k not in _TIMES and v is not None}


# Condition reasons that mean the agent cannot do its job for an observation because
# of its input: each deserves one Warning event when it appears (not at every write).
PROBLEMS = frozenset(
    {
        "DeviceClassNotFound",
        "InvalidDeviceClass",
        "InvalidSpec",
        "KindsShareCounters",
        "SharedPoolNames",
        "UnselectiveDeviceTaintRules",
    }
)


def warning(previous: Mapping | None, new: Mapping) -> tuple[str, str] | None:
    """(reason, message) of the Warning event `new` deserves, or None.

    Only when its condition names a problem of the input and the previous
    status did not already say exactly that.
    """
    condition = (new.get("conditions") or [{}])[0]
    if condition.get("reason") not in PROBLEMS:
        return None
    before = condition_in((previous or {}).get("conditions"), str(condition.get("type")))
    said = (condition.get("reason"), condition.get("message"))
    if before and (before.get("reason"), before.get("message")) == said:
        return None
    return str(condition["reason"]), str(condition.get("message") or "")
