"""When the publisher writes a status, and when it tries again after a failure.

Pure rules over values the shell passes in. Two clocks, never mixed:
- intervals (the least time between two writes, a heartbeat's age, a retry's
  delay) are seconds on the monotonic clock, so a wall-clock step (NTP, a
  resumed VM) neither suppresses writes nor fires them early;
- `observedAt` is the wall clock, because it is published and compared with
  other clocks (design/observation.md).

A status is written when its content (everything but its times of currency)
changed; when its heartbeat is due (pools only: a replica report is written
only when it changes, and the pools' `replicasCurrentAt` keeps it fresh), which
needs a time of currency (`vouched_at`) different from the one published (a
heartbeat that would publish the same instants says nothing); or when a pool
must publish an `observedAt` at least as recent as a replica's turn to
scheduled (a refresh). Never twice within `min_interval`.

A failed write (or a status that could not be computed) is retried after an
exponential backoff per observation, jittered x0.5-1.5, from `min_interval`
doubling to `backoff_max`; never sooner than the API server asked
(`Retry-After`, capped at `retry_after_max` against a broken proxy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from modelplane_common.currency import REPLICAS_CURRENT_AT
from modelplane_common.timeutil import parse_time, parse_time_or_none

from modelplane_agent.status import content


def observed_at(status: Mapping | None) -> datetime | None:
    """A status' `observedAt`, or None when it has none that parses."""
    try:
        return parse_time((status or {}).get("observedAt"))
    except ValueError:
        return None


def vouched_at(status: Mapping | None) -> datetime | None:
    """The latest time a status vouches for: its `observedAt`, or a pool's
    `replicasCurrentAt` when that is later (None when neither parses)."""
    times = (observed_at(status), parse_time_or_none((status or {}).get(REPLICAS_CURRENT_AT)))
    return max((t for t in times if t is not None), default=None)


def heartbeat_due(
    new_at: datetime, current_at: datetime | None, written_age: float | None, heartbeat: float
) -> bool:
    """Whether to rewrite an unchanged status so that it carries `new_at`.

    `written_age` is the monotonic age of this process's last successful write of
    the status (None when the status was only seen: written by an earlier agent,
    or by someone else); for such a status the age is read off the wall clock,
    and one from the future (a clock stepped back) is rewritten at once.
    """
    if current_at is None:
        return True
    if new_at == current_at:
        return False
    age = written_age if written_age is not None else (new_at - current_at).total_seconds()
    return age >= heartbeat or age < 0


@dataclass(frozen=True)
class Pacing:
    """How often one observation's status is written, in seconds: at most once per
    `min_interval`, and again, unchanged, once its `heartbeat` is due."""

    min_interval: float
    heartbeat: float


def write_reason(
    new: Mapping,
    current: Mapping | None,
    *,
    since_attempt: float | None,
    written_age: float | None,
    pacing: Pacing,
    newer_than: datetime | None = None,
) -> str | None:
    """Why to write `new` now ("change", "heartbeat", "refresh"), or None.

    `since_attempt`: monotonic seconds since the last write attempt of this
    observation (None if never); `newer_than`: the `observedAt` a pool must reach
    because a replica of it turned scheduled then.
    """
    if since_attempt is not None and since_attempt < pacing.min_interval:
        return None
    if content(new) != content(current):
        return "change"
    new_at, current_at = vouched_at(new), vouched_at(current)
    assert new_at is not None  # the publisher always stamps one
    if heartbeat_due(new_at, current_at, written_age, pacing.heartbeat):
        return "heartbeat"
    current_at = observed_at(current)
    if newer_than is not None and current_at is not None and current_at < newer_than <= new_at:
        return "refresh"
    return None


def retry_delay(
    failures: int,
    jitter: float,
    retry_after: float | None,
    *,
    initial: float,
    backoff_max: float,
    retry_after_max: float,
) -> float:
    """Seconds before the next attempt after `failures` failures in a row (>= 1).

    `jitter` is uniform in [0, 1): observations that failed together do not
    all retry in one tick.
    """
    backoff = min(backoff_max, initial * 2 ** (failures - 1)) * (0.5 + jitter)
    if retry_after is None:
        return backoff
    return max(backoff, min(retry_after, retry_after_max))
