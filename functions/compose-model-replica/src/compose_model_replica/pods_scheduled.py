"""PodsScheduled: what the agent's ReplicaObservation says about a replica's pods.

The agent counts the pods the replica's selector matches (`pods`), how many
are bound to a node (`scheduledPods`), and keeps a `Scheduled` condition:
True once every pod it sees is bound (its lastTransitionTime is when, on the
agent's clock), False with reason Unschedulable and the cluster scheduler's
message when a pod was reported unschedulable, False/Pending otherwise.

State machine (first matching row wins; `expected` comes from the spec)

    source                               -> status   reason
    no ReplicaObservation (Declared mode,   Unknown  NotObserved
      no agent, not reported yet)
    report malformed                        Unknown  NotObserved  (+ Warning)
    report stale: its observedAt not       Unknown  NotObserved
      within maxAge (nor that far ahead),
      and its cluster does not vouch for
      its replica reports (currency)
    Scheduled=False reason Unschedulable    False    Unschedulable
    spec invalid, expected unknown          Unknown  InvalidSpec
    pods < expected                         False    WaitingForPods
    Scheduled=True                          True     AllPodsScheduled
    otherwise                               False    PodsPending

The agent's "all bound" is true before a gang's workers exist, so a True
Scheduled condition counts only when at least `expected` pods exist.

Messages are stable while a state holds: no counts, no times (those live in
`status.pods` and `status.scheduledAt`), so the condition's
lastTransitionTime means "since when". The Unschedulable message names the
engine (when the scheduler's message names one of its workloads) and quotes
the scheduler's message as first reported; while Unschedulable holds for the
same engine the first message is kept, and newer wording goes to an event.

scheduledAt (agent clock), while AllPodsScheduled
    - the Scheduled condition's lastTransitionTime, relayed;
    - but if the previous pass saw WaitingForPods, the agent's flip to True
      may predate the pods created since (a gang's workers bound between two
      agent reports), so it is the later of that time and the report's
      observedAt. Later is safe: the fleet scheduler then charges the
      replica until a pool observation taken after it, never counts it twice
      as free;
    - once published it is kept while the state holds and the agent has not
      flipped again since.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from modelplane_common.currency import report_staleness, turns_stale_at
from modelplane_common.inputs import condition_in, find_condition, problem, whole_number
from modelplane_common.outcome import Condition, capped
from modelplane_common.timeutil import format_time, parse_time, parse_time_or_none

TYPE = "PodsScheduled"
ALL_PODS_SCHEDULED = "AllPodsScheduled"
PODS_PENDING = "PodsPending"
WAITING_FOR_PODS = "WaitingForPods"
UNSCHEDULABLE = "Unschedulable"
NOT_OBSERVED = "NotObserved"
INVALID_SPEC = "InvalidSpec"


@dataclass(frozen=True, slots=True)
class AgentReport:
    """A well-formed ReplicaObservation status."""

    observed_at: datetime
    pods: int
    scheduled_pods: int
    scheduled: str  # the Scheduled condition's status
    reason: str
    message: str
    since: datetime | None  # its lastTransitionTime; always set when scheduled is True
    # Until when the cluster vouches that every replica report on it is current, though
    # unwritten since observed_at (modelplane_common.currency); None: it does not.
    cluster_current_until: datetime | None = None

    def staleness(self, now: datetime, max_age: timedelta) -> str | None:
        """Why the report is not fresh; None while it or the cluster's word is."""
        return report_staleness(self.observed_at, self.cluster_current_until, now, max_age)

    def turns_stale_at(self, now: datetime, max_age: timedelta) -> datetime | None:
        """When the report turns stale unless something newer arrives; None: it is."""
        return turns_stale_at(self.observed_at, self.cluster_current_until, now, max_age)


@dataclass(frozen=True, slots=True)
class Malformed:
    defects: tuple[str, ...]

    @property
    def message(self) -> str:
        return "; ".join(self.defects)


