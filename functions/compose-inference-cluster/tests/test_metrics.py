"""What a compose-inference-cluster pass counts (`fn.measured`): its conditions and each
pool's verdict under the cluster's own name, one case per Decision."""

from __future__ import annotations

import pytest
from compose_inference_cluster import core, fn
from modelplane_common.metrics import Decided
from modelplane_common.outcome import Condition

OBSERVED = Condition("CapacityObserved", "True", "AllPoolsObserved", "observed: h100")
FALLING_BACK = Condition(
    "CapacityObserved", "False", "SomePoolsUnobserved", "observed: h100; WholeNode fallback: l4"
)


def _decision(conditions: tuple[Condition, ...], verdicts: dict[str, str]) -> core.Decision:
    return core.Decision(
        desired={},
        kept=(),
        status={},
        conditions=conditions,
        events=(),
        verdicts=tuple(
            core.PoolVerdict(pool=pool, observation=None, reason=reason, message="why")
            for pool, reason in verdicts.items()
        ),
        ready=True,
    )


CASES = {
    "every pool observed: one Observed per pool, under the cluster's name": (
        _decision((OBSERVED,), {"h100": "Observed", "l4": "Observed"}),
        Decided(conditions=(OBSERVED,), pools=(("gpu-a", "Observed"), ("gpu-a", "Observed"))),
    ),
    "a stale pool and one without an agent are counted by their verdicts": (
        _decision((FALLING_BACK,), {"h100": "Observed", "l4": "Stale", "a100": "NoAgent"}),
        Decided(
            conditions=(FALLING_BACK,),
            pools=(("gpu-a", "Observed"), ("gpu-a", "Stale"), ("gpu-a", "NoAgent")),
        ),
    ),
    "a spec that cannot be used: its condition, no pool": (
        _decision((Condition("Configured", "False", "InvalidSpec", "m"),), {}),
        Decided(conditions=(Condition("Configured", "False", "InvalidSpec", "m"),)),
    ),
}


@pytest.mark.parametrize(("decision", "expected"), CASES.values(), ids=list(CASES.keys()))
def test_a_pass_counts_its_conditions_and_pool_verdicts(decision, expected):
    assert fn.measured("gpu-a", decision) == expected
