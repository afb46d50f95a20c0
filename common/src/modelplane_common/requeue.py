"""When each function asks Crossplane to call it again (`meta.ttl` of its response).

Crossplane v2 reconciles an XR when the XR or one of its composed resources
changes (realtime compositions, on by default, which also turn polling off)
and when the TTL its function pipeline returned runs out. Required resources
are not watched. Its per-XR watch circuit breaker drops most of those events
while it is open, and a new replica opens it as a matter of course: the
numbers and the evidence are in design/reconcile.md. So no function may rely
on an event to see its XR converge; each states here how soon it must look
again, and the TTL, which the breaker never drops, guarantees it:

    CONVERGING  something the XR owns is on its way (a replica admitted but
                not yet Ready, a deployment with a placed replica not yet
                Ready, or one that just removed or healed replicas), or the
                breaker may be dropping its events (`dropping_events`), so the
                next change may never arrive as an event: look again soon, so
                Ready follows the workload within seconds.
    SETTLED     nothing is moving and events flow: the SDK's own default, so a
                settled fleet costs what it cost before this rule.
    observation_refresh
                an InferenceCluster that reads the agent looks again at a
                quarter of its `maxAge`, so the histogram it publishes is never
                more than that behind the agent's, whatever the breaker drops.

The breaker drops events only for a while after it opens. Crossplane keeps
its state per XR and changes it only when an event arrives: an open circuit
closes on the first event after its cooldown, and until then the XR's
`Responsive` condition reads False, however long ago it opened. A settled XR
has no events, so its condition may read False for as long as it stays
settled (measured on the settled e2e fleet: design/scheduler.md, "A settled
fleet on the real control plane"). So the condition counts as dropping only
within DROPPING_FOR of turning False: Crossplane's default cooldown plus its
30 s between half-open probes, after which even the first event passes
(design/reconcile.md, "The watch circuit breaker").

The functions' own earlier deadlines (admission's settle time) come first:
`soonest` picks the earliest.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from modelplane_common.inputs import condition_in
from modelplane_common.timeutil import parse_time_or_none

CONVERGING = timedelta(seconds=10)
# The Function SDK's default TTL (crossplane.function.response.DEFAULT_TTL); plain
# here because the agent's image, which shares this package, carries no SDK.
SETTLED = timedelta(minutes=1)
# The TTL never goes below this, however short a maxAge is.
FLOOR = timedelta(seconds=1)


# The condition Crossplane sets on every XR: False/WatchCircuitOpen from the moment
# its circuit breaker opens until an event arrives after the cooldown.
RESPONSIVE = "Responsive"
# How long after opening the breaker may drop an event: Crossplane's default
# `--circuit-breaker-cooldown` (5m) plus its fixed half-open interval (30 s).
DROPPING_FOR = timedelta(minutes=5, seconds=30)


def reads_open(status: Mapping) -> bool:
    """Whether the XR's status says its circuit is open: `Responsive` False (an unreadable
    condition reads as closed). Whether it is still dropping events is `dropping_events`."""
    return condition_in(status.get("conditions"), RESPONSIVE).get("status") == "False"


def dropping_events(status: Mapping, now: datetime) -> bool:
    """Whether Crossplane may be dropping the XR's watch events: its circuit `reads_open`,
    turned False less than DROPPING_FOR ago (an unreadable or future transition time
    reads as just opened)."""
    if not reads_open(status):
        return False
    responsive = condition_in(status.get("conditions"), RESPONSIVE)
    opened = parse_time_or_none(responsive.get("lastTransitionTime"))
    return opened is None or now - opened < DROPPING_FOR


def converging(moving: bool, *, dropping_events: bool) -> timedelta:
    """CONVERGING while something the XR owns is on its way or its events may be dropped,
    else SETTLED."""
    return CONVERGING if moving or dropping_events else SETTLED


def observation_refresh(max_age: timedelta) -> timedelta:
    """A quarter of the cluster's maxAge, between FLOOR and SETTLED."""
    return min(max(max_age / 4, FLOOR), SETTLED)


def soonest(*deadlines: timedelta | None) -> timedelta:
    """The earliest of the deadlines given (None: no deadline), never below FLOOR."""
    given = [d for d in deadlines if d is not None]
    return max(min(given, default=SETTLED), FLOOR)
