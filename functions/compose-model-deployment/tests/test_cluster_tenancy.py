"""A cluster's spec.tenancy (reserved namespaces, approved priority classes) as the
scheduler applies it: the clusters that admission would refuse take no replica.

design/tenancy.md, "The template rule" and "Workload namespaces"; the rules'
homes are modelplane_common.workload_namespace and pod_template, the scheduler's
use of them compose_model_deployment.usable.
"""

from __future__ import annotations

import copy

import pytest
from compose_model_deployment import fn
from compose_model_deployment.placement import Change
from modelplane_testkit import deployment_builders as t
from modelplane_testkit import wire

HIGH = "inference-high"


def cluster(name, nodes=4, **fields):
    return t.cluster(name, [t.pool("p", nodes)], **fields)


def deployment(replicas=2, priority_class=None, namespace="team-a"):
    return t.deployment(
        namespace=namespace,
        replicas=replicas,
        engines=[t.standalone(gpus=8, priority_class=priority_class)],
    )


def gang_with_worker_class(priority_class):
    """A Leader + Worker engine whose Worker template alone names `priority_class`."""
    engine = t.gang(worker_gpus=8)
    worker = copy.deepcopy(engine["members"][1])
    worker["template"]["spec"]["priorityClassName"] = priority_class
    engine["members"][1] = worker
    return t.deployment(replicas=1, engines=[engine])


def replica(index, cluster_name, *, waiting=False, admitted=False, **fields):
    """Replica `index` of team-a/llm on `cluster_name`/p, placed a minute ago: running, or
    waiting for its cluster's admission (as compose-model-replica says it)."""
    placed = t.ago(1)
    body = t.model_replica(
        f"llm-{index}",
        "team-a",
        cluster_name,
        [t.replica_engine("serve", "p", gpus=8)],
        deployment_name="llm",
        index=index,
        placed_at=placed,
        **fields,
    )
    if admitted:
        body["status"]["admission"] = {"placedAt": placed, "verdict": "Admitted"}
    if waiting:
        body["status"]["conditions"].append(
            {
                "type": "Admitted",
                "status": "False",
                "reason": "WaitingForAdmission",
                "message": "not judged: metadata.namespace: is reserved on this workload cluster",
            }
        )
    return {f"replica-{index}": body}


def waiting(index, cluster_name):
    return replica(
        index,
        cluster_name,
        waiting=True,
        pods_scheduled="False",
        reason="WaitingForPods",
        ready=False,
    )


def running(index, cluster_name):
    return replica(index, cluster_name, admitted=True, pods_scheduled="True")


def scheduled_on(plan):
    return sorted(r.cluster for r in plan.replicas if r.scheduled)


# -- new replicas ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("xr", "tenancy", "placed_on"),
    [
        pytest.param(deployment(), {}, ["a", "b"], id="no tenancy lists: every cluster"),
        pytest.param(
            deployment(),
            {"a": {"reserved_namespaces": ["team-a"]}},
            ["b", "b"],
            id="a cluster that reserves the namespace gets no replica",
        ),
        pytest.param(
            deployment(),
            {"a": {"reserved_namespaces": ["gpu-operator"]}},
            ["a", "b"],
            id="a cluster that reserves other namespaces still takes it",
        ),
        pytest.param(
            deployment(priority_class=HIGH),
            {"b": {"priority_class_names": [HIGH]}},
            ["b", "b"],
            id="a class goes only where the cluster approves it (none by default)",
        ),
        pytest.param(
            deployment(priority_class=HIGH),
            {"a": {"priority_class_names": ["batch-low"]}, "b": {"priority_class_names": [HIGH]}},
            ["b", "b"],
            id="another approved class does not approve this one",
        ),
        pytest.param(
            deployment(),
            {"a": {"priority_class_names": []}},
            ["a", "b"],
            id="a template without a class goes anywhere, approved list or not",
        ),
        pytest.param(
            gang_with_worker_class(HIGH),
            {"b": {"priority_class_names": [HIGH]}},
            ["b"],
            id="a Worker's class is judged like the Leader's",
        ),
        pytest.param(
            deployment(priority_class=HIGH),
            {"a": {"reserved_namespaces": ["team-a"]}, "b": {}},
            [],
            id="no cluster takes it: nothing placed",
        ),
    ],
)
def test_a_deployment_places_only_where_admission_will_judge_it(xr, tenancy, placed_on):
    clusters = [cluster(name, **tenancy.get(name, {})) for name in ("a", "b")]
    assert scheduled_on(t.schedule(xr, clusters)) == placed_on