@dataclass(frozen=True, slots=True)
class Unobserved:
    """No report to judge: say why (stable wording)."""

    message: str


Source = AgentReport | Malformed | Unobserved

NOT_REPORTED = Unobserved("the agent has not reported on the replica's pods yet")


def _observed_at(status: Mapping, defects: list[str]) -> datetime | None:
    try:
        return parse_time(status.get("observedAt"))
    except ValueError as err:
        defects.append(problem("observedAt", str(err), status.get("observedAt")))
        return None


def _counts(status: Mapping, defects: list[str]) -> tuple[int | None, int | None]:
    """(pods, scheduledPods), each None when it is not a count."""
    pods = whole_number(status.get("pods"))
    scheduled_pods = whole_number(status.get("scheduledPods"))
    if pods is None or pods < 0:
        defects.append(problem("pods", "must be a count", status.get("pods")))
    if scheduled_pods is None or scheduled_pods < 0:
        defects.append(problem("scheduledPods", "must be a count", status.get("scheduledPods")))
    if pods is not None and scheduled_pods is not None and scheduled_pods > pods:
        defects.append(problem("scheduledPods", f"exceeds the {pods} pods", scheduled_pods))
    return pods, scheduled_pods


def _scheduled_condition(status: Mapping, defects: list[str]) -> Mapping:
    """The Scheduled condition, {} when there is none; its status must be a known one."""
    scheduled = condition_in(status.get("conditions"), "Scheduled")
    if not scheduled:
        defects.append("there is no Scheduled condition")
        return {}
    state = scheduled.get("status")
    if state not in ("True", "False", "Unknown"):
        defects.append(
            problem("conditions[Scheduled].status", "must be True, False or Unknown", state)
        )
    return scheduled


def _since(scheduled: Mapping, defects: list[str]) -> datetime | None:
    """The Scheduled condition's lastTransitionTime; None when absent or unreadable."""
    if scheduled.get("lastTransitionTime") is None:
        return None
    try:
        return parse_time(scheduled["lastTransitionTime"])
    except ValueError as err:
        defects.append(
            problem(
                "conditions[Scheduled].lastTransitionTime",
                str(err),
                scheduled["lastTransitionTime"],
            )
        )
        return None


def _true_defects(
    since: datetime | None, pods: int | None, scheduled_pods: int | None, defects: list[str]
) -> None:
    """What a True Scheduled condition must come with."""
    if since is None and not any("lastTransitionTime" in d for d in defects):
        defects.append("the Scheduled condition is True without a lastTransitionTime")
    if pods is not None and scheduled_pods is not None and scheduled_pods < pods:
        defects.append("the Scheduled condition is True while some pods are not bound")


def parse_report(status: object) -> Source:
    """Parse a ReplicaObservation's status; never raises."""
    if not isinstance(status, Mapping) or not status:
        return NOT_REPORTED
    defects: list[str] = []
    observed_at = _observed_at(status, defects)
    pods, scheduled_pods = _counts(status, defects)
    scheduled = _scheduled_condition(status, defects)
    state = scheduled.get("status")
    since = _since(scheduled, defects)
    if state == "True":
        _true_defects(since, pods, scheduled_pods, defects)
    if defects:
        return Malformed(tuple(defects))
    assert observed_at is not None and pods is not None and scheduled_pods is not None
    return AgentReport(
        observed_at=observed_at,
        pods=pods,
        scheduled_pods=scheduled_pods,
        scheduled=str(state),
        # The cluster scheduler's words, relayed by the agent: capped once, here.
        reason=capped(str(scheduled.get("reason") or "")),
        message=capped(str(scheduled.get("message") or "")),
        since=since,
    )


@dataclass(frozen=True, slots=True)
class Previous:
    """What the replica's status said last time (the function's only memory)."""

    status: str = ""
    reason: str = ""
    message: str = ""
    scheduled_at: datetime | None = None

    @classmethod
    def from_status(cls, status: Mapping) -> Previous:
        condition = find_condition({"status": status}, TYPE)
        scheduled_at = parse_time_or_none(status.get("scheduledAt"))
        return cls(
            status=str(condition.get("status") or ""),
            reason=str(condition.get("reason") or ""),
            message=str(condition.get("message") or ""),
            scheduled_at=scheduled_at,
        )


