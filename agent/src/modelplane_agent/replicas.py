"""A replica's observation: how many of its pods exist, how many are bound.

What compose-model-replica reads (design/model-replica.md, "PodsScheduled
state machine"; the parser is compose_model_replica.pods_scheduled.parse_report):
`pods`, `scheduledPods <= pods`, and a `Scheduled` condition whose
`lastTransitionTime` says since when, on the agent's clock.

Rules, first match wins
    spec unreadable                      Unknown  InvalidSpec
    an unbound pod is Unschedulable      False    Unschedulable  "pod <name>: <scheduler>"
    no pod matches                       False    Pending (the contract's reason)
    every pod bound                      True     AllPodsBound
    otherwise                            False    Pending

Pods in phase Succeeded or Failed are not counted: they never run again and
their controller replaces them. Pods being deleted are counted while they
exist: they still hold their node and devices. The Unschedulable message
starts with the pod's name, which starts with its workload's name, so the
replica function can tell which engine it is about; among several
unschedulable pods the first by name is quoted, so the message is stable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from modelplane_common.outcome import Condition

from modelplane_agent.snapshot import Pod, ReplicaSpec, selects

SCHEDULED = "Scheduled"


@dataclass(frozen=True, slots=True)
class ReplicaReport:
    pods: int
    scheduled_pods: int
    condition: Condition


def observe_replica(spec: ReplicaSpec, pods: Iterable[Pod]) -> ReplicaReport:
    """The report on one replica, from the pods of its namespace (others are ignored)."""
    if spec.problem:
        return ReplicaReport(0, 0, Condition(SCHEDULED, "Unknown", "InvalidSpec", spec.problem))
    live = sorted(
        (
            p
            for p in pods
            if p.namespace == spec.namespace
            and not p.terminal
            and selects(spec.match_labels, p.labels)
        ),
        key=lambda p: p.name,
    )
    bound = sum(1 for p in live if p.node_name)
    unschedulable = next((p for p in live if not p.node_name and p.unschedulable), None)
    if unschedulable is not None:
        condition = Condition(
            SCHEDULED,
            "False",
            "Unschedulable",
            f"pod {unschedulable.name}: {unschedulable.unschedulable}",
        )
    elif not live:
        condition = Condition(SCHEDULED, "False", "Pending", "no pod matches the selector")
    elif bound == len(live):
        condition = Condition(
            SCHEDULED, "True", "AllPodsBound", "every pod the selector matches is bound to a node"
        )
    else:
        condition = Condition(
            SCHEDULED, "False", "Pending", "some pods are not bound to a node yet"
        )
    return ReplicaReport(len(live), bound, condition)
