"""What a compose-model-deployment pass counts (`fn.measured`): its conditions, the
replicas it placed, moved, reshaped or stranded, the pools the last unplaced replica was
refused, and the replicas it healed, each by cluster; one case per Outcome."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from compose_model_deployment import fn, placement
from compose_model_deployment.decision import Planned, Unplanned
from compose_model_deployment.model import OwnReplica, ReplicaCondition
from compose_model_deployment.placement import Change, Healed, Plan, PlannedReplica
from compose_model_deployment.report import NothingPlanned, Report
from modelplane_common.capacity.diagnosis import Cause, Diagnosis, PoolRefusal
from modelplane_common.metrics import Decided
from modelplane_common.outcome import Condition

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SHORT = Condition("ReplicasScheduled", "False", "InsufficientCapacity", "1 of 3 replicas placed")
ALL = Condition("ReplicasScheduled", "True", "AllReplicasScheduled", "3 of 3")
NO_CLUSTERS = Condition("ReplicasScheduled", "False", "NoClusters", "none matches")


def _replica(index: int, cluster: str, change: Change) -> PlannedReplica:
    return PlannedReplica(
        index=index, name=f"r{index}", cluster=cluster, engines=(), change=change, placed_at=NOW
    )


def _planned(
    condition: Condition,
    replicas: tuple[PlannedReplica, ...] = (),
    healed: tuple[Healed, ...] = (),
    diagnosis: Diagnosis | None = None,
) -> Planned:
    plan = Plan(
        replicas=replicas,
        removed=(),
        healed=healed,
        failed_placements=(),
        desired=len(replicas),
        diagnosis=diagnosis,
    )
    return Planned(
        resources={},
        status={},
        said=Report(conditions=(condition,), events=(), ready=False),
        plan=plan,
        missing=(),
        notes=(),
        cluster_labels={},
        requeue_after=timedelta(seconds=30),
    )


def _unplanned(condition: Condition) -> Unplanned:
    return Unplanned(
        resources={},
        status={},
        said=Report(conditions=(condition,), events=(), ready=False),
        why=NothingPlanned(
            desired=1,
            status=condition.status,
            reason=condition.reason,
            message=condition.message,
            needs_action=True,
        ),
        cluster_labels=None,
        requeue_after=timedelta(seconds=30),
    )


def _healed(cluster: str, why: str) -> Healed:
    return Healed(replica="r0", cluster=cluster, pools=("h100",), why=why)


CASES = {
    "nothing planned: only its condition": (
        _unplanned(NO_CLUSTERS),
        Decided(conditions=(NO_CLUSTERS,)),
    ),
    "placed, moved, reshaped and stranded replicas are counted; kept and held ones are not": (
        _planned(
            ALL,
            replicas=(
                _replica(0, "gpu-a", Change.PLACED),
                _replica(1, "gpu-b", Change.MOVED),
                _replica(2, "gpu-a", Change.RESHAPED),
                _replica(3, "gpu-c", Change.STRANDED),
                _replica(4, "gpu-a", Change.KEPT),
                _replica(5, "gpu-d", Change.HELD),
            ),
        ),
        Decided(
            conditions=(ALL,),
            placements=(
                ("gpu-a", "Placed"),
                ("gpu-b", "Moved"),
                ("gpu-a", "Reshaped"),
                ("gpu-c", "Stranded"),
            ),
        ),
    ),
    "a replica without a place: each pool it was refused, by cluster and cause": (
        _planned(
            SHORT,
            replicas=(_replica(0, "gpu-a", Change.KEPT),),
            diagnosis=Diagnosis(
                (
                    PoolRefusal("gpu-a", "h100", Cause.TOO_FEW_DEVICES),
                    PoolRefusal("gpu-b", "l4", Cause.TAINT_NOT_TOLERATED),
                )
            ),
        ),
        Decided(
            conditions=(SHORT,),
            refusals=(("gpu-a", Cause.TOO_FEW_DEVICES), ("gpu-b", Cause.TAINT_NOT_TOLERATED)),
        ),
    ),
    "each healed replica is counted by the cluster it leaves and its cause": (
        _planned(
            ALL,
            healed=(
                _healed("gpu-a", "unschedulable since 2026-01-01T00:00:00Z: 0/4 nodes"),
                _healed("gpu-b", "was not admitted on its cluster: pool h100 short 2"),
            ),
        ),
        Decided(
            conditions=(ALL,),
            healed=(("gpu-a", "Unschedulable"), ("gpu-b", "Overcommitted")),
        ),
    ),
}


@pytest.mark.parametrize(("outcome", "expected"), CASES.values(), ids=list(CASES.keys()))
def test_a_pass_counts_what_it_placed_refused_and_healed(outcome, expected):
    assert fn.measured(outcome) == expected


def _own(**conditions: object) -> OwnReplica:
    return OwnReplica(index=0, name="r0", cluster="gpu-a", engines=(), **conditions)  # type: ignore[arg-type]


# Each `why` as placement.remember builds it, from the real rule that heals for it.
HEALING_CASES = {
    "a replica unschedulable past the grace heals for Unschedulable": (
        placement.unschedulable_too_long(
            _own(
                pods_scheduled=ReplicaCondition(
                    "False", "Unschedulable", "0/4 nodes", NOW - timedelta(hours=1)
                )
            ),
            SimpleNamespace(unschedulable_grace=timedelta(minutes=5)),  # type: ignore[arg-type]
            NOW,
        ),
        "Unschedulable",
    ),
    "a replica its cluster did not admit heals for Overcommitted": (
        placement.overcommitted(_own(admission="Overcommitted", admission_message="short")),
        "Overcommitted",
    ),
    "a replica whose pods were not created heals for NotCreated": (
        placement.pods_not_created(
            _own(pods_created=ReplicaCondition("False", "NotCreated", "quota", NOW))
        ),
        "NotCreated",
    ),
    "a reason no rule writes is Other": ("something new", "Other"),
}


@pytest.mark.parametrize(("why", "cause"), HEALING_CASES.values(), ids=list(HEALING_CASES.keys()))
def test_a_healed_replica_is_counted_under_the_rule_that_healed_it(why, cause):
    assert fn.healing_cause(why) == cause
