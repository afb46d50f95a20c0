"""A replica's observation: how many of its pods exist, how many are bound.

What compose-model-replica reads (design/model-replica.md, "PodsScheduled
state machine"; the parser is compose_model_replica.pods_scheduled.parse_report):
`pods`, `scheduledPods <= pods`, and a `Scheduled` condition whose
`lastTransitionTime` says since when, on the agent's clock.

A pod is PLACED when it is bound to a node (`spec.nodeName`) and every
ResourceClaim it references is seen allocated. kube-scheduler writes a
claim's allocation before it binds the pod, but the agent watches claims and
pods on separate streams, so it may see the binding first; counting such a
pod scheduled would let its pools publish an `observedAt` after the
replica's `scheduledAt` while its devices still read free (the fleet would
stop charging the replica and count its devices free: a double booking).

Rules, first match wins
    spec unreadable                      Unknown  InvalidSpec
    an unbound pod is Unschedulable      False    Unschedulable  "pod <name>: <scheduler>"
    no pod matches                       False    Pending (the contract's reason)
    every pod placed                     True     AllPodsBound
    a bound pod not placed               False    Pending  "pod <name> is bound; its
                                                  ResourceClaim <claim> is not seen
                                                  allocated yet"
    otherwise                            False    Pending

`scheduledPods` counts placed pods.

Pods in phase Succeeded or Failed are not counted: they never run again and
their controller replaces them. Pods being deleted are counted while they
exist: they still hold their node and devices. The Unschedulable message
starts with the pod's name, which starts with its workload's name, so the
replica function can tell which engine it is about; among several
unschedulable pods the first by name is quoted, so the message is stable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from modelplane_common.outcome import Condition
from modelplane_common.selectors import selects

from modelplane_agent.snapshot import Pod, ReplicaObservationSpec

SCHEDULED = "Scheduled"


@dataclass(frozen=True, slots=True)
class ReplicaReport:
    pods: int
    scheduled_pods: int
    condition: Condition


def observe_replica(
    spec: ReplicaObservationSpec, pods: Iterable[Pod], claim_allocated: Callable[[str, str], bool]
) -> ReplicaReport:
    """The report on one replica, from the pods of its namespace (others are ignored);
    `claim_allocated(namespace, name)` says whether a claim is seen allocated."""
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
    waiting = {p.name: _waiting_claim(p, claim_allocated) for p in live if p.node_name}
    placed = sum(1 for claim in waiting.values() if claim is None)
    unschedulable = next((p for p in live if not p.node_name and p.unschedulable), None)
    held_back = next(((n, c) for n, c in waiting.items() if c is not None), None)
    if unschedulable is not None:
        condition = Condition(
            SCHEDULED,
            "False",
            "Unschedulable",
            f"pod {unschedulable.name}: {unschedulable.unschedulable}",
        )
    elif not live:
        condition = Condition(SCHEDULED, "False", "Pending", "no pod matches the selector")
    elif placed == len(live):
        condition = Condition(
            SCHEDULED, "True", "AllPodsBound", "every pod the selector matches is bound to a node"
        )
    elif held_back is not None:
        condition = Condition(
            SCHEDULED,
            "False",
            "Pending",
            f"pod {held_back[0]} is bound; its ResourceClaim {held_back[1]} "
            "is not seen allocated yet",
        )
    else:
        condition = Condition(
            SCHEDULED, "False", "Pending", "some pods are not bound to a node yet"
        )
    return ReplicaReport(len(live), placed, condition)


def _waiting_claim(pod: Pod, claim_allocated: Callable[[str, str], bool]) -> str | None:
    """The first claim of a bound pod not seen allocated (or its unresolved entry)."""
    if pod.claims_unresolved:
        return f"for {pod.claims_unresolved[0]}"
    return next((c for c in pod.claims if not claim_allocated(pod.namespace, c)), None)
