"""When a ModelDeployment is Ready: the rule behind its own `Ready` condition.

Crossplane sets an XR's `Ready` condition itself. When the function leaves
`desired.composite.ready` unspecified, Crossplane derives it from the
composed resources: Available when the function marked every one of them
ready, which includes having none. That says nothing about a deployment (one
that placed no replica would read Available), so this function always
states the deployment's readiness (design/readiness.md), by this rule.

The rule, over the replica counts the function publishes in
`status.replicas`:

- `spec.replicas` is 0 (scaled to zero): ready; nothing is expected to serve.
- Otherwise ready exactly when `ready >= desired`; since `desired >= 1`
  that also means at least one replica is serving.

A ModelReplica counts as ready when its `PodsScheduled` and `Ready`
conditions are both True and it is not being moved in this pass.

Readiness never depends on the inputs the scheduler reads (clusters, other
replicas, failure memory): those decide where new work goes, not whether
the running replicas serve. So a pass that cannot plan because such an
input is missing or unreadable still applies the rule to the replicas it
keeps, and a running deployment does not flip to not-ready because a
required resource is momentarily absent.

Replicas held on a cluster that is missing from the inputs or unreadable
(scheduler.md, "A cluster that vanishes") are not counted ready in
`status.replicas`: nothing this pass can confirm they serve. Their cluster
is an input like any other, so its momentary absence must not flip a
running deployment to not-ready either: while some replicas are held, the
function carries the deployment's previous `Ready`, and only as far as the
evidence allows (previously Ready, and the counted replicas plus the held
ones whose own ModelReplica last read ready still reach the desired count).

Only when `spec.replicas` itself cannot be read is the desired count
unknown. Then the function neither claims nor withdraws readiness on new
evidence: it carries the deployment's previous `Ready` condition, and only
as far as the replicas it keeps allow (previously Ready and every kept
replica ready). A deployment that never was Ready stays not ready.
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_READY = "AllReplicasReady"
NOT_READY = "ReplicasNotReady"
SCALED_TO_ZERO = "ScaledToZero"
DESIRED_UNKNOWN = "DesiredReplicasUnknown"
HELD = "ReplicasHeld"


@dataclass(frozen=True, slots=True)
class Readiness:
    """Whether the deployment is Ready, and the `ReplicasReady` reason and message saying why."""

    ready: bool
    reason: str
    message: str


def of_replicas(desired: int, ready: int) -> Readiness:
    """The rule, for a known desired count (`spec.replicas`, never negative)."""
    counted = f"{ready} of {desired} replicas ready"
    if desired == 0:
        return Readiness(ready=True, reason=SCALED_TO_ZERO, message=f"scaled to zero; {counted}")
    if ready >= desired:
        return Readiness(ready=True, reason=ALL_READY, message=counted)
    return Readiness(ready=False, reason=NOT_READY, message=counted)


def carried(previously_ready: bool, kept: int, kept_ready: int) -> Readiness:
    """The desired count is unknown: keep the previous readiness while the kept replicas allow."""
    ready = previously_ready and kept_ready == kept
    before = "Ready" if previously_ready else "not Ready"
    return Readiness(
        ready,
        DESIRED_UNKNOWN,
        f"spec.replicas is unreadable; the deployment was {before} and "
        f"{kept_ready} of {kept} kept replicas are ready",
    )


def while_held(
    previously_ready: bool, desired: int, ready: int, held: int, held_ready: int
) -> Readiness:
    """Some replicas are held on an unseen cluster: carry the previous readiness as evidence allows.

    `ready` counts the replicas confirmed this pass; `held_ready` the held
    ones whose own ModelReplica last read ready.
    """
    still = previously_ready and of_replicas(desired, ready + held_ready).ready
    before = "Ready" if previously_ready else "not Ready"
    return Readiness(
        still,
        HELD,
        f"{ready} of {desired} replicas ready; {held_ready} of {held} held on a cluster "
        f"that cannot be seen last read ready; the deployment was {before}",
    )
