"""The placement rules, one table row each: the id is the rule the row proves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from types import MappingProxyType
from typing import NamedTuple

import pytest
from compose_model_deployment.placement import Change
from modelplane_common.timeutil import format_time
from modelplane_testkit import deployment_builders as t


def one_pool(nodes=1, histogram=None, *, devices=None, name="a", pool_name="p", **kw):
    return t.cluster(name, [t.pool(pool_name, nodes, devices, histogram=histogram, **kw)])


def placed(plan):
    return sum(1 for r in plan.replicas if r.scheduled)


def where(plan):
    return [(r.cluster, r.pools) for r in plan.replicas]


def own(index, cluster, pool_name="p", *, gpus=1, name="llm", **kw):
    return {
        f"replica-{index}": t.model_replica(
            f"{name}-{index}",
            "team-a",
            cluster,
            [t.replica_engine("serve", pool_name, gpus=gpus)],
            deployment_name=name,
            index=index,
            **kw,
        )
    }


def merge(*dicts):
    out = {}
    for d in dicts:
        out.update(d)
    return out


FULL = {"gpu": 8}
OTHER_LATE = t.model_replica(
    "other-0",
    "team-b",
    "a",
    [t.replica_engine("serve", "p", gpus=8)],
    scheduled_at=t.ago(0, 10),  # after the pool's observation (1 minute ago)
)
OTHER_EARLY = t.model_replica(
    "other-0",
    "team-b",
    "a",
    [t.replica_engine("serve", "p", gpus=8)],
    scheduled_at=t.ago(5),
)
OTHER_PENDING = t.model_replica(
    "other-0",
    "team-b",
    "a",
    [t.replica_engine("serve", "p", gpus=8)],
    pods_scheduled="False",
    reason="PodsPending",
)


class CapacityCase(NamedTuple):
    spec: str  # the capacity rule the case proves
    xr: dict  # the ModelDeployment
    clusters: list[dict]  # the selected InferenceClusters
    placed: int  # replicas the plan places
    own: Mapping[str, dict] = MappingProxyType({})  # the deployment's observed replicas
    others: Sequence[dict] = ()  # the fleet's other ModelReplicas


CAPACITY = [
    CapacityCase(
        spec="a fresh histogram's free GPUs are shared, not charged as whole nodes",
        xr=t.deployment(replicas=4, engines=[t.standalone(gpus=2)]),
        clusters=[one_pool(1, [(FULL, 1)])],
        placed=4,
    ),
    CapacityCase(
        spec="an unobserved pool charges a whole node per claiming pod",
        xr=t.deployment(replicas=4, engines=[t.standalone(gpus=2)]),
        clusters=[one_pool(1)],
        placed=1,
    ),
    CapacityCase(
        spec="a stale observation falls back to whole-node accounting",
        xr=t.deployment(replicas=4, engines=[t.standalone(gpus=2)]),
        clusters=[one_pool(1, [(FULL, 1)], observed_at=t.ago(10))],
        placed=1,
    ),
    CapacityCase(
        spec="a Declared cluster uses whole-node accounting",
        xr=t.deployment(replicas=4, engines=[t.standalone(gpus=2)]),
        clusters=[t.cluster("a", [t.pool("p", 1, histogram=[(FULL, 1)])], mode="Declared")],
        placed=1,
    ),
    CapacityCase(
        spec="a histogram contradicting the declared devices falls back to whole nodes",
        xr=t.deployment(replicas=4, engines=[t.standalone(gpus=2)]),
        clusters=[one_pool(1, [({"gpu": 9}, 1)])],
        placed=1,
    ),
    CapacityCase(
        spec="the histogram's used devices are not offered again",
        xr=t.deployment(replicas=4, engines=[t.standalone(gpus=2)]),
        clusters=[one_pool(1, [({"gpu": 4}, 1)])],
        placed=2,
    ),
    CapacityCase(
        spec="a pool may grow by nodes minus observedNodes empty nodes",
        xr=t.deployment(replicas=3, engines=[t.standalone(gpus=8)]),
        clusters=[one_pool(1, [({"gpu": 0}, 1)], max_nodes=3, observed_nodes=1)],
        placed=2,
    ),
    CapacityCase(
        spec="growth is clamped at zero during a surge",
        xr=t.deployment(replicas=3, engines=[t.standalone(gpus=8)]),
        clusters=[one_pool(1, [(FULL, 1)], max_nodes=3, observed_nodes=4)],
        placed=1,
    ),
    CapacityCase(
        spec="a report beyond the surge margin is rejected, and whole nodes are capped at "
        "the 1 it shows free (a report may only lower capacity)",
        xr=t.deployment(replicas=3, engines=[t.standalone(gpus=8)]),
        clusters=[one_pool(1, [(FULL, 1)], max_nodes=3, observed_nodes=5)],
        placed=1,
    ),
    CapacityCase(
        spec="a booting node is neither free nor growable",
        xr=t.deployment(replicas=2, engines=[t.standalone(gpus=8)]),
        clusters=[one_pool(1, [(FULL, 1)], max_nodes=2, observed_nodes=2)],
        placed=1,
    ),
    CapacityCase(
        spec="a replica scheduled after the observation is charged",
        xr=t.deployment(replicas=1, engines=[t.standalone(gpus=8)]),
        clusters=[one_pool(1, [(FULL, 1)])],
        others=[OTHER_LATE],
        placed=0,
    ),
    CapacityCase(
        spec="a replica the observation already contains is not charged twice",
        xr=t.deployment(replicas=1, engines=[t.standalone(gpus=8)]),
        clusters=[one_pool(1, [(FULL, 1)])],
        others=[OTHER_EARLY],
        placed=1,
    ),
    CapacityCase(
        spec="a replica whose pods are not all scheduled is charged",
        xr=t.deployment(replicas=1, engines=[t.standalone(gpus=8)]),
        clusters=[one_pool(1, [(FULL, 1)])],
        others=[OTHER_PENDING],
        placed=0,
    ),
    CapacityCase(
        spec="every replica pinned to an unobserved pool is charged",
        xr=t.deployment(replicas=2, engines=[t.standalone(gpus=8)]),
        clusters=[one_pool(2)],
        others=[OTHER_EARLY],
        placed=1,
    ),
    CapacityCase(
        spec="gang pods never share a node",
        xr=t.deployment(replicas=1, engines=[t.gang(leader_gpus=0, worker_gpus=8)]),
        clusters=[one_pool(1, [({"gpu": 16}, 1)], devices=[t.device(count=16)])],
        placed=0,
    ),
    CapacityCase(
        spec="standalone pods may share a node",
        xr=t.deployment(replicas=1, engines=[t.standalone(gpus=8, copies=2)]),
        clusters=[one_pool(1, [({"gpu": 16}, 1)], devices=[t.device(count=16)])],
        placed=1,
    ),
    CapacityCase(
        spec="a claimless leader still needs a node apart from its workers",
        xr=t.deployment(replicas=1, engines=[t.gang(worker_gpus=8, workers=2)]),
        clusters=[one_pool(2, [(FULL, 2)])],
        placed=0,
    ),
    CapacityCase(
        spec="a claimless leader may sit on a node with no free device",
        xr=t.deployment(replicas=1, engines=[t.gang(worker_gpus=8, workers=2)]),
        clusters=[one_pool(3, [(FULL, 2), ({"gpu": 0}, 1)])],
        placed=1,
    ),
    CapacityCase(
        spec="copies of a gang are independent and may reuse each other's nodes",
        xr=t.deployment(replicas=1, engines=[t.gang(worker_gpus=8, copies=2)]),
        clusters=[one_pool(2, [(FULL, 2)])],
        placed=1,
    ),
    CapacityCase(
        spec="a gang needs distinct nodes even when the devices add up",
        xr=t.deployment(replicas=1, engines=[t.gang(leader_gpus=4, worker_gpus=4, workers=3)]),
        clusters=[one_pool(3, [(FULL, 3)])],
        placed=0,
    ),
    CapacityCase(
        spec="the leader gets the one node only it can use (Hall's condition)",
        xr=t.deployment(replicas=1, engines=[t.gang(leader_gpus=8, worker_gpus=2, workers=2)]),
        clusters=[one_pool(3, [(FULL, 1), ({"gpu": 2}, 2)])],
        placed=1,
    ),
    CapacityCase(
        spec="one pass never overcommits what it has just placed",
        xr=t.deployment(replicas=3, engines=[t.standalone(gpus=4)]),
        clusters=[one_pool(1, [(FULL, 1)])],
        placed=2,
    ),
]


@pytest.mark.parametrize("case", CAPACITY, ids=lambda case: case.spec)
def test_capacity_rules(case: CapacityCase):
    plan = t.schedule(case.xr, case.clusters, case.own, case.others)
    assert placed(plan) == case.placed
    assert plan.missing == case.xr["spec"]["replicas"] - case.placed


NIC_POOL = t.cluster(
    "a",
    [
        t.pool(
            "p", 1, [t.device("gpu", 8), t.device("nic", 4)], histogram=[({"gpu": 8, "nic": 1}, 1)]
        )
    ],
)
NIC_ENGINE = {
    "name": "serve",
    "members": [
        {
            "role": "Standalone",
            "nodeSelector": {"devices": [{"name": "gpu", "count": 2}, {"name": "nic", "count": 2}]},
            "template": {"spec": {"containers": [{"name": "serve"}]}},
        }
    ],
}


def test_every_claimed_kind_must_fit_on_the_node():
    plan = t.schedule(t.deployment(engines=[NIC_ENGINE]), [NIC_POOL])
    assert placed(plan) == 0
    assert plan.diagnosis is not None
    assert plan.diagnosis.summary() == "1 pool checked, 1 too few free devices"


def test_synthetic_kinds_are_matched_but_never_claimed():
    devices = [t.device("gpu", 8), t.device("ib", 1, claim="Synthetic")]
    engine = {
        "name": "serve",
        "members": [
            {
                "role": "Standalone",
                "nodeSelector": {
                    "devices": [{"name": "gpu", "count": 8}, {"name": "ib", "count": 1}]
                },
                "template": {"spec": {"containers": [{"name": "serve"}]}},
            }
        ],
    }
    plan = t.schedule(
        t.deployment(engines=[engine]),
        [t.cluster("a", [t.pool("p", 1, devices, histogram=[(FULL, 1)])])],
    )
    (replica,) = plan.replicas
    requests = replica.engines[0].members[0].requests
    assert [(r.name, r.device_class, r.count) for r in requests] == [("gpu", "gpu.example.com", 8)]


def test_a_pool_whose_devices_do_not_match_is_skipped():
    xr = t.deployment(engines=[t.standalone(gpus=1, selectors=["device.driver == 'amd.com'"])])
    amd = [t.device("gpu", 8, driver="amd.com")]
    clusters = [
        one_pool(1, [(FULL, 1)], name="a"),
        t.cluster("b", [t.pool("p", 1, amd, histogram=[(FULL, 1)])]),
    ]
    plan = t.schedule(xr, clusters)
    assert where(plan) == [("b", ("p",))]


POOL_ORDER = [
    pytest.param(1, ("small",), id="a 1-GPU engine tries the 4-GPU pool before the 8-GPU pool"),
    pytest.param(
        4, ("small",), id="a 4-GPU engine fills a 4-GPU node before breaking an 8-GPU one"
    ),
    pytest.param(8, ("big",), id="an 8-GPU engine goes to the only pool whose nodes hold it"),
]


@pytest.mark.parametrize(("gpus", "pools"), POOL_ORDER)
def test_engines_try_the_smallest_matching_hardware_first(gpus, pools):
    # "big" sorts before "small" by name: only the hardware rule puts small first.
    clusters = [
        t.cluster(
            "a",
            [
                t.pool("big", 2, [t.device("gpu", 8)], histogram=[({"gpu": 8}, 2)]),
                t.pool("small", 2, [t.device("gpu", 4)], histogram=[({"gpu": 4}, 2)]),
            ],
        )
    ]
    plan = t.schedule(t.deployment(engines=[t.standalone(gpus=gpus)]), clusters)
    assert where(plan) == [("a", pools)]


TAINT = {"key": "gpu", "value": "h100", "effect": "NoSchedule"}
EVICT = {"key": "maintenance", "value": "now", "effect": "NoExecute"}


# Cluster "gone" has been missing past the 5-minute default grace (absence.py): its replicas
# must move, provided the deployment still sees another of its clusters.
GONE_SINCE_6_MINUTES = {"name": "gone", "since": t.ago(6)}


def two_clusters(**a_kwargs):
    return [
        t.cluster("a", [t.pool("p", 4, histogram=[(FULL, 4)])], **a_kwargs),
        t.cluster("b", [t.pool("p", 4, histogram=[(FULL, 4)])]),
    ]


class Placement(NamedTuple):
    spec: str  # the placement rule the case proves
    xr: dict  # the ModelDeployment
    clusters: list[dict]  # the selected InferenceClusters
    placed_on: list[tuple[str, tuple[str, ...]]]  # (cluster, pools) of each planned replica
    own: Mapping[str, dict] = MappingProxyType({})  # the deployment's observed replicas


PLACEMENT = [
    Placement(
        spec="new replicas spread across clusters first",
        xr=t.deployment(replicas=3),
        clusters=[*two_clusters(), t.cluster("c", [t.pool("p", 4, histogram=[(FULL, 4)])])],
        placed_on=[("a", ("p",)), ("b", ("p",)), ("c", ("p",))],
    ),
    Placement(
        spec="ties between equally used clusters break by name",
        xr=t.deployment(replicas=2),
        clusters=[t.cluster("c", [t.pool("p", 4)]), *two_clusters()],
        placed_on=[("a", ("p",)), ("b", ("p",))],
    ),
    Placement(
        spec="a healthy replica stays where it is and new ones go elsewhere",
        xr=t.deployment(replicas=2),
        clusters=two_clusters(),
        own=own(0, "b"),
        placed_on=[("b", ("p",)), ("a", ("p",))],
    ),
    Placement(
        spec="an untolerated NoSchedule taint keeps new replicas off a cluster",
        xr=t.deployment(replicas=2),
        clusters=two_clusters(taints=[TAINT]),
        placed_on=[("b", ("p",)), ("b", ("p",))],
    ),
    Placement(
        spec="a NoSchedule taint does not evict existing replicas",
        xr=t.deployment(replicas=2),
        clusters=two_clusters(taints=[TAINT]),
        own=own(0, "a"),
        placed_on=[("a", ("p",)), ("b", ("p",))],
    ),
    Placement(
        spec="an Exists toleration admits any value of its key",
        xr=t.deployment(replicas=2, tolerations=[{"key": "gpu", "operator": "Exists"}]),
        clusters=two_clusters(taints=[TAINT]),
        placed_on=[("a", ("p",)), ("b", ("p",))],
    ),
    Placement(
        spec="an Equal toleration with another value does not tolerate",
        xr=t.deployment(replicas=2, tolerations=[{"key": "gpu", "value": "a100"}]),
        clusters=two_clusters(taints=[TAINT]),
        placed_on=[("b", ("p",)), ("b", ("p",))],
    ),
    Placement(
        spec="an untolerated NoExecute taint moves replicas away",
        xr=t.deployment(replicas=1),
        clusters=two_clusters(taints=[EVICT]),
        own=own(0, "a"),
        placed_on=[("b", ("p",))],
    ),
    Placement(
        spec="an empty-key Exists toleration tolerates every taint",
        xr=t.deployment(replicas=1, tolerations=[{"operator": "Exists"}]),
        clusters=two_clusters(taints=[EVICT]),
        own=own(0, "a"),
        placed_on=[("a", ("p",))],
    ),
    Placement(
        spec="a cluster that is not Ready gets no new replicas",
        xr=t.deployment(replicas=2),
        clusters=two_clusters(ready=False),
        placed_on=[("b", ("p",)), ("b", ("p",))],
    ),
    Placement(
        spec="a cluster that is not Ready keeps its replicas",
        xr=t.deployment(replicas=1),
        clusters=two_clusters(ready=False),
        own=own(0, "a"),
        placed_on=[("a", ("p",))],
    ),
    Placement(
        spec="a replica on a cluster that just went missing stays where it is",
        xr=t.deployment(replicas=1),
        clusters=two_clusters(),
        own=own(0, "gone"),
        placed_on=[("gone", ("p",))],
    ),
    Placement(
        spec="a replica on a cluster missing past its grace period is re-placed",
        xr=t.deployment(replicas=2, missing_clusters=[GONE_SINCE_6_MINUTES]),
        clusters=two_clusters(),
        own={**own(0, "gone"), **own(1, "b")},
        placed_on=[("a", ("p",)), ("b", ("p",))],
    ),
    Placement(
        spec="an engine whose pool was removed moves to another pool of the same cluster",
        xr=t.deployment(replicas=1),
        clusters=[t.cluster("a", [t.pool("new", 2)]), t.cluster("b", [t.pool("p", 2)])],
        own=own(0, "a", "old"),
        placed_on=[("a", ("new",))],
    ),
    Placement(
        spec="a replica that must move but fits nowhere stays where it is",
        xr=t.deployment(replicas=2, missing_clusters=[GONE_SINCE_6_MINUTES]),
        clusters=[one_pool(1, [({"gpu": 0}, 1)])],
        own={**own(0, "gone"), **own(1, "a")},
        placed_on=[("gone", ("p",)), ("a", ("p",))],
    ),
    Placement(
        spec="scale down takes from the most packed cluster first",
        xr=t.deployment(replicas=2),
        clusters=two_clusters(),
        own=merge(own(0, "a"), own(1, "a"), own(2, "b")),
        placed_on=[("a", ("p",)), ("b", ("p",))],
    ),
    Placement(
        spec="scale down takes replicas whose pods are not scheduled first",
        xr=t.deployment(replicas=2),
        clusters=two_clusters(),
        own=merge(
            own(0, "a", pods_scheduled="False", reason="PodsPending"), own(1, "a"), own(2, "b")
        ),
        placed_on=[("a", ("p",)), ("b", ("p",))],
    ),
]


@pytest.mark.parametrize("case", PLACEMENT, ids=lambda case: case.spec)
def test_placement_rules(case: Placement):
    plan = t.schedule(case.xr, case.clusters, case.own)
    assert where(plan) == case.placed_on


HALF = {"gpu": 4}  # a node of 8 GPUs with 4 taken


def partly_used(name: str, pool: str = "p") -> dict:
    """A cluster whose 8-GPU nodes are all half taken: a 1-GPU pod breaks no whole node."""
    return t.cluster(name, [t.pool(pool, 2, histogram=[(HALF, 2)])])


def whole(name: str, pool: str = "p") -> dict:
    """A cluster whose 8-GPU nodes are all free: a 1-GPU pod breaks a whole node."""
    return t.cluster(name, [t.pool(pool, 2, histogram=[(FULL, 2)])])


# Rule "least fragmentation" (design/scheduler.md, "Fragmentation"): each row's expected
# place differs from where the first fitting cluster and pool by name would put it.
LEAST_FRAGMENTATION = [
    Placement(
        spec="a replica takes the pool where it breaks no whole node over the first by name",
        xr=t.deployment(),
        clusters=[
            t.cluster(
                "a",
                [
                    t.pool("p", 2, histogram=[(FULL, 2)]),
                    t.pool("q", 2, histogram=[(HALF, 2)]),
                ],
            )
        ],
        placed_on=[("a", ("q",))],
    ),
    Placement(
        spec="a replica takes the cluster where it breaks no whole node over the first by name",
        xr=t.deployment(),
        clusters=[whole("a"), partly_used("b")],
        placed_on=[("b", ("p",))],
    ),
    Placement(
        spec="spreading across clusters outranks fragmentation: the second replica breaks "
        "a whole node on the cluster that has none of the deployment",
        xr=t.deployment(replicas=2),
        clusters=[whole("a"), partly_used("b")],
        placed_on=[("b", ("p",)), ("a", ("p",))],
    ),
    Placement(
        spec="clusterSpreading Pack: fragmentation alone picks the cluster, so the second "
        "replica joins the first where it breaks no whole node",
        xr=t.deployment(replicas=2, cluster_spreading="Pack"),
        clusters=[whole("a"), partly_used("b")],
        placed_on=[("b", ("p",)), ("b", ("p",))],
    ),
    Placement(
        spec="clusterSpreading Pack on a fragmentation tie goes by name: both replicas "
        "stack on the first cluster",
        xr=t.deployment(replicas=2, cluster_spreading="Pack"),
        clusters=[partly_used("b"), partly_used("a")],
        placed_on=[("a", ("p",)), ("a", ("p",))],
    ),
    Placement(
        spec="clusterSpreading Spread, written out, is the default: the second replica "
        "breaks a whole node on the cluster that has none of the deployment",
        xr=t.deployment(replicas=2, cluster_spreading="Spread"),
        clusters=[whole("a"), partly_used("b")],
        placed_on=[("b", ("p",)), ("a", ("p",))],
    ),
    Placement(
        spec="a pool counted without nodes is scored as if its pods broke whole nodes",
        xr=t.deployment(),
        clusters=[t.cluster("a", [t.pool("p", 2)]), partly_used("b")],
        placed_on=[("b", ("p",))],
    ),
    Placement(
        spec="a replica compares the first 8 clusters that hold it, by name: the 9th is not seen",
        xr=t.deployment(),
        clusters=[*(whole(f"a{i}") for i in range(1, 9)), partly_used("a9")],
        placed_on=[("a1", ("p",))],
    ),
    Placement(
        spec="a replica that fits whole nodes exactly breaks none: ties go by name",
        xr=t.deployment(engines=[t.standalone(gpus=8)]),
        clusters=[whole("b"), whole("a")],
        placed_on=[("a", ("p",))],
    ),
]


@pytest.mark.parametrize("case", LEAST_FRAGMENTATION, ids=lambda case: case.spec)
def test_least_fragmentation(case: Placement):
    plan = t.schedule(case.xr, case.clusters, case.own)
    assert where(plan) == case.placed_on


def test_scale_down_removes_the_unscheduled_replica_by_index():
    mine = merge(
        own(0, "a", pods_scheduled="False", reason="PodsPending"), own(1, "a"), own(2, "b")
    )
    plan = t.schedule(t.deployment(replicas=2), two_clusters(), mine)
    assert [r.index for r in plan.removed] == [0]
    assert [r.index for r in plan.replicas] == [1, 2]


def test_an_edited_shape_is_re_resolved_in_place():
    plan = t.schedule(
        t.deployment(replicas=1, engines=[t.standalone(gpus=2)]),
        two_clusters(),
        own(0, "b", gpus=1),
    )
    (replica,) = plan.replicas
    assert (replica.cluster, replica.pools, replica.change) == ("b", ("p",), Change.RESHAPED)
    assert replica.engines[0].members[0].requests[0].count == 2


def test_an_unchanged_replica_is_kept_verbatim():
    plan = t.schedule(t.deployment(replicas=1), two_clusters(), own(0, "b"))
    assert [r.change for r in plan.replicas] == [Change.KEPT]


def test_all_engines_of_a_replica_land_on_one_cluster():
    engines = [t.standalone("a", gpus=1), t.standalone("b", gpus=1, kind="tpu")]
    clusters = [
        t.cluster("a", [t.pool("p", 1)]),
        t.cluster("b", [t.pool("p", 1), t.pool("q", 1, [t.device("tpu", 4)])]),
    ]
    plan = t.schedule(t.deployment(engines=engines), clusters)
    (replica,) = plan.replicas
    assert replica.cluster == "b"
    assert [e.pool for e in replica.engines] == ["p", "q"]


def test_every_member_of_a_gang_shares_one_pool():
    clusters = [t.cluster("a", [t.pool("p", 1), t.pool("q", 3)])]
    plan = t.schedule(
        t.deployment(engines=[t.gang(leader_gpus=8, worker_gpus=8, workers=2)]), clusters
    )
    (replica,) = plan.replicas
    assert {m.pool for m in replica.engines[0].members} == {"q"}


# --- healing ----------------------------------------------------------------------------------

GRACE = {"unschedulableGracePeriod": "2m", "avoidFor": "30m"}


def stuck(minutes, *, placed_at=None):
    return own(
        0,
        "a",
        pods_scheduled="False",
        reason="Unschedulable",
        since=t.ago(minutes),
        placed_at=placed_at,
        ready=False,
    )


HEALING = [
    pytest.param(stuck(5), "b", True, id="an unschedulable replica past the grace period moves"),
    pytest.param(stuck(1), "a", False, id="an unschedulable replica within the grace period stays"),
    pytest.param(
        stuck(5, placed_at=t.ago(3)),
        "a",
        False,
        id="a condition older than the current placement is not acted on",
    ),
    pytest.param(
        own(0, "a", pods_scheduled="False", reason="PodsPending", since=t.ago(60)),
        "a",
        False,
        id="a replica merely pending is never moved",
    ),
]


@pytest.mark.parametrize(("mine", "cluster", "healed"), HEALING)
def test_healing_rules(mine, cluster, healed):
    plan = t.schedule(t.deployment(replicas=1, healing=GRACE), two_clusters(), mine)
    assert [r.cluster for r in plan.replicas] == [cluster]
    assert bool(plan.healed) is healed
    recorded = [(f.cluster, f.pool, f.expires_at) for f in plan.failed_placements]
    # avoidFor (30m) from when the failure fell due: since (5m ago) + the 2m grace.
    assert recorded == ([("a", "p", t.NOW + timedelta(minutes=27))] if healed else [])


def test_a_healed_replica_that_fits_nowhere_else_stays_and_its_pool_is_still_recorded():
    plan = t.schedule(t.deployment(replicas=1, healing=GRACE), two_clusters()[:1], stuck(5))
    assert [(r.cluster, r.change) for r in plan.replicas] == [("a", Change.STRANDED)]
    assert plan.missing == 1
    assert [(f.cluster, f.pool) for f in plan.failed_placements] == [("a", "p")]


def failed(cluster, minutes_left):
    return {
        "cluster": cluster,
        "pool": "p",
        "replica": "llm-0",
        "expiresAt": format_time(t.NOW + timedelta(minutes=minutes_left)),
    }


@pytest.mark.parametrize(
    ("memory", "cluster"),
    [
        pytest.param([failed("a", 10)], "b", id="an avoided pool gets no new replicas"),
        pytest.param([failed("a", -1)], "a", id="an expired failure is forgotten"),
    ],
)
def test_failure_memory_excludes_until_expiry(memory, cluster):
    plan = t.schedule(t.deployment(replicas=1, failed_placements=memory), two_clusters())
    assert [r.cluster for r in plan.replicas] == [cluster]
    assert [f.cluster for f in plan.failed_placements] == ([] if cluster == "a" else ["a"])


def test_failure_memory_is_bounded_and_keeps_the_latest_expiring():
    memory = [dict(failed(f"c{i:02d}", 10 + i)) for i in range(40)]
    plan = t.schedule(t.deployment(replicas=1, failed_placements=memory), two_clusters())
    kept = [f.cluster for f in plan.failed_placements]
    assert len(kept) == 32
    assert kept == [f"c{i:02d}" for i in range(8, 40)]


def test_shortfall_counts_each_pool_under_its_cause():
    clusters = [
        t.cluster("a", [t.pool("p", 1, histogram=[({"gpu": 2}, 1)])]),
        t.cluster("b", [t.pool("p", 1)], taints=[TAINT]),
    ]
    plan = t.schedule(t.deployment(replicas=1, engines=[t.standalone(gpus=4)]), clusters)
    assert plan.missing == 1
    assert plan.diagnosis is not None
    assert plan.diagnosis.summary() == (
        "2 pools checked, 1 taint not tolerated, 1 too few free devices"
    )
