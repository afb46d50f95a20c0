"""What a compose-model-replica pass counts (`fn.measured`): its conditions and, once per
placement, the admission verdict it reached on its cluster; one case per Outcome."""

from __future__ import annotations

from datetime import timedelta

import pytest
from compose_model_replica import core, fn
from modelplane_common.metrics import Decided
from modelplane_common.outcome import Condition

PLACED_AT = "2026-01-01T00:00:00.000000Z"
WAITING = Condition("Admitted", "False", "WaitingForAdmission", "settling")
ADMITTED = Condition("Admitted", "True", "Admitted", "fits")
QUOTA = Condition("Admitted", "False", "Overcommitted", "QuotaExceeded: quota q allows 8 gpu")
RECORD = {"placedAt": PLACED_AT, "verdict": "Admitted", "decidedAt": "2026-01-01T00:00:10Z"}


def _outcome(admitted: Condition, admission: dict | None) -> core.Outcome:
    status = {"admission": admission} if admission is not None else {}
    return core.Outcome(
        requirements=core.Requirements(cluster="gpu-a", replicas_of=""),
        resources={},
        kept_unchanged=(),
        status=status,
        conditions=(admitted,),
        events=(),
        ready=False,
        requeue_after=timedelta(seconds=10),
    )


CASES = {
    "waiting for admission: no verdict counted": (
        None,
        _outcome(WAITING, None),
        Decided(conditions=(WAITING,)),
    ),
    "the first verdict for a placement is counted on the replica's cluster": (
        {},
        _outcome(ADMITTED, RECORD),
        Decided(conditions=(ADMITTED,), admission=("gpu-a", ADMITTED)),
    ),
    "the sticky verdict on a later pass is not counted again": (
        {"admission": RECORD},
        _outcome(ADMITTED, RECORD),
        Decided(conditions=(ADMITTED,)),
    ),
    "a quota's refusal is counted with its condition (metrics names it QuotaExceeded)": (
        {"admission": {"placedAt": PLACED_AT}},
        _outcome(QUOTA, {**RECORD, "verdict": "Overcommitted", "message": QUOTA.message}),
        Decided(conditions=(QUOTA,), admission=("gpu-a", QUOTA)),
    ),
    "a status that is not an object is read as none": (
        "garbage",
        _outcome(ADMITTED, RECORD),
        Decided(conditions=(ADMITTED,), admission=("gpu-a", ADMITTED)),
    ),
}


@pytest.mark.parametrize(
    ("previous", "outcome", "expected"), CASES.values(), ids=list(CASES.keys())
)
def test_a_pass_counts_its_conditions_and_the_verdict_it_reached(previous, outcome, expected):
    assert fn.measured(previous, outcome) == expected
