"""Whether the agent's reports are current: a verdict that flips, not a time that ticks.

The agent heartbeats: every PoolObservation is rewritten with a new
`observedAt` at least every quarter of maxAge, and carries `replicasCurrentAt`
(REPLICAS_CURRENT_AT), its promise that every ReplicaObservation on the
cluster carried the report it computes, from watches that were current, as
of that time (design/agent.md, "Replica currency"). The agent writes a
ReplicaObservation only when its report changes.

Everything that reads an InferenceCluster is woken by every change of it
(Crossplane v2.4 watches the resources a function requires), and every
replica and every deployment requires its clusters. So the cluster publishes
what a heartbeat decides, not the heartbeat itself (design/reconcile.md,
"Crossplane v2.4"); compose-inference-cluster judges, at each relayed
heartbeat and at each deadline where a judgement can change (`deadlines`):

    gpuPools[].changedAt     the agent's time of the first report that showed
                             the pool's published observation (its node count
                             and histogram): it moves when they do
    gpuPools[].observedAt    that time, then once more to the next report
                             that shows the same (`published_times`): the
                             agent stamps a replica's scheduledAt past the
                             snapshot that first shows its devices, so only a
                             later report can say it contains the replica;
                             never again on a heartbeat alone
    gpuPools[].current       the agent's latest report of the pool is within
                             maxAge of the control plane's clock (CURRENT)
    agent.replicasCurrent    the latest relayed `replicasCurrentAt` is within
                             maxAge (REPLICAS_CURRENT); absent while the agent
                             publishes none
    agent.vouchedUntil       how long a consumer may trust those verdicts
                             (VOUCHED_UNTIL): set LEASE ahead, renewed once
                             less than RENEW_WITHIN is left (`lease`)

A consumer (the scheduler, admission, compose-model-replica) trusts a
`current` verdict until `vouchedUntil` (`pool_current_until`,
`replicas_current_until`): a cluster whose own reconciles stopped does not
keep its pools current for ever, only until its lease lapses.

Invariants
    - A heartbeat that changes neither a histogram nor a verdict changes
      nothing the cluster publishes, once the change before it is confirmed.
    - Published `observedAt` is a time at which the agent saw exactly the
      published observation, so "scheduled at or before observedAt" still
      means "the histogram counts it" (design/api.md section 6). A replica
      stamped later than the confirming report (its report written after
      the next pool heartbeat) is charged until the histogram next changes:
      under-promising, never counted twice as free.
    - Errs towards "current" under a lagging cache of the cluster, for as
      long as the cache lags; the agent's times err towards "stale" instead.
      The lease bounds the first.
    - A lease more than twice LEASE ahead of the reader's clock vouches for
      nothing: a clock that far off would keep a cluster's last word for ever.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from modelplane_common.observation import staleness
from modelplane_common.timeutil import parse_time_or_none

# On a PoolObservation's status: the agent's word on its replica reports.
REPLICAS_CURRENT_AT = "replicasCurrentAt"
# On an InferenceCluster's status: gpuPools[].current and .changedAt, agent.replicasCurrent,
# agent.vouchedUntil.
CURRENT = "current"
CHANGED_AT = "changedAt"
REPLICAS_CURRENT = "replicasCurrent"
VOUCHED_UNTIL = "vouchedUntil"
# How far ahead a cluster vouches for its verdicts, and how much of that is left when it
# renews: a lease write wakes every reader of the cluster, so it is rare (every 15 minutes).
LEASE = timedelta(minutes=30)
RENEW_WITHIN = timedelta(minutes=15)
# A report exactly maxAge old is still current (`staleness`); its deadline is one tick later.
_RESOLUTION = timedelta(seconds=1)


# --- what compose-inference-cluster publishes ---------------------------------------------


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


def is_current(reported_at: datetime | None, now: datetime, max_age: timedelta) -> bool:
    """The verdict on one of the agent's times: within maxAge of `now`, either way."""
    return reported_at is not None and staleness(reported_at, now, max_age) is None


