"""How current the agent's view is, and the `observedAt` it may honestly publish.

A report is only as recent as the least recent kind it reads. The shell keeps,
per watched kind, when it last *heard* from the API server about it (a list
that completed, an event, or a watch bookmark: each proves the kind current up
to then, the list from the moment it was requested) and the failure since
then, if any. A kind is current while
- nothing failed since it was last heard (a watch error, a list error), and
- it was heard within `bound` seconds: the API server's watch cache sends a
  bookmark on every watch about once a minute, so a longer silence means a
  stalled stream (a half-open connection, a wedged API server).

A kind the agent does not watch (DeviceTaintRules where the API server does
not serve them: `watched` is False) is none of a report's business: it
neither holds `observedAt` back nor appears in the condition.

A watch that just started (after a list, or resuming after a failure) first
delivers what happened since the version it starts from, which the state
has not applied yet. Until it has been open `catch_up` seconds (its catch-up,
until `Currency.catch_up_ends`), its kind is current only as of when it was
last known whole (`catch_up_as_of`: the list's request time, or when it was
last heard): it holds `observedAt` back without turning `Current` False, as
nothing failed.

While every kind a report reads is current and caught up, the report is current
now: `observedAt` is the moment its snapshot is taken. Otherwise `observedAt`
is the last time the lagging kinds were heard, the earliest of them: it stops
advancing, a heartbeat publishes nothing newer, and the control plane sees the
report age until it turns stale at its `maxAge` and the pool falls back to
whole-node accounting (a replica's PodsScheduled turns Unknown). Meanwhile the
fleet scheduler already charges every replica scheduled after that
`observedAt`, so the report is honest about what it includes.

While a kind a report reads is being relisted the report is not computed
(the state is part old, part new); if that relist fails, the last status is
published again as it was (`frozen`), with the frozen `observedAt` and the
condition.

The `Current` condition says which: True/`WatchesCurrent`, or
False/`WatchFailing` (some kind's watch or list is failing; the message names
each kind, since when, and the error) or False/`WatchSilent` (no kind failing,
but one silent beyond the bound). It is a condition of its own, beside
`Observing` or `Scheduled`, so that it changes neither the pool's accounting
nor a replica's `lastTransitionTime` (its `scheduledAt`): freshness is carried
by `observedAt`, which every consumer already reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from modelplane_common.outcome import Condition
from modelplane_common.timeutil import format_time

from modelplane_agent.conditions import stamp
from modelplane_agent.writes import observed_at

CURRENT = "Current"
WATCHES_CURRENT = "WatchesCurrent"
WATCH_FAILING = "WatchFailing"
WATCH_SILENT = "WatchSilent"


@dataclass(slots=True)
class Currency:
    """What the shell knows of one kind's stream (updated by the shell as it hears)."""

    heard_at: datetime | None = None  # wall clock: what observedAt may say
    heard_mono: float = -math.inf  # monotonic: how long the kind has been silent
    error: str | None = None  # the failure since it was last heard
    failing_since: datetime | None = None
    watched: bool = True  # False: an optional kind the API server does not serve
    # Until `catch_up_ends` (monotonic) the kind is current only as of `catch_up_as_of`
    # (a watch starting may still deliver what happened since its version).
    catch_up_ends: float = -math.inf
    catch_up_as_of: datetime | None = None

    def heard(self, wall: datetime, mono: float) -> None:
        self.heard_at, self.heard_mono = wall, mono
        self.error = self.failing_since = None

    def listed(self, asked: datetime, mono: float) -> None:
        """A list requested at `asked` completed: current as of then, until its watch
        has caught up."""
        self.heard(asked, mono)
        self.catch_up_ends, self.catch_up_as_of = math.inf, asked

    def watching(self, mono: float, catch_up: float) -> None:
        """A watch starts: current as of when last known whole, for `catch_up` seconds."""
        if self.catch_up_ends == math.inf:  # right after a list: as of its request
            self.catch_up_ends = mono + catch_up
            return
        self.catch_up_ends, self.catch_up_as_of = mono + catch_up, self.heard_at

    def failed(self, wall: datetime, error: str) -> None:
        if self.error is None:
            self.failing_since = wall
        self.error = error


@dataclass(frozen=True, slots=True)
class Freshness:
    observed_at: datetime
    condition: Condition


def freshness(
    kinds: Iterable[str],
    currency: Mapping[str, Currency],
    now: datetime,
    mono: float,
    bound: float,
    name: Callable[[str], str],
) -> Freshness:
    """The `observedAt` and `Current` condition of a report that reads `kinds`."""
    failing, silent, heard = [], [], []
    as_of = [now]
    for kind in kinds:
        known = currency[kind]
        if not known.watched:
            continue
        if mono < known.catch_up_ends and known.catch_up_as_of is not None:
            as_of.append(known.catch_up_as_of)
        if known.error is not None:
            since = format_time(known.failing_since) if known.failing_since else "the start"
            failing.append(f"{name(kind)} watch failing since {since}: {known.error}")
        elif mono - known.heard_mono > bound:
            last = format_time(known.heard_at) if known.heard_at else "never"
            silent.append(
                f"{name(kind)} watch silent for more than {bound:.0f}s (no event or bookmark "
                f"since {last})"
            )
        else:
            continue
        heard.append(known.heard_at or now)
    if not heard:
        return Freshness(
            min(as_of),
            Condition(CURRENT, "True", WATCHES_CURRENT, "every kind this report reads is current"),
        )
    observed_at = min(heard + as_of)
    reason = WATCH_FAILING if failing else WATCH_SILENT
    message = "; ".join([*failing, *silent])
    message += f"; the report is as of {format_time(observed_at)}"
    return Freshness(observed_at, Condition(CURRENT, "False", reason, message))


def with_freshness(
    status: dict, fresh: Freshness, previous: Mapping | None, now: datetime, generation: int
) -> dict:
    """`status` (as `status.py` builds it, stamped `now`) as of `fresh.observed_at`,
    with the `Current` condition after the report's own."""
    previous_conditions = (previous or {}).get("conditions")
    status["observedAt"] = format_time(fresh.observed_at)
    status["conditions"].append(stamp(fresh.condition, previous_conditions, now, generation))
    return status


def frozen(current: Mapping | None, fresh: Freshness, now: datetime) -> dict:
    """The last status again, when the report cannot be computed (a relist that fails):
    its content as it was, `observedAt` no later than it was nor than `fresh` allows,
    and the `Current` condition of `fresh`."""
    status = dict(current or {})
    conditions = [
        c for c in status.get("conditions") or [] if isinstance(c, Mapping) and c.get("type")
    ]
    mine = [c for c in conditions if c.get("type") != CURRENT]
    generation = next((c.get("observedGeneration") for c in mine), None)
    was = observed_at(status)
    status["observedAt"] = format_time(min(fresh.observed_at, was or fresh.observed_at))
    condition = stamp(fresh.condition, conditions, now, int(generation or 0))
    status["conditions"] = [*mine, condition]
    return status