# -- the diagnosis -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tenancy", "counts", "summary"),
    [
        pytest.param(
            {"a": {"reserved_namespaces": ["team-a"]}, "b": {"reserved_namespaces": ["team-a"]}},
            [("namespace reserved", 2)],
            "2 pools checked, 2 namespace reserved (2 clusters)",
            id="reserved namespaces are counted with their clusters",
        ),
        pytest.param(
            {"a": {}, "b": {"priority_class_names": ["batch-low"]}},
            [("priority class not approved", 2)],
            "2 pools checked, 2 priority class not approved (2 clusters)",
            id="unapproved classes are counted with their clusters",
        ),
        pytest.param(
            {"a": {"reserved_namespaces": ["team-a"]}, "b": {}},
            [("namespace reserved", 1), ("priority class not approved", 1)],
            "2 pools checked, 1 namespace reserved (1 cluster), "
            "1 priority class not approved (1 cluster)",
            id="a reserved namespace is checked before the class, each cluster one cause",
        ),
        pytest.param(
            {
                "a": {"reserved_namespaces": ["team-a"], "namespace_selector": {"team": "b"}},
                "b": {"namespace_selector": {"team": "b"}},
            },
            [("namespace not admitted", 2)],
            "2 pools checked, 2 namespace not admitted (2 clusters)",
            id="access is checked first",
        ),
    ],
)
def test_the_diagnosis_counts_each_tenancy_cause_per_pool(tenancy, counts, summary):
    """Counts compare by the cause's text (modelplane_common.capacity.diagnosis.Cause)."""
    clusters = [
        cluster(
            name,
            **{
                k: ({"matchLabels": v} if k == "namespace_selector" else v)
                for k, v in tenancy[name].items()
            },
        )
        for name in ("a", "b")
    ]
    plan = t.schedule(deployment(replicas=1, priority_class=HIGH), clusters)
    assert plan.diagnosis is not None
    assert plan.diagnosis.counts() == counts
    assert plan.diagnosis.summary() == summary


def test_a_refused_deployment_reports_insufficient_capacity_naming_the_cause():
    clusters = [cluster("a", reserved_namespaces=["team-a"])]
    req = t.request(deployment(replicas=1), clusters, [])
    rsp = wire.run(fn.FunctionRunner(matcher=t.stand_in_matcher), req)
    assert wire.desired(rsp) == {}
    assert wire.conditions(rsp)[fn.SCHEDULED] == (
        "False",
        "InsufficientCapacity",
        "0 of 1 replicas placed: 1 pool checked, 1 namespace reserved (1 cluster)",
    )


# -- replicas already there: a policy edit ----------------------------------------------------


@pytest.mark.parametrize(
    ("refusing", "kept_on"),
    [
        pytest.param(
            {"reserved_namespaces": ["team-a"]},
            "1 on a cluster that reserves the namespace",
            id="namespace reserved since",
        ),
        pytest.param(
            {"priority_class_names": ["batch-low"]},
            "1 on a cluster that does not approve its priority class",
            id="class no longer approved",
        ),
    ],
)
def test_an_admitted_replica_on_a_cluster_that_starts_refusing_keeps_running_and_is_reported(
    refusing, kept_on
):
    xr = deployment(replicas=2, priority_class=HIGH)
    clusters = [cluster("a", **refusing), cluster("b", priority_class_names=[HIGH])]
    if "reserved_namespaces" in refusing:
        clusters[0]["spec"]["tenancy"]["priorityClassNames"] = [HIGH]
    rsp = wire.run(
        fn.FunctionRunner(matcher=t.stand_in_matcher), t.request(xr, clusters, [], running(0, "a"))
    )
    placed = {d["metadata"]["name"]: d["spec"]["clusterName"] for d in wire.desired(rsp).values()}
    assert placed == {"llm-0": "a", "llm-1": "b"}
    assert wire.conditions(rsp)[fn.SCHEDULED] == (
        "True",
        "AllReplicasScheduled",
        f"2 of 2 replicas placed; {kept_on}",
    )
    warnings = [e.message for e in rsp.results if "llm-0 runs on a" in e.message]
    assert len(warnings) == 1 and "which refuses it (" in warnings[0]
    assert "keeps running there" in warnings[0]


