"""The namespace's device quota at admission's commit point (design/admission.md, "Quota").

A replica the capacity replay admits is admitted only if its devices also fit
under its namespace's device quota behind the namespace's Admitted replicas
and its in-flight replicas placed before it, fleet-wide
(`modelplane_common.capacity.quota.replay`: one order every admission agrees
on). So two deployments of one namespace that place at once cannot exceed
the quota together: of two replicas competing for the last devices of the
quota, exactly the one placed first is admitted.

Inputs, fetched in two steps
    resource-quotas     every ResourceQuota of the replica's namespace;
                        required until its verdict is recorded; not fetched
                        yet, the replica waits.
    namespace-replicas  every ModelReplica of the namespace, required only
                        while some quota limits a DeviceClass (nothing to
                        count otherwise); not fetched yet, the replica waits.

A verdict that is already decided (sticky, or admitted because its
workloads exist) is never re-judged here: lowering a quota never stops
running work. A replica whose spec grew past the shape its Admitted verdict
charged is judged again for its growth (`Record.binds`): its held shape
counts as Admitted, its growth (the devices beyond it) in flight at its
growth's queue time; refused, it keeps running at its held shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from modelplane_common.capacity.admission import OVERCOMMITTED, Queued, Record
from modelplane_common.capacity.quota import QUOTA_EXCEEDED, DeviceQuota, replay

from compose_model_replica.admission import AdmissionVerdict, Applicant, waiting


def already_decided(applicant: Applicant) -> bool:
    """Whether admission kept a verdict it did not replay for (sticky, or running); a
    replica whose spec grew past its verdict is judged again, here too."""
    return applicant.decided


def gate(
    applicant: Applicant,
    quota: DeviceQuota | None,
    namespace_replicas: Sequence[Queued] | None,
    now: datetime,
) -> AdmissionVerdict | None:
    """Why a replica the capacity replay admitted is not admitted after all, or None."""
    if quota is None:
        return waiting("not judged: the namespace's ResourceQuotas are not fetched yet")
    if not quota.limited:
        return None
    if namespace_replicas is None:
        return waiting("not judged: the namespace's ModelReplicas are not fetched yet")
    short = replay(applicant.queued, namespace_replicas, quota)
    if short is None:
        return None
    message = f"{QUOTA_EXCEEDED}: {short.message()}"
    return AdmissionVerdict(
        reason=OVERCOMMITTED,
        message=message,
        record=Record(
            placed_at=applicant.placement, verdict=OVERCOMMITTED, decided_at=now, message=message
        ),
    )
