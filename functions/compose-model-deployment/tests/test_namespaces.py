"""The workload Namespace: one Object per (deployment, cluster), whatever its replica count.

Through the whole RunFunction shell (namespaces.py; design/tenancy.md,
"Workload namespaces"): which clusters get one, what it carries, what a
missing or refusing cluster does to it, and that the same view composes
the same Objects.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import NamedTuple

import pytest
from compose_model_deployment import fn, namespaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from modelplane_common import labels, workload_namespace
from modelplane_testkit import deployment_builders as t
from modelplane_testkit import wire
from modelplane_testkit.wire import conditions, desired

MATCHER = fn.default_matcher()
FULL = {"gpu": 8}
EVICT = {"key": "maintenance", "value": "now", "effect": "NoExecute"}


def call(req, now=t.NOW):
    return fn.run_function(req, now, MATCHER)


def published(body: dict, provider_config: str | None = None) -> dict:
    """An InferenceCluster whose provider config compose-inference-cluster published."""
    body = copy.deepcopy(body)
    body["status"]["providerConfigRef"] = {"name": provider_config or body["metadata"]["name"]}
    return body


def site(name: str, nodes: int = 4, provider_config: str | None = None, **fields) -> dict:
    body = t.cluster(name, [t.pool("p", nodes, histogram=[(FULL, nodes)])], **fields)
    return published(body, provider_config)


def with_pod_security(body: dict, level: str | None) -> dict:
    body = copy.deepcopy(body)
    if level is not None:
        body["spec"]["workloads"] = {"podSecurity": level}
    return body


def running(spread: dict[str, int]) -> dict[str, dict]:
    """The deployment's replicas, observed running: `spread[c]` of them on cluster c."""
    own, index = {}, 0
    for cluster, count in sorted(spread.items()):
        for _ in range(count):
            own[f"replica-{index}"] = t.running_replica(index, cluster)
            index += 1
    return own


def namespace_objects(rsp) -> dict[str, dict]:
    return {k: v for k, v in desired(rsp).items() if k.startswith(namespaces.PREFIX)}


def observed_object(obj: dict) -> dict:
    """A composed Object as the control plane shows it: uid and status besides."""
    out = copy.deepcopy(obj)
    out["metadata"]["uid"] = "0000"
    out["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    return out


def test_the_namespace_object_enforces_the_clusters_level_and_never_deletes():
    rsp = call(t.request(t.deployment(replicas=1), [site("b", provider_config="pc-b")], []))
    obj = namespace_objects(rsp)["namespace/b"]
    assert obj["apiVersion"] == labels.OBJECT_API_VERSION and obj["kind"] == "Object"
    assert obj["metadata"]["namespace"] == "team-a"
    assert obj["metadata"]["name"] == workload_namespace.namespace_object_name("llm", "b")
    assert obj["metadata"]["labels"] == {labels.CLUSTER: "b"}
    assert obj["spec"]["providerConfigRef"] == {"kind": "ClusterProviderConfig", "name": "pc-b"}
    assert set(obj["spec"]["managementPolicies"]) == {
        "Observe",
        "Create",
        "Update",
        "LateInitialize",
    }
    assert obj["spec"]["forProvider"]["manifest"] == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "team-a",
            "labels": {
                "pod-security.kubernetes.io/enforce": "baseline",
                "pod-security.kubernetes.io/enforce-version": "latest",
                "pod-security.kubernetes.io/warn": "baseline",
                "pod-security.kubernetes.io/warn-version": "latest",
            },
        },
    }


@pytest.mark.parametrize(
    ("level", "enforced"),
    [
        pytest.param(None, "baseline", id="an unset level enforces baseline"),
        pytest.param("restricted", "restricted", id="restricted is enforced as written"),
        pytest.param("privileged", "privileged", id="privileged is enforced as written"),
    ],
)
def test_the_workload_namespace_enforces_the_clusters_pod_security_level(level, enforced):
    cluster = with_pod_security(site("b"), level)
    rsp = call(t.request(t.deployment(replicas=1), [cluster], []))
    manifest = namespace_objects(rsp)["namespace/b"]["spec"]["forProvider"]["manifest"]
    prefix = "pod-security.kubernetes.io/"
    assert manifest["metadata"]["labels"][prefix + "enforce"] == enforced
    assert manifest["metadata"]["labels"][prefix + "warn"] == enforced


