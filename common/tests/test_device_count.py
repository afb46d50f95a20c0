"""Device-count accounting (fallback: DeviceCount), one rule per case (design/api.md section 6).

Each case reads an InferenceCluster wire dict through the shared reader,
charges the replicas pinned to its one pool and tries one engine, exactly as
the scheduler and admission do (`empty_ledger`, `charge_replicas`,
`place_engine`, `shortage`). The expected outcomes are worked out by hand
from the rule: declared devices (nodes x per node, per kind) minus what the
charged replicas claim; a pod at most one node's devices; a gang copy at
most one pod per node.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from modelplane_common.capacity.devicecount import DeviceCountLedger
from modelplane_common.capacity.diagnosis import Cause
from modelplane_common.capacity.fit import Ledger
from modelplane_common.capacity.fleet import (
    Charge,
    Fallback,
    PlacedEngine,
    PlacedMember,
    ResolvedRequest,
    Role,
)
from modelplane_common.capacity.pools import (
    charge_replicas,
    empty_ledger,
    place_engine,
    shortage,
)
from modelplane_common.capacity.readers import read_cluster
from modelplane_common.inputs import inference_cluster_problems
from modelplane_testkit import deployment_builders as t

NOW = t.NOW
GPU = t.device("gpu", 8)
NIC = t.device("nic", 2)


def request(gpus: int, nics: int = 0, *, kind: bool = True) -> tuple[ResolvedRequest, ...]:
    """One pod's claims; `kind=False` is how a ModelReplica reads back (class only)."""
    claims = [ResolvedRequest("gpus", GPU["deviceClassName"], gpus, kind="gpu" if kind else None)]
    if nics:
        claims.append(
            ResolvedRequest("nics", NIC["deviceClassName"], nics, kind="nic" if kind else None)
        )
    return tuple(claims)


def standalone(gpus: int, copies: int = 1, nics: int = 0, *, kind: bool = True) -> PlacedEngine:
    member = PlacedMember(Role.STANDALONE, "pool", request(gpus, nics, kind=kind))
    return PlacedEngine("serve", copies, (member,))


def gang(gpus: int, workers: int) -> PlacedEngine:
    leader = PlacedMember(Role.LEADER, "pool", request(gpus))
    worker = PlacedMember(Role.WORKER, "pool", request(gpus), pods_per_copy=workers)
    return PlacedEngine("serve", 1, (leader, worker))


def charges(*engines: PlacedEngine) -> tuple[Charge, ...]:
    """Replicas pinned to the pool, none of them contained by any histogram."""
    return tuple(
        Charge("team-a", f"other-{i}", "east", (engine,)) for i, engine in enumerate(engines)
    )


def claimed(gpus: int, pods: int) -> tuple[Charge, ...]:
    """`pods` replicas of `gpus` GPUs each, as read back from their ModelReplicas."""
    return charges(*[standalone(gpus, kind=False) for _ in range(pods)])


@dataclass(frozen=True)
class Case:
    nodes: int
    engine: PlacedEngine
    fits: bool
    cause: Cause | None = None  # why it was refused
    free_after: tuple[int, ...] | None = None  # the free totals once it is placed
    already: tuple[Charge, ...] = ()
    fallback: object = "DeviceCount"
    devices: tuple[dict, ...] = (GPU,)
    histogram: list | None = None  # publish an observation (fresh unless observed_at says)
    observed_at: str | None = None
    mode: str = "Observed"


def attempt(case: Case) -> tuple[bool, Cause | None, tuple[int, ...]]:
    spec, status = t.pool(
        "pool",
        case.nodes,
        list(case.devices),
        histogram=case.histogram,
        observed_at=case.observed_at,
    )
    cluster, _ = read_cluster(
        t.cluster("east", [(spec, status)], mode=case.mode, fallback=case.fallback)
    )
    (pool,) = cluster.pools
    ledger, basis = empty_ledger(pool, cluster, NOW)
    charge_replicas(ledger, pool, basis, case.already)
    trial = ledger.copy()
    if place_engine(trial, pool, case.engine):
        return True, None, trial.free_devices()
    return False, shortage(ledger, pool, case.engine), ledger.free_devices()


