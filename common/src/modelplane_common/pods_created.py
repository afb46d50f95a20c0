"""PodsCreated: whether an admitted replica's pods exist, and when it stops holding capacity.

A replica is admitted, charged to its pools and composed; then the workload
cluster may refuse its pods (a missing namespace, a ResourceQuota, Pod
Security, a webhook). Its workload object exists, its pods never do, and
without this rule it would be charged for ever: a phantom reservation.

compose-model-replica judges the condition (its `pods_created` module) and
every reader of a ModelReplica's charge applies `released`, the one rule:

    PodsCreated  True/Created       every pod the replica runs exists
                 False/Creating     fewer exist, for less than the grace
                                    (spec.missingPodsGracePeriod), the
                                    workload cluster's reason in the message
                 False/NotCreated   fewer exist for longer than the grace:
                                    the replica holds NO capacity, and its
                                    deployment re-places it at once
                 False/Orphaned     no ModelDeployment owns it any more
                                    (modelplane_common.orphans): it composes
                                    nothing and holds NO capacity
                 Unknown/NotObserved  nothing to count (not admitted, no fresh
                                    agent report); charged as before

Pods a NotCreated replica does run hold their devices in the agent's
histogram like any pod, so not charging the replica never counts them twice.
"""

from __future__ import annotations

from datetime import timedelta

TYPE = "PodsCreated"
CREATED = "Created"
CREATING = "Creating"
NOT_CREATED = "NotCreated"
NOT_OBSERVED = "NotObserved"

# spec.healing.missingPodsGracePeriod's default (the XRDs say the same), for a
# ModelReplica written without spec.missingPodsGracePeriod.
DEFAULT_GRACE = timedelta(minutes=5)
# The platform's maximum for every grace a tenant chooses that keeps a replica charged
# while it runs nothing (missingPodsGracePeriod here; unschedulableGracePeriod and
# missingClusterGracePeriod of its deployment): design/tenancy.md, "No phantom
# reservations". The XRDs refuse longer ones; a reader clamps one stored before that.
LONGEST_GRACE = timedelta(hours=1)


# An orphaned replica (modelplane_common.orphans) composes nothing and holds nothing.
ORPHANED = "Orphaned"


def released(status: str, reason: str) -> bool:
    """Whether a PodsCreated condition says the replica holds no capacity."""
    return status == "False" and reason in (NOT_CREATED, ORPHANED)
