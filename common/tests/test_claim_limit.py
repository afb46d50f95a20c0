"""claim_limit_problem: one pod's device requests allocate at most MAX_DEVICES_PER_CLAIM
devices (kube-scheduler's limit on one ResourceClaim), else one line naming the field."""

from __future__ import annotations

import pytest
from modelplane_common.devices import MAX_DEVICES_PER_CLAIM, DeviceRequest, claim_limit_problem

FIELD = "members[0].deviceRequests"
RULE = (
    "the counts sum to at most 32: a pod's one ResourceClaim allocates at most 32 devices, "
    "and kube-scheduler refuses more"
)


def requests(*counts: int) -> tuple[DeviceRequest, ...]:
    return tuple(DeviceRequest(name=f"d{i}", count=c) for i, c in enumerate(counts))


def test_the_limit_is_kubernetes_allocation_results_max_size():
    assert MAX_DEVICES_PER_CLAIM == 32


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        pytest.param((), None, id="no requests are accepted"),
        pytest.param((32,), None, id="one entry of 32 is accepted"),
        pytest.param((16, 8, 8), None, id="32 in total across three entries is accepted"),
        pytest.param((16, 17), f"{FIELD}: {RULE} (got [16, 17])", id="33 across two is refused"),
        pytest.param((33,), f"{FIELD}: {RULE} (got [33])", id="one entry of 33 is refused"),
        pytest.param(
            (1024,) * 8, f"{FIELD}: {RULE} (got [{', '.join(['1024'] * 8)}])", id="the old maximum"
        ),
    ],
)
def test_a_pods_requests_sum_to_at_most_the_claim_limit(counts, expected):
    assert claim_limit_problem(requests(*counts), FIELD) == expected