CASES = [
    pytest.param(
        Case(4, standalone(2), True, free_after=(0,), already=claimed(2, 15)),
        id="a pool of 4x8 with 30 claimed admits a 2-GPU pod",
    ),
    pytest.param(
        Case(4, standalone(3), False, Cause.TOO_FEW_DEVICES, already=claimed(2, 15)),
        id="a pool of 4x8 with 30 claimed refuses a 3-GPU pod: too few free devices",
    ),
    pytest.param(
        Case(4, standalone(8), True, free_after=(0,), already=claimed(6, 4)),
        id="fragmentation is not seen: four 6-GPU pods on 4x8 leave 8 GPUs, an 8-GPU pod fits",
    ),
    pytest.param(
        Case(4, standalone(8), False, Cause.TOO_FEW_DEVICES, already=claimed(6, 4), fallback=None),
        id="whole-node accounting (the default) refuses the same 8-GPU pod",
    ),
    pytest.param(
        Case(4, standalone(1), True, free_after=(27,), already=claimed(1, 4)),
        id="a charged replica holds its device requests, not whole nodes",
    ),
    pytest.param(
        Case(2, gang(1, workers=2), False, Cause.TOO_FEW_NODES),
        id="a gang of 3 on a 2-node pool does not fit although 16 GPUs are free",
    ),
    pytest.param(
        Case(2, gang(8, workers=1), True, free_after=(0,)),
        id="a gang of 2 whole-node pods fits a 2-node pool",
    ),
    pytest.param(
        Case(4, standalone(9), False, Cause.TOO_FEW_NODES),
        id="a 9-GPU pod on 8-GPU nodes does not fit although 32 GPUs are free",
    ),
    pytest.param(
        Case(4, standalone(2, copies=17), False, Cause.TOO_FEW_DEVICES),
        id="copies are counted together: 17 copies of 2 GPUs exceed 4x8",
    ),
    pytest.param(
        Case(
            2,
            standalone(1, nics=1),
            False,
            Cause.TOO_FEW_DEVICES,
            already=charges(*[standalone(1, nics=1, kind=False) for _ in range(4)]),
            devices=(GPU, NIC),
        ),
        id="every claimed kind is counted: 4 NICs of 2x2 claimed leave none for a fifth pod",
    ),
    pytest.param(
        Case(
            4,
            standalone(2),
            True,
            free_after=(22,),
            already=claimed(8, 1),
            histogram=[({"gpu": 0}, 4)],
            observed_at=t.ago(20),
        ),
        id="stale observation + DeviceCount: declared devices minus claims, the stale "
        "histogram ignored",
    ),
    pytest.param(
        Case(4, standalone(2), True, free_after=(14,), already=claimed(8, 2), mode="Declared"),
        id="Declared + DeviceCount: declared devices minus claims",
    ),
    pytest.param(
        Case(4, standalone(1), True, free_after=(24,), mode="Declared", fallback=None),
        id="Declared without a fallback is whole-node: a 1-GPU pod takes a whole node",
    ),
    pytest.param(
        Case(
            4,
            standalone(2),
            False,
            Cause.TOO_FEW_NODES,
            histogram=[({"gpu": 1}, 4)],
            observed_at=t.ago(1),
        ),
        id="a fresh observation wins over the fallback: 4 GPUs free but one per node",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_device_count_accounting(case: Case):
    fits, cause, free = attempt(case)
    assert (fits, cause) == (case.fits, case.cause)
    if case.free_after is not None:
        assert free == case.free_after


def test_a_declared_pool_counted_by_devices_says_so_in_its_basis():
    cluster, _ = read_cluster(
        t.cluster("east", [t.pool("pool", 4)], mode="Declared", fallback="DeviceCount")
    )
    (pool,) = cluster.pools
    ledger, basis = empty_ledger(pool, cluster, NOW)
    assert pool.fallback is Fallback.DEVICE_COUNT
    assert isinstance(ledger, DeviceCountLedger)
    assert (basis.accounting, basis.reason) == (
        "DeviceCount",
        "the cluster declares its capacity (observation mode Declared)",
    )


READINGS = [
    pytest.param(None, None, Fallback.WHOLE_NODE, [], id="nothing set: WholeNode"),
    pytest.param("DeviceCount", None, Fallback.DEVICE_COUNT, [], id="cluster-wide DeviceCount"),
    pytest.param("DeviceCount", "WholeNode", Fallback.WHOLE_NODE, [], id="a pool's own value wins"),
    pytest.param(None, "DeviceCount", Fallback.DEVICE_COUNT, [], id="a pool may opt in alone"),
    pytest.param(
        "Sometimes",
        None,
        Fallback.WHOLE_NODE,
        [
            "cluster east: spec.observation.fallback: must be one of WholeNode, DeviceCount; "
            'using WholeNode (got "Sometimes")'
        ],
        id="an unknown cluster-wide value reads as WholeNode with a warning",
    ),
    pytest.param(
        "DeviceCount",
        7,
        Fallback.WHOLE_NODE,
        [
            "cluster east: spec.nodePools[0].fallback: must be one of WholeNode, DeviceCount; "
            "using WholeNode (got 7)"
        ],
        id="a pool's value of the wrong type reads as WholeNode with a warning",
    ),
]


@pytest.mark.parametrize(("cluster_wide", "own", "expected", "notes"), READINGS)
def test_fallbacks_are_read_leniently(cluster_wide, own, expected, notes):
    spec, status = t.pool("pool", 4, fallback=own)
    body = t.cluster("east", [(spec, status)], fallback=cluster_wide)
    cluster, read_notes = read_cluster(body)
    assert cluster.pools[0].fallback is expected
    assert read_notes == notes
    # The schema check leaves the fallback to its reader: the spec stays readable.
    assert inference_cluster_problems(body["spec"]) == []


def test_the_schema_check_still_reports_everything_else_beside_a_bad_fallback():
    spec, status = t.pool("pool", 4, fallback="Sometimes")
    body = t.cluster("east", [(spec, status)])
    body["spec"]["nodePools"][0]["nodeCount"] = -1
    assert inference_cluster_problems(body["spec"]) == [
        "spec.nodePools[0].nodeCount: Input should be greater than or equal to 0 (got -1)"
    ]


LEDGERS = [
    pytest.param(DeviceCountLedger((8,), 0), [(0,)], False, id="a claimless pod needs a node"),
    pytest.param(DeviceCountLedger((8,), 1), [(0,)], True, id="a claimless pod takes nothing"),
    pytest.param(
        DeviceCountLedger((8,), 2),
        [(0,), (8,), (8,)],
        False,
        id="a claimless leader needs its node",
    ),
    pytest.param(
        Ledger({(8,): 2}, (8,), whole_node=True),
        [(1,), (1,), (1,)],
        False,
        id="whole-node accounting agrees: three pods need three nodes",
    ),
]


@pytest.mark.parametrize(("ledger", "pods", "fits"), LEDGERS)
def test_gangs_need_one_node_per_pod(ledger, pods, fits):
    before = ledger.free_devices()
    assert ledger.place_gang(pods) is fits
    if not fits:
        assert ledger.free_devices() == before  # all or nothing
