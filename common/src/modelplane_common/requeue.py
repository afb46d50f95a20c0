"""When each function asks Crossplane to call it again (`meta.ttl` of its response).

Crossplane v2 reconciles an XR when the XR or one of its composed resources
changes (realtime compositions, on by default, which also turn polling off)
and when the TTL its function pipeline returned runs out. Required resources
are not watched. Its per-XR watch circuit breaker drops most of those events
while it is open, and a new replica opens it as a matter of course: the
numbers and the evidence are in design/reconcile.md. Events drive
convergence; the TTL, which the breaker never drops, is the backstop, and
the only trigger for what no event announces (a deadline passing, a required
resource changing). Each function states here how soon it must look again:

    CONVERGING  the breaker may be dropping the XR's events (`dropping_events`),
                so the next change may never arrive as one: look again soon,
                so Ready follows the workload within seconds.
    WAITING     something the XR owns is on its way (a replica admitted but
                not yet Ready, a deployment with a placed replica not yet
                Ready), or it waits on what only a required resource shows
                (capacity, a cluster's word that a report is current): events
                bring the first; the TTL backs up an event lost anyway and
                polls the second. The SDK's own default.
    deadlines   the real instants at which the XR's answer changes with no
                event (a report turning stale, a grace period or admission's
                commit delay running out, a failure memory expiring): `until` turns
                each into a TTL, and `after` takes the earliest.
    AT_REST_CAP nothing moving and events flowing: the earliest deadline, but
                never later than this, which bounds how long a change that
                only a required resource shows (an InferenceCluster's spec,
                taints or pools) waits for an XR at rest (design/reconcile.md,
                "The rule").
    observation_refresh
                an InferenceCluster that reads the agent looks again at a
                quarter of its `maxAge` (at most WAITING), so the histogram it
                publishes is never more than that behind the agent's, even
                when an event is lost.

The breaker drops events only for a while after it opens. Crossplane keeps
its state per XR and changes it only when an event arrives: an open circuit
closes on the first event after its cooldown, and until then the XR's
`Responsive` condition reads False, however long ago it opened. An XR at rest
has no events, so its condition may read False for as long as it stays at
rest (measured on the e2e fleet at rest: design/scheduler.md, "A fleet at
rest on the real control plane"). So the condition counts as dropping only
within DROPPING_FOR of turning False: Crossplane's default cooldown plus its
30 s between half-open probes, after which even the first event passes
(design/reconcile.md, "The watch circuit breaker").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from modelplane_common.inputs import condition_in
from modelplane_common.timeutil import parse_time_or_none

CONVERGING = timedelta(seconds=10)
# The Function SDK's default TTL (crossplane.function.response.DEFAULT_TTL); plain
# here because the agent's image, which shares this package, carries no SDK.
WAITING = timedelta(minutes=1)
# The latest an XR at rest is called again: Crossplane's breaker cooldown and the
# InferenceCluster's default maxAge. A fleet at rest then costs a fifth of the
# reconciles a 60 s TTL does; a change only a required resource shows waits at most this.
AT_REST_CAP = timedelta(minutes=5)
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


def until(deadline: datetime | None, now: datetime) -> timedelta | None:
    """The TTL that calls the function again at `deadline`; None when there is none or it
    has passed (this pass already saw what it changes)."""
    return deadline - now if deadline is not None and deadline > now else None


def after(
    *, dropping_events: bool, waiting: bool, deadlines: Iterable[timedelta | None] = ()
) -> timedelta:
    """The TTL: CONVERGING while events may be dropped, else WAITING while something is
    on its way or only a required resource shows what the XR waits for; never later
    than the earliest deadline (`until`), nor than AT_REST_CAP."""
    tier = CONVERGING if dropping_events else WAITING if waiting else None
    return soonest(tier, *deadlines)


def observation_refresh(max_age: timedelta) -> timedelta:
    """A quarter of the cluster's maxAge, between FLOOR and WAITING."""
    return min(max(max_age / 4, FLOOR), WAITING)


def soonest(*deadlines: timedelta | None) -> timedelta:
    """The earliest of the deadlines given (None: no deadline), between FLOOR and
    AT_REST_CAP."""
    return max(min([*(d for d in deadlines if d is not None), AT_REST_CAP]), FLOOR)