def test_scale_down_removes_a_replica_on_a_refusing_cluster_first():
    # Otherwise alike, the highest index would go first (rule "victim order").
    own = {**running(0, "a"), **running(1, "b")}
    clusters = [cluster("a", reserved_namespaces=["team-a"]), cluster("b")]
    plan = t.schedule(deployment(replicas=1), clusters, own)
    assert [r.name for r in plan.removed] == ["llm-0"]


@pytest.mark.parametrize(
    ("clusters", "own", "change", "cluster_after", "scheduled"),
    [
        pytest.param(
            [cluster("a", reserved_namespaces=["team-a"]), cluster("b")],
            waiting(0, "a"),
            Change.MOVED,
            "b",
            1,
            id="waiting where the namespace is reserved: moved",
        ),
        pytest.param(
            [cluster("a", priority_class_names=["batch-low"]), cluster("b")],
            waiting(0, "a"),
            Change.STRANDED,
            "a",
            0,
            id="waiting where the class is refused, as everywhere: stranded, not scheduled",
        ),
        pytest.param(
            [cluster("a", namespace_selector={"matchLabels": {"team": "b"}}), cluster("b")],
            waiting(0, "a"),
            Change.KEPT,
            "a",
            0,
            id="waiting where access alone refuses: kept, admission does not read access",
        ),
        pytest.param(
            [
                cluster(
                    "a",
                    namespace_selector={"matchLabels": {"team": "b"}},
                    reserved_namespaces=["team-a"],
                ),
                cluster("b"),
            ],
            waiting(0, "a"),
            Change.MOVED,
            "b",
            1,
            id="waiting where access and the namespace both refuse: moved",
        ),
        pytest.param(
            [cluster("a", reserved_namespaces=["team-a"]), cluster("b")],
            replica(0, "a", pods_scheduled="False", reason="WaitingForPods", ready=False),
            Change.KEPT,
            "a",
            1,
            id="nothing said by admission yet: kept until it says it waits",
        ),
        pytest.param(
            [cluster("a", reserved_namespaces=["team-a"]), cluster("b")],
            running(0, "a"),
            Change.KEPT,
            "a",
            1,
            id="admitted and running: kept",
        ),
    ],
)
def test_a_replica_waiting_for_an_admission_its_cluster_refuses_moves(
    clusters, own, change, cluster_after, scheduled
):
    xr = deployment(replicas=1, priority_class=None)
    if any("priorityClassNames" in c["spec"].get("tenancy", {}) for c in clusters):
        xr = deployment(replicas=1, priority_class=HIGH)
    plan = t.schedule(xr, clusters, own)
    (planned,) = plan.replicas
    assert (planned.change, planned.cluster, plan.scheduled) == (change, cluster_after, scheduled)


def test_a_moved_replica_says_which_rule_its_cluster_refuses_it_by():
    clusters = [cluster("a", reserved_namespaces=["team-a"]), cluster("b")]
    plan = t.schedule(deployment(replicas=1), clusters, waiting(0, "a"))
    (moved,) = plan.replicas
    assert moved.why == (
        "cluster a will not admit it: metadata.namespace: is reserved on this workload "
        'cluster (spec.tenancy.reservedNamespaces) (got "team-a")'
    )
