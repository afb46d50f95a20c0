"""How fresh an unchanged replica report is: its own `observedAt`, or the cluster's word.

The agent writes a ReplicaObservation only when its report changes. Each
PoolObservation heartbeat carries `replicasCurrentAt` (REPLICAS_CURRENT_AT),
the agent's promise that every ReplicaObservation on the cluster carried the
report it computes, from watches that were current, as of that time (agent
clock); it stops advancing while any replica report cannot be written, a
change waits to be written, or a watch the reports read is not current
(design/agent.md, "Replica currency").

compose-inference-cluster relays the latest of its pools' values to
`status.agent.replicasCurrentAt` (`relayed`), a field that changes only when a
pool's status is rewritten, which already changes that pool's `observedAt`
(design/observation.md, "Replica currency"). compose-model-replica, which
reads the InferenceCluster on every pass, judges a report fresh while either
time is (`report_staleness`): max(observedAt, replicasCurrentAt) >= now -
maxAge, with a time more than maxAge ahead of the control plane stale, as
every report is (`modelplane_common.observation.staleness`).

Either side may be older than the other during a rolling upgrade: an agent
that publishes no `replicasCurrentAt` still rewrites its replica reports as a
heartbeat, and the rule falls back to `observedAt` alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from modelplane_common.observation import staleness
from modelplane_common.timeutil import parse_time_or_none

# The field's name on a PoolObservation's status and on an InferenceCluster's status.agent.
REPLICAS_CURRENT_AT = "replicasCurrentAt"
# A report exactly maxAge old is still fresh (`staleness`); its deadline is one tick later.
_RESOLUTION = timedelta(seconds=1)


def relayed(pool_reports: Iterable[Mapping | None]) -> datetime | None:
    """The latest `replicasCurrentAt` the pools' statuses carry (None: none carries one
    that reads as a time). Every pool is written by the same agent, so the latest is its
    word; an older one is a pool whose heartbeat has not come round yet."""
    times = (parse_time_or_none((r or {}).get(REPLICAS_CURRENT_AT)) for r in pool_reports)
    return max((t for t in times if t is not None), default=None)


def unreadable(pool_reports: Mapping[str, Mapping | None]) -> list[str]:
    """One `pool <name>: replicasCurrentAt: not a time (got ...)` per pool whose value
    is present but unreadable (the CRD's schema should make that impossible)."""
    return [
        f"pool {name}: {REPLICAS_CURRENT_AT}: not an RFC 3339 time (got {raw!r})"
        for name, report in sorted(pool_reports.items())
        if (raw := (report or {}).get(REPLICAS_CURRENT_AT)) is not None
        and parse_time_or_none(raw) is None
    ]


def of_cluster(status: Mapping) -> datetime | None:
    """An InferenceCluster's relayed `status.agent.replicasCurrentAt` (None: absent or
    unreadable, as from a function or an agent that predates it)."""
    agent = status.get("agent")
    raw = agent.get(REPLICAS_CURRENT_AT) if isinstance(agent, Mapping) else None
    return parse_time_or_none(raw)


def turns_stale_at(
    observed_at: datetime, current_at: datetime | None, now: datetime, max_age: timedelta
) -> datetime | None:
    """The first instant a fresh report reads stale unless something newer arrives (the
    deadline a replica at rest looks again at); None when it is stale already."""
    if report_staleness(observed_at, current_at, now, max_age) is not None:
        return None
    vouching = [t for t in (observed_at, current_at) if t is not None and t - now <= max_age]
    return max(vouching) + max_age + _RESOLUTION


def report_staleness(
    observed_at: datetime, current_at: datetime | None, now: datetime, max_age: timedelta
) -> str | None:
    """Why a replica report is not fresh (its own words, `staleness`); None while its
    `observedAt` or the cluster's `replicasCurrentAt` is fresh."""
    own = staleness(observed_at, now, max_age)
    if own is None or current_at is None:
        return own
    return None if staleness(current_at, now, max_age) is None else own