class Case(NamedTuple):
    spec: str  # the rule the case proves
    clusters: list[dict]  # the selected InferenceClusters, as fetched
    own: dict[str, dict]  # the deployment's observed replicas
    observed: dict[str, dict]  # its observed Namespace Objects
    expected: dict[str, str]  # composition name -> "composed" or "kept" (as observed)


def _observed(cluster: str, namespace: str = "team-a") -> dict[str, dict]:
    body = workload_namespace.namespace_object(
        deployment="llm",
        namespace=namespace,
        cluster=cluster,
        provider_config="from-an-earlier-pass",
        pod_security="restricted",
    )
    return {namespaces.resource_name(cluster): observed_object(body)}


CASES = [
    Case(
        spec="a cluster its replicas run on gets one, composed from the cluster as read",
        clusters=[site("a"), site("b")],
        own=running({"a": 1}),
        observed=_observed("a"),
        expected={"namespace/a": "composed"},
    ),
    Case(
        spec="a cluster it has no replica on any more loses its Object (never the namespace)",
        clusters=[site("a"), site("b")],
        own=running({"a": 1}),
        observed={**_observed("a"), **_observed("b")},
        expected={"namespace/a": "composed"},
    ),
    Case(
        spec="a cluster that reserves the namespace gets none, even where one was observed",
        clusters=[site("b", reserved_namespaces=["team-a"])],
        own=running({"b": 1}),
        observed=_observed("b"),
        expected={},
    ),
    Case(
        spec="a cluster with no provider config yet keeps what was observed",
        clusters=[t.cluster("b", [t.pool("p", 4, histogram=[(FULL, 4)])])],
        own=running({"b": 1}),
        observed=_observed("b"),
        expected={"namespace/b": "kept"},
    ),
    Case(
        spec="a held replica on a missing cluster keeps its cluster's Object as observed",
        clusters=[site("a")],
        own=running({"a": 1, "b": 1}),
        observed={**_observed("a"), **_observed("b")},
        expected={"namespace/a": "composed", "namespace/b": "kept"},
    ),
    Case(
        spec="a replica stranded on a draining cluster keeps the Namespace composed there",
        clusters=[site("b", taints=[EVICT])],
        own=running({"b": 1}),
        observed={},
        expected={"namespace/b": "composed"},
    ),
    Case(
        spec="a replica moved off a draining cluster takes the Namespace with it",
        clusters=[site("a"), site("b", taints=[EVICT])],
        own=running({"b": 1}),
        observed=_observed("b"),
        expected={"namespace/a": "composed"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.spec for c in CASES])
def test_which_clusters_get_a_namespace_object(case):
    xr = t.deployment(replicas=max(1, len(case.own)))
    req = t.request(xr, case.clusters, list(case.own.values()), {**case.own, **case.observed})
    found = namespace_objects(call(req))
    assert sorted(found) == sorted(case.expected)
    for key, how in case.expected.items():
        if how == "kept":
            assert found[key]["spec"] == case.observed[key]["spec"], key
        else:
            assert found[key]["spec"]["providerConfigRef"]["name"] != "from-an-earlier-pass"


@pytest.mark.parametrize("namespace", ["kube-tenant", "default", "modelplane-system"])
def test_a_namespace_reserved_on_every_cluster_is_never_composed(namespace):
    # The deployment function refuses such a deployment before it plans (InvalidDeployment);
    # the Namespace rule refuses it on its own too.
    sites = {"b": namespaces.Site(provider_config="b", pod_security="baseline", reserved=())}
    composed = namespaces.compose(
        deployment="llm", namespace=namespace, in_use=["b"], sites=sites, observed={}
    )
    assert composed == {}
    allowed = namespaces.compose(
        deployment="llm", namespace="team-a", in_use=["b"], sites=sites, observed={}
    )
    assert list(allowed) == ["namespace/b"]


@pytest.mark.parametrize(
    "req",
    [
        pytest.param(
            t.request(t.deployment(replicas=2), None, [], {**running({"b": 2}), **_observed("b")}),
            id="the clusters not fetched yet",
        ),
        pytest.param(
            t.request(t.deployment(replicas=2), [], [], {**running({"b": 2}), **_observed("b")}),
            id="no cluster selected",
        ),
        pytest.param(
            t.request(
                {**t.deployment(replicas=2), "spec": {"replicas": 2}},
                [site("b")],
                [],
                {**running({"b": 2}), **_observed("b")},
            ),
            id="an invalid deployment",
        ),
    ],
)
def test_a_pass_that_plans_nothing_keeps_every_namespace_object_as_observed(req):
    rsp = call(req)
    assert conditions(rsp)[fn.SCHEDULED][0] != "True"
    assert {k: v["spec"] for k, v in namespace_objects(rsp).items()} == {
        k: v["spec"] for k, v in _observed("b").items()
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spread=st.dictionaries(
        st.sampled_from(["a", "b", "c", "d"]), st.integers(min_value=1, max_value=6), min_size=1
    )
)
def test_a_deployment_on_k_clusters_composes_exactly_k_namespace_objects(spread):
    own = running(spread)
    clusters = [site(c, nodes=8) for c in ("a", "b", "c", "d")]
    xr = t.deployment(replicas=len(own), engines=[t.standalone(gpus=8)])
    rsp = call(t.request(xr, clusters, list(own.values()), own))
    assert sorted(namespace_objects(rsp)) == [f"namespace/{c}" for c in sorted(spread)]
    replicas = [k for k in desired(rsp) if k.startswith("replica-")]
    assert len(replicas) == len(own)


def test_the_same_view_composes_the_same_namespace_objects_at_another_time():
    own = running({"a": 2, "b": 1})
    clusters = [site("a"), site("b")]
    req = t.request(t.deployment(replicas=3), clusters, list(own.values()), own)
    first = namespace_objects(call(req))
    again = namespace_objects(call(req, now=t.NOW + timedelta(seconds=2)))
    assert first == again and len(first) == 2


def test_a_steady_reconcile_composes_what_the_fleet_pass_composes():
    """Steady mode reads the footprint by name; its Namespace Objects are the fleet's."""
    own = running({"a": 1, "b": 1})
    clusters = [site("a"), site("b", provider_config="pc-b")]
    xr = t.deployment(replicas=2, engines=[t.standalone(gpus=8)])
    calls = wire.reconcile(call, xr, own, [*clusters, *own.values(), t.namespace("team-a")])
    last = calls[-1][1]
    assert any(name.startswith("inference-cluster-") for name in last.requirements.resources)
    fleet = call(t.request(xr, clusters, list(own.values()), own))
    assert namespace_objects(last) == namespace_objects(fleet)
    assert sorted(namespace_objects(last)) == ["namespace/a", "namespace/b"]


def test_a_namespace_object_name_is_bounded_and_shared_with_no_replica_object():
    long = "d" * 63
    name = workload_namespace.namespace_object_name(long, "c" * 253)
    assert len(name) <= 63
    # A replica named like the deployment, with an engine named like the suffix, still
    # names its Objects otherwise (three parts, never four).
    from compose_model_replica.workloads import ReplicaManifests

    replica = ReplicaManifests("llm", "team-a", "b", "b")
    # Every Object a replica composes: an engine's workload and claim templates, its
    # observation (three or five parts), with engines named to collide if they could.
    names = {
        replica.object_name(engine, *more)
        for engine in ("namespace", "deployment", "deployment-namespace")
        for more in ((), ("standalone", "claims"), ("worker", "claims"))
    } | {replica.object_name("pods")}
    assert workload_namespace.namespace_object_name("llm", "b") not in names
    assert workload_namespace.namespace_object_name("llm", "b") != (
        workload_namespace.namespace_object_name("llm-b", "")
    )
