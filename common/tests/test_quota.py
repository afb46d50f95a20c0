"""Device quotas per namespace: reading ResourceQuotas, counting claims, admission's replay."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from modelplane_common.capacity.admission import ADMITTED, OVERCOMMITTED, Queued
from modelplane_common.capacity.fleet import (
    Charge,
    PlacedEngine,
    PlacedMember,
    ResolvedRequest,
    Role,
)
from modelplane_common.capacity.quota import (
    DeviceQuota,
    Limit,
    QuotaLedger,
    devices_of,
    quota_key,
    read_device_quota,
    replay,
)

GPU = "gpu.example.com"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def quota(name, hard):
    return {"metadata": {"name": name, "namespace": "team-a"}, "spec": {"hard": hard}}


def test_the_key_is_kubernetes_resource_claims_per_class():
    # k8s.io/api core/v1 ResourceClaimsPerClass, as tools/kubernetes pins it.
    assert quota_key(GPU) == "gpu.example.com.deviceclass.resource.k8s.io/devices"


@pytest.mark.parametrize(
    ("quotas", "limits", "notes"),
    [
        pytest.param([], {}, 0, id="no ResourceQuota limits nothing"),
        pytest.param(
            [quota("q", {"requests.cpu": "4", "pods": "10"})],
            {},
            0,
            id="non-device keys are not ours",
        ),
        pytest.param(
            [quota("q", {quota_key(GPU): "8"})], {GPU: Limit(8, "q")}, 0, id="a string count"
        ),
        pytest.param(
            [quota("q", {quota_key(GPU): 8})], {GPU: Limit(8, "q")}, 0, id="an integer count"
        ),
        pytest.param(
            [quota("q", {quota_key(GPU): "1500m"})],
            {GPU: Limit(1, "q")},
            0,
            id="a fraction counts whole devices",
        ),
        pytest.param(
            [quota("big", {quota_key(GPU): "16"}), quota("small", {quota_key(GPU): "4"})],
            {GPU: Limit(4, "small")},
            0,
            id="of several quotas the smallest limits",
        ),
        pytest.param(
            [quota("q", {quota_key(GPU): "lots"})],
            {},
            1,
            id="a value that is not a quantity is noted and skipped",
        ),
    ],
)
def test_read_device_quota(quotas, limits, notes):
    read, said = read_device_quota("team-a", quotas)
    assert dict(read.limits) == limits
    assert len(said) == notes


def engine(count, *, copies=1, workers=0, device_class=GPU):
    request = (ResolvedRequest("gpu", device_class, count),)
    if workers:
        members = (
            PlacedMember(Role.LEADER, "p", ()),
            PlacedMember(Role.WORKER, "p", request, pods_per_copy=workers),
        )
    else:
        members = (PlacedMember(Role.STANDALONE, "p", request),)
    return PlacedEngine("e", copies, members)


@pytest.mark.parametrize(
    ("engines", "claimed"),
    [
        pytest.param([engine(2)], {GPU: 2}, id="one pod's count"),
        pytest.param([engine(2, copies=3)], {GPU: 6}, id="times the copies"),
        pytest.param(
            [engine(8, copies=2, workers=4)], {GPU: 64}, id="times each copy's worker pods"
        ),
        pytest.param(
            [engine(1), engine(4, device_class="big.example.com")],
            {GPU: 1, "big.example.com": 4},
            id="per DeviceClass",
        ),
    ],
)
def test_devices_of(engines, claimed):
    assert devices_of(engines) == Counter(claimed)


LIMITED = DeviceQuota("team-a", {GPU: Limit(8, "q")})


def test_the_ledger_names_the_quota_the_used_and_the_requested():
    ledger = QuotaLedger(LIMITED, Counter({GPU: 6}))
    assert ledger.shortfall({GPU: 2}) is None
    short = ledger.shortfall({GPU: 4})
    assert short is not None
    assert (short.limit.hard, short.used, short.requested) == (8, 6, 4)
    assert short.message() == (
        "namespace team-a quota q allows 8 gpu.example.com device(s): 6 used, a replica requests 4"
    )
    assert ledger.shortfall({"other.example.com": 100}) is None


def queued(name, minutes, verdict=None, gpus=4, namespace="team-a"):
    charge = Charge(namespace, name, "east", (engine(gpus),))
    return Queued(charge, T0 + timedelta(minutes=minutes), verdict)


@pytest.mark.parametrize(
    ("mine", "others", "fits"),
    [
        pytest.param(queued("me", 5), [], True, id="alone under the quota"),
        pytest.param(queued("me", 5, gpus=12), [], False, id="alone over the quota"),
        pytest.param(queued("me", 5), [queued("a", 9, ADMITTED)], True, id="behind one admitted"),
        pytest.param(
            queued("me", 5),
            [queued("a", 9, ADMITTED), queued("b", 9, ADMITTED)],
            False,
            id="admitted replicas count whenever they were placed",
        ),
        pytest.param(
            queued("me", 5),
            [queued("a", 1), queued("b", 2)],
            False,
            id="in-flight ones placed earlier go first",
        ),
        pytest.param(
            queued("me", 5),
            [queued("a", 1), queued("b", 6)],
            True,
            id="in-flight ones placed later do not count",
        ),
        pytest.param(
            queued("me", 5),
            [queued("a", 1, OVERCOMMITTED), queued("b", 2, OVERCOMMITTED)],
            True,
            id="overcommitted replicas hold nothing",
        ),
        pytest.param(
            queued("me", 5),
            [queued("big", 1, gpus=12), queued("a", 2)],
            True,
            id="an earlier one over the quota takes nothing",
        ),
    ],
)
def test_replay(mine, others, fits):
    assert (replay(mine, others, LIMITED) is None) is fits


def test_replay_without_a_limit_admits_anything():
    assert replay(queued("me", 5, gpus=1000), [], DeviceQuota("team-a")) is None
