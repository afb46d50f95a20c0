"""Cluster access (spec.access.namespaceSelector) and device quotas per namespace."""

from __future__ import annotations

import pytest
from compose_model_deployment import fn, readers, tenancy
from compose_model_deployment.placement import Change
from modelplane_common.capacity.diagnosis import Cause
from modelplane_testkit import deployment_builders as t
from modelplane_testkit import wire

GPU = "gpu.example.com"
TEAM_A_ONLY = {"matchLabels": {"team": "a"}}
TEAM_B_ONLY = {"matchLabels": {"team": "b"}}
TEAM_A = {"team": "a"}


def cluster(name, nodes=4, **fields):
    return t.cluster(name, [t.pool("p", nodes)], **fields)


def named(*namespaces):
    """The access selector design/tenancy.md recommends: the API server's own name label."""
    return {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)}
        ]
    }


def replica(index, cluster_name, gpus=8, name="llm", namespace="team-a", **fields):
    return t.model_replica(
        f"{name}-{index}",
        namespace,
        cluster_name,
        [t.replica_engine("serve", "p", gpus=gpus)],
        deployment_name=name,
        index=index,
        **fields,
    )


def overcommitted(body):
    """The replica with an Overcommitted verdict recorded for its current placement."""
    placed = body["metadata"]["annotations"][readers.PLACED_AT]
    body["status"]["admission"] = {"placedAt": placed, "verdict": "Overcommitted"}
    return body


def pods_created(body, reason):
    """The replica with PodsCreated False/`reason`, as compose-model-replica reports it."""
    body["status"]["conditions"].append(
        {"type": "PodsCreated", "status": "False", "reason": reason}
    )
    return body


def clusters_of(plan):
    return sorted(r.cluster for r in plan.replicas if r.scheduled)


# -- access ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selectors", "labels", "placed_on"),
    [
        pytest.param({"a": None, "b": None}, TEAM_A, ["a", "b"], id="no selector admits everyone"),
        pytest.param(
            {"a": TEAM_A_ONLY, "b": TEAM_B_ONLY},
            TEAM_A,
            ["a", "a"],
            id="only the selecting cluster",
        ),
        pytest.param(
            {"a": {}, "b": TEAM_B_ONLY}, {}, ["a", "a"], id="an empty selector admits everyone"
        ),
        pytest.param(
            {
                "a": {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["b"]}]},
                "b": TEAM_B_ONLY,
            },
            {},
            ["a", "a"],
            id="NotIn admits a namespace without the label",
        ),
        pytest.param(
            {"a": TEAM_B_ONLY, "b": TEAM_B_ONLY}, TEAM_A, [], id="no cluster admits: nothing placed"
        ),
        pytest.param(
            {"a": named("team-a"), "b": named("team-b")},
            {"kubernetes.io/metadata.name": "team-a", "team": "b"},
            ["a", "a"],
            id="the secure default: a selector on the name label ignores labels a tenant set",
        ),
    ],
)
def test_a_deployment_places_only_on_clusters_that_admit_its_namespace(
    selectors, labels, placed_on
):
    clusters = [
        cluster(name, **({"namespace_selector": s} if s is not None else {}))
        for name, s in selectors.items()
    ]
    plan = t.schedule(
        t.deployment(replicas=2, engines=[t.standalone(gpus=8)]), clusters, namespace_labels=labels
    )
    assert clusters_of(plan) == placed_on


def test_the_diagnosis_counts_the_clusters_that_do_not_admit():
    clusters = [
        cluster("a", namespace_selector=TEAM_B_ONLY),
        cluster("b", namespace_selector=TEAM_B_ONLY),
    ]
    plan = t.schedule(t.deployment(), clusters, namespace_labels=TEAM_A)
    assert plan.diagnosis is not None
    assert plan.diagnosis.counts() == [(Cause.NAMESPACE_NOT_ADMITTED, 2)]
    assert plan.diagnosis.summary() == "2 pools checked, 2 namespace not admitted (2 clusters)"


def test_a_replica_on_a_cluster_that_stops_admitting_keeps_running_and_is_reported():
    own = {"replica-0": replica(0, "a", pods_scheduled="True")}
    clusters = [cluster("a", namespace_selector=TEAM_B_ONLY), cluster("b")]
    plan = t.schedule(
        t.deployment(replicas=2, engines=[t.standalone(gpus=8)]),
        clusters,
        own,
        namespace_labels=TEAM_A,
    )
    by_index = {r.index: r for r in plan.replicas}
    assert by_index[0].change is Change.KEPT and by_index[0].cluster == "a"
    assert by_index[1].change is Change.PLACED and by_index[1].cluster == "b"
    assert [r.name for r in plan.unadmitted] == ["llm-0"]


