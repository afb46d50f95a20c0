"""PodsCreated: are the admitted replica's pods there, and if not, the workload cluster's why.

The condition, its reasons and what `NotCreated` means for charging are
`modelplane_common.pods_created`'s; this module judges it, a pure function
of what the pass read. State machine (first matching row wins):

    not admitted for the current placement     Unknown  NotObserved
    spec invalid (expected pods unknown)       Unknown  NotObserved
    a workload Object the provider cannot      (evidence: that engine has no
      apply and has never seen on the cluster    pods; counted as too few)
    else no fresh agent report                 Unknown  NotObserved
    report: pods >= expected                   True     Created
    too few pods, missing for <= the grace     False    Creating
    too few pods, missing for >  the grace     False    NotCreated

"Missing since" is `status.pods.missingSince`, the function's memory: kept
while pods stay missing, but never earlier than the admission verdict of the
current placement (a replica moved to another cluster starts again), and
set to now when the pods first go missing.

Why (in every False message, the first cause found)
    - an Object provider-kubernetes cannot apply (a workload, a claim
      template): its Synced message, e.g. an admission webhook's denial,
      RBAC, or a namespace that does not exist on the cluster, which then
      also says who composes it (the ModelDeployment:
      modelplane_common.workload_namespace.explain_unapplied);
    - a Deployment's `ReplicaFailure` condition, which the Deployment
      controller copies from its ReplicaSet: `FailedCreate` with the API
      server's refusal (Pod Security, a ResourceQuota);
    - a LeaderWorkerSet says no more than that it is not Available: LWS
      v0.9.0 sets only its Available, Progressing and UpdateInProgress
      conditions (fixed messages) and records a refused pod as events of
      its StatefulSets, which an Object cannot relay. The message says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from modelplane_common import inputs, workload_namespace
from modelplane_common.capacity.admission import ADMITTED, Record
from modelplane_common.composed import ObservedObject
from modelplane_common.outcome import Condition
from modelplane_common.pods_created import CREATED, CREATING, NOT_CREATED, NOT_OBSERVED, TYPE
from modelplane_common.timeutil import format_duration

from compose_model_replica.pods_scheduled import AgentReport, Source

LWS_SAYS_NOTHING = (
    "the LeaderWorkerSet gives no cause (it reports only Available and Progressing; the "
    "refusal is in its StatefulSets' FailedCreate events on the workload cluster)"
)


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the pass read about the replica's pods and the workload cluster's objects."""

    source: Source  # the agent's report, as PodsScheduled reads it
    expected: int | None
    record: Record | None  # the admission verdict for the current placement
    previous_since: datetime | None  # status.pods.missingSince
    observed: Mapping[str, ObservedObject]  # this cluster's Objects, by resource name
    grace: timedelta
    max_age: timedelta
    now: datetime
    namespace: str = ""  # the replica's, which its workloads run in on the cluster


@dataclass(frozen=True, slots=True)
class PodsCreatedVerdict:
    condition: Condition
    missing_since: datetime | None  # for status.pods.missingSince


def _unknown(message: str, since: datetime | None = None) -> PodsCreatedVerdict:
    return PodsCreatedVerdict(Condition(TYPE, "Unknown", NOT_OBSERVED, message), since)


def _unapplied(observed: Mapping[str, ObservedObject], namespace: str) -> list[str]:
    """Why each Object the provider cannot apply fails, for those it never saw applied."""
    return [
        f"cannot apply the {_kind(o)}: "
        + workload_namespace.explain_unapplied(
            o.synced_message or "the provider gives no reason", namespace
        )
        for _, o in sorted(observed.items())
        if o.synced is False
    ]


def _kind(obj: ObservedObject) -> str:
    spec = obj.body.get("spec")
    manifest = (spec.get("forProvider") or {}).get("manifest") if isinstance(spec, Mapping) else {}
    kind = manifest.get("kind") if isinstance(manifest, Mapping) else None
    return str(kind or "object")


def _workload_causes(observed: Mapping[str, ObservedObject]) -> list[str]:
    """What the workloads the cluster holds say about their missing pods."""
    causes = []
    for _, obj in sorted(observed.items()):
        remote = obj.remote or {}
        if remote.get("kind") == "Deployment":
            failure = inputs.find_condition(remote, "ReplicaFailure")
            if failure.get("status") == "True":
                causes.append(
                    f"the Deployment reports {failure.get('reason') or 'ReplicaFailure'}: "
                    f"{failure.get('message') or 'no message'}"
                )
        elif remote.get("kind") == "LeaderWorkerSet" and not obj.ready:
            causes.append(LWS_SAYS_NOTHING)
    return causes


def cause(observed: Mapping[str, ObservedObject], namespace: str = "") -> str:
    """The workload cluster's reason for missing pods, first cause first."""
    found = _unapplied(observed, namespace) + _workload_causes(observed)
    return found[0] if found else "the workload cluster gives no cause"


def _never_applied(observed: Mapping[str, ObservedObject]) -> bool:
    """A workload the provider cannot apply and has never seen: its pods cannot exist."""
    return any(
        name.endswith("/workload") and o.synced is False and o.remote is None
        for name, o in observed.items()
    )


def _fresh_count(evidence: Evidence) -> int | None:
    source = evidence.source
    if not isinstance(source, AgentReport):
        return None
    if source.staleness(evidence.now, evidence.max_age) is not None:
        return None
    return source.pods


def _missing_since(evidence: Evidence, admitted_at: datetime) -> datetime:
    previous = evidence.previous_since
    if previous is not None and admitted_at <= previous <= evidence.now:
        return previous
    return evidence.now


def grace_expires_at(verdict: PodsCreatedVerdict, grace: timedelta) -> datetime | None:
    """When a Creating replica turns NotCreated unless its pods appear (the first instant
    past the grace); None in any other state."""
    if verdict.condition.reason != CREATING or verdict.missing_since is None:
        return None
    return verdict.missing_since + grace + timedelta(seconds=1)


def judge(evidence: Evidence) -> PodsCreatedVerdict:
    """The PodsCreated condition and status.pods.missingSince."""
    record = evidence.record
    if record is None or record.verdict != ADMITTED:
        return _unknown("the replica is not admitted on its cluster: no pods are expected yet")
    if evidence.expected is None:
        return _unknown("the replica's spec is invalid, so how many pods it runs is unknown")
    count = 0 if _never_applied(evidence.observed) else _fresh_count(evidence)
    if count is None:
        return _unknown(
            "no fresh report from the agent counts the replica's pods", evidence.previous_since
        )
    if count >= evidence.expected:
        return PodsCreatedVerdict(
            Condition(TYPE, "True", CREATED, "every pod the replica runs exists"), None
        )
    since = _missing_since(evidence, record.decided_at or evidence.now)
    why = cause(evidence.observed, evidence.namespace)
    if evidence.now - since > evidence.grace:
        message = (
            f"the workload cluster did not create the replica's pods within "
            f"{format_duration(evidence.grace)}, so it holds no capacity: {why}"
        )
        return PodsCreatedVerdict(Condition(TYPE, "False", NOT_CREATED, message), since)
    message = f"waiting for the workload cluster to create the replica's pods: {why}"
    return PodsCreatedVerdict(Condition(TYPE, "False", CREATING, message), since)