def published_times(
    previous: Mapping | None, published: Mapping, reported_at: datetime
) -> tuple[datetime, datetime]:
    """(observedAt, changedAt) to publish for a pool whose report, taken at `reported_at`,
    reads as `published` (its observedNodes and nodesByFreeDevices), given the pool's
    previous entry:

        changed (or no readable previous entry)   (reported_at, reported_at)
        the same, not yet confirmed by a later    (reported_at, changedAt)
          report (observedAt == changedAt)
        the same, confirmed                       kept as published

    A previous time later than the report (a cache ahead of this pass's read of the
    agent) is not kept: the report's own time is."""
    if not isinstance(previous, Mapping):
        return reported_at, reported_at
    observed = parse_time_or_none(previous.get("observedAt"))
    changed = parse_time_or_none(previous.get(CHANGED_AT))
    same = all(previous.get(k) == published.get(k) for k in ("observedNodes", "nodesByFreeDevices"))
    if not same or observed is None or changed is None or not changed <= observed <= reported_at:
        return reported_at, reported_at
    if observed == changed:
        return reported_at, changed
    return observed, changed


def lease(previous_status: Mapping, now: datetime) -> datetime:
    """`vouchedUntil` to publish: the previous one while more than RENEW_WITHIN of it is
    left and it is one a reader trusts (`holds`: a function pod whose clock runs a little
    ahead wrote it, not a broken one), else LEASE from now."""
    held = vouched_until(previous_status)
    if held is not None and held > now + RENEW_WITHIN and holds(held, now):
        return held
    return now + LEASE


def deadlines(
    reported_at: Iterable[datetime | None], held: datetime, now: datetime, max_age: timedelta
) -> list[datetime]:
    """When a verdict can change with no new report: each current time turning stale,
    and the lease falling due for renewal."""
    turning = [
        t + max_age + _RESOLUTION
        for t in reported_at
        if t is not None and is_current(t, now, max_age)
    ]
    return [*turning, held - RENEW_WITHIN]


# --- what its readers trust ---------------------------------------------------------------


def vouched_until(status: Mapping) -> datetime | None:
    """An InferenceCluster's `status.agent.vouchedUntil` (None: absent or unreadable, as
    from a function that predates it)."""
    agent = status.get("agent")
    return parse_time_or_none(agent.get(VOUCHED_UNTIL)) if isinstance(agent, Mapping) else None


def pool_current_until(entry: Mapping, status: Mapping) -> datetime | None:
    """Until when a pool's published observation is current: the cluster's lease when
    its `gpuPools[]` entry says `current: true`; None when it does not."""
    return vouched_until(status) if entry.get(CURRENT) is True else None


def replicas_current_until(status: Mapping) -> datetime | None:
    """Until when the cluster vouches for every replica report on it: its lease when
    `status.agent.replicasCurrent` is true; None when it is not (or absent)."""
    agent = status.get("agent")
    current = isinstance(agent, Mapping) and agent.get(REPLICAS_CURRENT) is True
    return vouched_until(status) if current else None


def holds(current_until: datetime | None, now: datetime) -> bool:
    """Whether a `current` verdict vouched until `current_until` still holds at `now`."""
    return current_until is not None and now <= current_until <= now + 2 * LEASE


def lapsed(current_until: datetime | None, now: datetime) -> str | None:
    """Why a pool's observation is not current, in words that do not change from pass to
    pass; None while its cluster's verdict holds."""
    if current_until is None:
        return "not current: its InferenceCluster judges the agent's last report older than maxAge"
    if now > current_until:
        return (
            "not current: its InferenceCluster's word lapsed (not reconciled since; "
            "check compose-inference-cluster)"
        )
    if not holds(current_until, now):
        return "not current: its InferenceCluster's vouchedUntil is too far ahead of this clock"
    return None


def report_staleness(
    observed_at: datetime, current_until: datetime | None, now: datetime, max_age: timedelta
) -> str | None:
    """Why a replica report is not fresh (its own words, `staleness`); None while its own
    `observedAt` is, or its cluster vouches for every replica report
    (`replicas_current_until`)."""
    own = staleness(observed_at, now, max_age)
    return None if own is None or holds(current_until, now) else own


def turns_stale_at(
    observed_at: datetime, current_until: datetime | None, now: datetime, max_age: timedelta
) -> datetime | None:
    """The first instant a fresh report reads stale unless something newer arrives (the
    deadline a replica at rest looks again at); None when it is stale already."""
    if report_staleness(observed_at, current_until, now, max_age) is not None:
        return None
    ends = [current_until] if current_until is not None and holds(current_until, now) else []
    if staleness(observed_at, now, max_age) is None:
        ends.append(observed_at + max_age)
    return max(ends) + _RESOLUTION