def test_scale_down_removes_a_replica_on_a_cluster_that_no_longer_admits_first():
    own = {
        "replica-0": replica(0, "b", pods_scheduled="True"),
        "replica-1": replica(1, "a", pods_scheduled="True"),
    }
    clusters = [cluster("a", namespace_selector=TEAM_B_ONLY), cluster("b")]
    plan = t.schedule(
        t.deployment(replicas=1, engines=[t.standalone(gpus=8)]),
        clusters,
        own,
        namespace_labels=TEAM_A,
    )
    assert [r.name for r in plan.removed] == ["llm-1"]


def test_an_unreadable_namespace_is_admitted_only_where_access_is_open():
    clusters = [
        cluster(
            "a", namespace_selector={"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}
        ),
        cluster("b"),
    ]
    xr = t.deployment(replicas=2, engines=[t.standalone(gpus=8)])
    rsp = wire.run(
        fn.FunctionRunner(matcher=t.stand_in_matcher), t.request(xr, clusters, [], namespaces=[])
    )
    placed = sorted(d["spec"]["clusterName"] for d in wire.desired(rsp).values())
    assert placed == ["b", "b"]
    status, reason, message = wire.conditions(rsp)[fn.INPUTS]
    assert (status, reason) == ("False", "DegradedInputs")
    assert "Namespace team-a cannot be read" in message


def test_an_unreadable_access_selector_holds_the_cluster():
    bad = cluster("a", namespace_selector={"matchExpressions": [{"key": "team", "operator": "In"}]})
    own = {"replica-0": replica(0, "a", pods_scheduled="True")}
    xr = t.deployment(replicas=1, engines=[t.standalone(gpus=8)])
    rsp = wire.run(
        fn.FunctionRunner(matcher=t.stand_in_matcher), t.request(xr, [bad, cluster("b")], [], own)
    )
    assert [d["spec"]["clusterName"] for d in wire.desired(rsp).values()] == ["a"]
    status, reason, message = wire.conditions(rsp)[fn.SCHEDULED]
    assert (status, reason) == ("False", "ClusterUnavailable")
    assert "spec.access.namespaceSelector.matchExpressions[0].values" in message


# -- quotas ------------------------------------------------------------------------------------


def quota(gpus, name="devices"):
    return t.device_quota({GPU: gpus}, name=name)


@pytest.mark.parametrize(
    ("quotas", "others", "placed"),
    [
        pytest.param([], [], 3, id="no quota: capacity alone limits"),
        pytest.param([quota(16)], [], 2, id="the quota caps the replicas placed"),
        pytest.param([quota(64)], [], 3, id="a quota above the need does not limit"),
        pytest.param(
            [quota(64), quota(8, "small")], [], 1, id="the smallest of several quotas limits"
        ),
        pytest.param(
            [quota(16)],
            [replica(0, "b", name="other")],
            1,
            id="the namespace's other deployments count fleet-wide",
        ),
        pytest.param(
            [quota(16)],
            [replica(0, "b", name="other", namespace="team-b")],
            2,
            id="another namespace's replicas do not count",
        ),
        pytest.param(
            [quota(16)],
            [overcommitted(replica(0, "b", name="other", placed_at=t.ago(5)))],
            2,
            id="an overcommitted replica holds nothing",
        ),
        pytest.param(
            [quota(16)],
            [pods_created(replica(0, "b", name="other"), "Orphaned")],
            2,
            id="an orphaned replica holds nothing",
        ),
        pytest.param(
            [quota(16)],
            [pods_created(replica(0, "b", name="other"), "NotCreated")],
            2,
            id="a replica whose pods were refused past the grace holds nothing",
        ),
        pytest.param(
            [quota(16)],
            [pods_created(replica(0, "b", name="other"), "Creating")],
            1,
            id="a replica whose pods are missing within the grace counts",
        ),
        pytest.param(
            [t.device_quota({"other.example.com": 0})],
            [],
            3,
            id="a class the deployment does not claim",
        ),
    ],
)
def test_a_namespace_never_claims_more_devices_than_its_quota(quotas, others, placed):
    xr = t.deployment(replicas=3, engines=[t.standalone(gpus=8)])
    plan = t.schedule(
        xr, [cluster("a", nodes=8), cluster("b", nodes=8)], others=others, quotas=quotas
    )
    assert sum(1 for r in plan.replicas if r.scheduled) == placed


def test_quota_counts_every_copy_and_worker():
    xr = t.deployment(replicas=2, engines=[t.gang(worker_gpus=8, workers=2, copies=2)])
    plan = t.schedule(xr, [cluster("a", nodes=16)], quotas=[quota(40)])
    assert sum(1 for r in plan.replicas if r.scheduled) == 1  # 32 devices a replica


def test_a_lowered_quota_keeps_running_replicas_and_places_no_more():
    own = {f"replica-{i}": replica(i, "a", pods_scheduled="True") for i in range(2)}
    xr = t.deployment(replicas=3, engines=[t.standalone(gpus=8)])
    plan = t.schedule(xr, [cluster("a", nodes=8)], own, quotas=[quota(8)])
    assert [(r.index, r.change) for r in plan.replicas] == [(0, Change.KEPT), (1, Change.KEPT)]
    assert plan.diagnosis is not None and plan.diagnosis.quota is not None
    short = plan.diagnosis.quota
    assert (short.limit.hard, short.used, short.requested) == (8, 16, 8)


def test_over_quota_the_deployment_reports_quota_exceeded_with_quota_used_and_requested():
    xr = t.deployment(replicas=3, engines=[t.standalone(gpus=8)])
    rsp = wire.run(
        fn.FunctionRunner(matcher=t.stand_in_matcher),
        t.request(xr, [cluster("a", nodes=8)], [], quotas=[quota(16)]),
    )
    assert len(wire.desired(rsp)) == 2
    status, reason, message = wire.conditions(rsp)[fn.SCHEDULED]
    assert (status, reason) == ("False", "QuotaExceeded")
    assert message == (
        "2 of 3 replicas placed: 1 pool checked, 1 namespace quota exceeded; "
        "namespace team-a quota devices allows 16 gpu.example.com device(s): "
        "16 used, a replica requests 8"
    )


def test_a_namespace_not_admitted_reports_insufficient_capacity_counting_the_cluster():
    xr = t.deployment(replicas=1, engines=[t.standalone(gpus=8)])
    clusters = [cluster("a", namespace_selector=TEAM_B_ONLY)]
    rsp = wire.run(fn.FunctionRunner(matcher=t.stand_in_matcher), t.request(xr, clusters, []))
    assert wire.desired(rsp) == {}
    assert wire.conditions(rsp)[fn.SCHEDULED] == (
        "False",
        "InsufficientCapacity",
        "0 of 1 replicas placed: 1 pool checked, 1 namespace not admitted (1 cluster)",
    )


# -- requirements ------------------------------------------------------------------------------


def test_the_namespace_and_its_resource_quotas_are_required():
    rsp = wire.run(
        fn.FunctionRunner(matcher=t.stand_in_matcher), t.request(t.deployment(), None, None)
    )
    namespace = rsp.requirements.resources[tenancy.NAMESPACE]
    quotas = rsp.requirements.resources[tenancy.QUOTAS]
    assert (namespace.api_version, namespace.kind, namespace.match_name) == (
        "v1",
        "Namespace",
        "team-a",
    )
    assert (quotas.api_version, quotas.kind, quotas.namespace) == ("v1", "ResourceQuota", "team-a")
    assert quotas.HasField("match_labels") and not quotas.match_labels.labels


@pytest.mark.parametrize(
    ("namespaces", "quotas", "waiting_for"),
    [
        pytest.param(None, [], "namespace", id="the Namespace not fetched yet"),
        pytest.param(
            [t.namespace()], None, "resource-quotas", id="the ResourceQuotas not fetched yet"
        ),
    ],
)
def test_nothing_is_planned_until_the_tenant_is_fetched(namespaces, quotas, waiting_for):
    req = t.request(t.deployment(), [cluster("a")], [], namespaces=namespaces, quotas=quotas)
    rsp = wire.run(fn.FunctionRunner(matcher=t.stand_in_matcher), req)
    status, reason, message = wire.conditions(rsp)[fn.SCHEDULED]
    assert (status, reason) == ("Unknown", "WaitingForInputs")
    assert message == f"waiting for Crossplane to fetch {waiting_for}"