@dataclass(frozen=True, slots=True)
class PodsScheduledVerdict:
    """The PodsScheduled condition and the status fields that go with it."""

    condition: Condition
    pods: dict
    scheduled_at: datetime | None
    warnings: tuple[str, ...]

    def status(self) -> dict:
        out: dict = {"pods": self.pods}
        if self.scheduled_at is not None:
            out["scheduledAt"] = format_time(self.scheduled_at)
        return out


def _unschedulable_message(
    report: AgentReport, engine_of: Callable[[str], str | None], previous: Previous
) -> tuple[str, str]:
    """(condition message, what the scheduler says now)."""
    said = report.message or "the cluster scheduler reported a pod unschedulable"
    engine = engine_of(said)
    message = capped(f"engine {engine}: {said}" if engine else said)
    same_engine = (
        previous.message.startswith(f"engine {engine}: ")
        if engine
        else not previous.message.startswith("engine ")
    )
    if previous.status == "False" and previous.reason == UNSCHEDULABLE and same_engine:
        return previous.message, message
    return message, message


def _scheduled_at(report: AgentReport, previous: Previous) -> datetime:
    assert report.since is not None
    if (
        previous.reason == ALL_PODS_SCHEDULED
        and previous.scheduled_at is not None
        and previous.scheduled_at >= report.since
    ):
        return previous.scheduled_at
    if previous.reason == WAITING_FOR_PODS:
        return max(report.since, report.observed_at)
    return report.since


def judge(
    source: Source,
    expected: int | None,
    now: datetime,
    max_age: timedelta,
    previous: Previous,
    engine_of: Callable[[str], str | None],
) -> PodsScheduledVerdict:
    """The PodsScheduled condition, status.pods and status.scheduledAt."""
    pods: dict = {} if expected is None else {"expected": expected}

    def verdict(status: str, reason: str, message: str, *warnings: str) -> PodsScheduledVerdict:
        return PodsScheduledVerdict(
            condition=Condition(TYPE, status, reason, message),
            pods=pods,
            scheduled_at=None,
            warnings=warnings,
        )

    def unknown(message: str, *warnings: str, reason: str = NOT_OBSERVED) -> PodsScheduledVerdict:
        return verdict("Unknown", reason, message, *warnings)

    if isinstance(source, Unobserved):
        return unknown(source.message)
    if isinstance(source, Malformed):
        text = f"the agent's report is malformed: {source.message}"
        return unknown(text, text)
    report = source
    stale = report.staleness(now, max_age)
    if stale is not None:
        return unknown(f"the agent's report is {stale}")

    pods.update(observed=report.pods, scheduled=report.scheduled_pods)

    if report.scheduled == "False" and report.reason == UNSCHEDULABLE:
        message, now_said = _unschedulable_message(report, engine_of, previous)
        return verdict(
            "False", UNSCHEDULABLE, message, capped(f"pods are unschedulable: {now_said}")
        )
    if expected is None:
        return unknown(
            "the replica's spec is invalid, so how many pods it runs is unknown",
            reason=INVALID_SPEC,
        )
    if report.pods < expected:
        return verdict(
            "False",
            WAITING_FOR_PODS,
            "fewer pods exist than the replica's engines run (a gang's workers may not be "
            "created yet)",
        )
    if report.scheduled == "True":
        return PodsScheduledVerdict(
            condition=Condition(
                TYPE, "True", ALL_PODS_SCHEDULED, "every pod of the replica is bound to a node"
            ),
            pods=pods,
            scheduled_at=_scheduled_at(report, previous),
            warnings=(),
        )
    return verdict("False", PODS_PENDING, "some of the replica's pods are not bound to a node yet")
