"""The named ordering rules and the phase functions of placement, one at a time.

design/scheduler.md ("Ordering rules") names the rules these tests cite:
cluster order, pool order and victim order.
"""

from __future__ import annotations

import pytest
from compose_model_deployment import placement, readers
from compose_model_deployment.model import OwnReplica, ReplicaCondition
from modelplane_common.capacity.readers import read_cluster
from modelplane_testkit import deployment_builders as t


def replica(index, cluster, pods="True"):
    return OwnReplica(
        index=index,
        name=f"llm-{index}",
        cluster=cluster,
        engines=(),
        pods_scheduled=ReplicaCondition(status=pods),
    )


def read_clusters(*clusters):
    return {c.name: c for c in (read_cluster(body)[0] for body in clusters)}


@pytest.mark.parametrize(
    ("replicas_on", "expected"),
    [
        pytest.param({}, ["a", "b", "c"], id="cluster order: with no replicas anywhere, by name"),
        pytest.param({"a": 2, "b": 1}, ["c", "b", "a"], id="cluster order: fewest replicas first"),
        pytest.param({"a": 1, "c": 1}, ["b", "a", "c"], id="cluster order: ties go by name"),
    ],
)
def test_cluster_order(replicas_on, expected):
    clusters = read_clusters(*(t.cluster(n, [t.pool("p", 1)]) for n in ("c", "a", "b")))
    ordered = sorted(clusters.values(), key=lambda c: placement.cluster_order(c, replicas_on))
    assert [c.name for c in ordered] == expected


@pytest.mark.parametrize(
    ("everyone", "leaving", "first"),
    [
        pytest.param(
            [replica(0, "a"), replica(1, "a", pods="False"), replica(2, "b")],
            {"llm-0"},
            "llm-0",
            id="victim order: a replica that is leaving goes before one whose pods are pending",
        ),
        pytest.param(
            [replica(0, "a"), replica(1, "b", pods="False"), replica(2, "b")],
            set(),
            "llm-1",
            id="victim order: pods not all scheduled go before a healthy replica",
        ),
        pytest.param(
            [replica(0, "a"), replica(1, "a"), replica(2, "b")],
            set(),
            "llm-1",
            id="victim order: then the cluster with the most replicas, highest index first",
        ),
        pytest.param(
            [replica(0, "a"), replica(1, "b")],
            set(),
            "llm-1",
            id="victim order: between equal clusters the highest index goes",
        ),
    ],
)
def test_victim_order(everyone, leaving, first):
    replicas_on = {}
    for own in everyone:
        replicas_on[own.cluster] = replicas_on.get(own.cluster, 0) + 1
    victim = min(everyone, key=lambda o: placement.victim_order(o, leaving, replicas_on))
    assert victim.name == first


@pytest.mark.parametrize(
    ("gpus", "kind", "expected"),
    [
        pytest.param(
            1, "gpu", ["small", "big", "other"], id="pool order: smallest matching hardware first"
        ),
        pytest.param(1, "x", ["other", "big", "small"], id="pool order: unmatched pools go last"),
    ],
)
def test_pool_order(gpus, kind, expected):
    (cluster,) = read_clusters(
        t.cluster(
            "a",
            [
                t.pool("big", 1, [t.device("gpu", 8)]),
                t.pool("other", 1, [t.device("x", 2)]),
                t.pool("small", 1, [t.device("gpu", 4)]),
            ],
        )
    ).values()
    spec = readers.read_deployment(t.deployment(engines=[t.standalone(gpus=gpus, kind=kind)])).spec
    matching = placement.Matching(t.stand_in_matcher)
    ordered = matching.pool_order(spec.engines[0], cluster.pools)
    assert [p.name for p in ordered] == expected


def test_scale_down_returns_survivors_and_removed_without_touching_its_input():
    kept = {i: placement.Staying(replica(i, "a"), ()) for i in range(3)}
    moving = ((replica(3, "b"), "its cluster is gone"),)
    retained = placement.Retained(kept, moving, ())
    survivors, removed = placement.scale_down(retained, 2)
    assert [o.name for o in removed] == ["llm-2", "llm-3"]
    assert sorted(survivors.kept) == [0, 1] and survivors.moving == ()
    assert sorted(retained.kept) == [0, 1, 2] and len(retained.moving) == 1


@pytest.mark.parametrize(
    ("everyone", "leaving", "unadmitted", "first"),
    [
        pytest.param(
            [replica(0, "a", pods="False"), replica(1, "b")],
            set(),
            {"llm-1"},
            "llm-1",
            id="victim order: on a cluster that no longer admits the namespace before pending pods",
        ),
        pytest.param(
            [replica(0, "a"), replica(1, "b")],
            {"llm-0"},
            {"llm-1"},
            "llm-0",
            id="victim order: a leaving replica still goes before an unadmitted one",
        ),
    ],
)
def test_victim_order_unadmitted(everyone, leaving, unadmitted, first):
    replicas_on = {o.cluster: 1 for o in everyone}
    victim = min(
        everyone, key=lambda o: placement.victim_order(o, leaving, replicas_on, unadmitted)
    )
    assert victim.name == first
