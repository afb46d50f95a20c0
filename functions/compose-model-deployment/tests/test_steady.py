"""Steady mode through the requirement loop (steady.py): which inputs each call of one
reconcile requires, and that the response Crossplane applies (the last) is the one a
pass on the whole fleet gives.

Each case runs `fn.run_function` the way Crossplane's FetchingFunctionRunner does
(`wire.reconcile`: nothing fetched first, then exactly what the previous call
required, until a call requires what the one before it did), answering every
requirement from one list of objects: the clusters, the deployment's replicas,
other deployments' replicas, the Namespace.
"""

from __future__ import annotations

import copy

import pytest
from compose_model_deployment import fn, steady, tenancy
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_testkit import deployment_builders as t
from modelplane_testkit import wire

MATCHER = fn.default_matcher()
FULL = {"gpu": 8}
SELECTED = {"tier": "1"}
CLUSTERS = [
    t.cluster("a", [t.pool("p", 4, histogram=[(FULL, 3)])], cluster_labels=SELECTED),
    t.cluster("b", [t.pool("p", 4, histogram=[(FULL, 3)])], cluster_labels=SELECTED),
    t.cluster("c", [t.pool("p", 4, histogram=[(FULL, 4)])], cluster_labels=SELECTED),
]
# Other deployments' replicas as their deployments label them: other-0 runs (counted),
# other-1 waits for its pods (pending).
OTHERS = t.charge_labelled(
    [
        t.model_replica("other-0", "team-b", "a", [t.replica_engine("e", "p", gpus=8)]),
        t.model_replica(
            "other-1", "team-b", "c", [t.replica_engine("e", "p", gpus=8)], pods_scheduled="False"
        ),
    ],
    CLUSTERS,
)
TENANT = [t.namespace("team-a")]

FOOTPRINT_AB = ["inference-cluster-a", "inference-cluster-b", "namespace", "resource-quotas"]
FOOTPRINT_A = ["inference-cluster-a", "namespace", "resource-quotas"]
FLEET = ["inference-clusters", "namespace", "pending-replicas", "resource-quotas"]


def deployment(replicas: int, gpus: int = 8, **fields) -> dict:
    return t.deployment(
        replicas=replicas, engines=[t.standalone(gpus=gpus)], match_labels=SELECTED, **fields
    )


def placed(count: int, **status) -> dict[str, dict]:
    """`count` replicas as the fleet pass places them, observed scheduled and Ready."""
    xr = deployment(count)
    plan = t.schedule(xr, CLUSTERS, {}, OTHERS, matcher=MATCHER)
    return t.own_from_plan(xr, plan, scheduled_at=t.ago(30), since=t.ago(30), **status)


OWN = placed(2)  # replica-0 on a, replica-1 on b (rule "cluster order")


def stuck(own: dict[str, dict]) -> dict[str, dict]:
    """replica-1 Unschedulable for 10 minutes, past the default grace."""
    own = copy.deepcopy(own)
    condition = own["replica-1"]["status"]["conditions"][0]
    condition.update(status="False", reason="Unschedulable", lastTransitionTime=t.ago(10))
    own["replica-1"]["metadata"].setdefault("annotations", {})["modelplane.ai/placed-at"] = t.ago(
        60
    )
    return own


def unreadable(own: dict[str, dict]) -> dict[str, dict]:
    own = copy.deepcopy(own)
    own["replica-1"]["spec"]["clusterName"] = 7
    return own


def on_cluster(own: dict[str, dict], cluster: str) -> dict[str, dict]:
    own = copy.deepcopy(own)
    own["replica-1"]["spec"]["clusterName"] = cluster
    own["replica-1"]["metadata"]["labels"]["modelplane.ai/cluster"] = cluster
    return own


def without(name: str) -> list[dict]:
    return [c for c in CLUSTERS if c["metadata"]["name"] != name]


def relabelled(name: str) -> list[dict]:
    out = copy.deepcopy(CLUSTERS)
    for c in out:
        if c["metadata"]["name"] == name:
            c["metadata"]["labels"] = {"tier": "2"}
    return out


def missing_b(xr: dict) -> dict:
    """The deployment remembering cluster b missing for 10 minutes, past the default grace."""
    return {**xr, "status": {"missingClusters": [{"name": "b", "since": t.ago(10)}]}}


INVALID = {**deployment(2), "spec": {"replicas": 2, "template": {"spec": {"engines": []}}}}

# (deployment, own replicas, clusters, requirement names of each call, last ReplicasScheduled)
SEQUENCES = [
    pytest.param(
        deployment(2),
        OWN,
        CLUSTERS,
        [FOOTPRINT_AB, FOOTPRINT_AB],
        "AllReplicasScheduled",
        id="a steady deployment reads its two clusters by name and stops after two calls",
    ),
    pytest.param(
        deployment(3),
        OWN,
        CLUSTERS,
        [FLEET, FLEET],
        "AllReplicasScheduled",
        id="a deployment scaling up has too few replicas and reads the fleet at once",
    ),
    pytest.param(
        deployment(1),
        OWN,
        CLUSTERS,
        [FOOTPRINT_AB, FOOTPRINT_AB],
        "AllReplicasScheduled",
        id="a scale-down needs no fleet: victim order reads only the deployment's replicas",
    ),
    pytest.param(
        deployment(2),
        stuck(OWN),
        CLUSTERS,
        [FOOTPRINT_AB, FLEET, FLEET],
        "AllReplicasScheduled",
        id="healing a replica Unschedulable past its grace escalates to the fleet",
    ),
    pytest.param(
        missing_b(deployment(2)),
        OWN,
        without("b"),
        [FOOTPRINT_AB, FLEET, FLEET],
        "AllReplicasScheduled",
        id="a deleted own cluster past the grace escalates to the fleet to move its replica",
    ),
    pytest.param(
        deployment(2),
        OWN,
        without("b"),
        [FOOTPRINT_AB, FLEET, FLEET],
        "ClusterUnavailable",
        id="a deleted own cluster within the grace escalates and the fleet pass holds",
    ),
    pytest.param(
        missing_b(deployment(2)),
        OWN,
        relabelled("b"),
        [FOOTPRINT_AB, FLEET, FLEET],
        "AllReplicasScheduled",
        id="an own cluster the clusterSelector no longer selects reads as absent and escalates",
    ),
    pytest.param(
        deployment(1),
        {"replica-0": OWN["replica-0"]},
        relabelled("a"),
        [FOOTPRINT_A, FLEET, FLEET],
        "ClusterUnavailable",
        id="every own cluster unselected escalates rather than deciding NoClusters in steady mode",
    ),
    pytest.param(
        deployment(2, gpus=4),
        OWN,
        CLUSTERS,
        [FOOTPRINT_AB, FLEET, FLEET],
        "AllReplicasScheduled",
        id="an edited engine shape escalates to the fleet",
    ),
    pytest.param(
        INVALID,
        OWN,
        CLUSTERS,
        [[]],
        "InvalidDeployment",
        id="an invalid deployment requires nothing and keeps every replica as it is",
    ),
    pytest.param(
        deployment(2),
        unreadable(OWN),
        CLUSTERS,
        [FLEET, FLEET],
        "InvalidReplica",
        id="an unreadable own replica reads the fleet and says InvalidReplica as before",
    ),
    pytest.param(
        deployment(2),
        on_cluster(OWN, "a/b"),
        CLUSTERS,
        [FLEET, FLEET],
        "ClusterUnavailable",
        id="a replica on a cluster no object can be named reads the fleet, where it is missing",
    ),
    pytest.param(
        deployment(0),
        {},
        CLUSTERS,
        [FLEET, FLEET],
        "AllReplicasScheduled",
        id="a deployment without replicas has no footprint and reads the fleet",
    ),
]


def call(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
    return fn.run_function(req, t.NOW, MATCHER)


def fleet_pass(xr: dict, own: dict[str, dict], clusters: list[dict]) -> fnv1.RunFunctionResponse:
    """One call on the whole fleet, everything fetched: what a pass decided before."""
    selected = [c for c in clusters if c["metadata"]["labels"] == SELECTED]
    return call(t.request(xr, selected, [*own.values(), *OTHERS], own))


def applied(rsp: fnv1.RunFunctionResponse) -> fnv1.RunFunctionResponse:
    """What Crossplane applies from a response: all of it but the requirements."""
    out = fnv1.RunFunctionResponse()
    out.CopyFrom(rsp)
    out.ClearField("requirements")
    return out


@pytest.mark.parametrize(("xr", "own", "clusters", "sequence", "scheduled"), SEQUENCES)
def test_each_call_requires_the_footprint_or_the_fleet(xr, own, clusters, sequence, scheduled):
    calls = wire.reconcile(call, xr, own, [*clusters, *own.values(), *OTHERS, *TENANT])
    assert [sorted(rsp.requirements.resources) for _, rsp in calls] == sequence
    last = calls[-1][1]
    assert wire.conditions(last)[fn.SCHEDULED][1] == scheduled
    assert applied(last) == applied(fleet_pass(xr, own, clusters))


def test_a_steady_call_reads_no_other_replica_and_each_cluster_by_name():
    calls = wire.reconcile(call, deployment(2), OWN, [*CLUSTERS, *OWN.values(), *OTHERS, *TENANT])
    (_, first), (second, _) = calls
    by_name = first.requirements.resources[steady.requirement_name("a")]
    assert (by_name.api_version, by_name.kind, by_name.match_name) == (
        "modelplane.ai/v1alpha1",
        "InferenceCluster",
        "a",
    )
    assert sorted(second.required_resources) == FOOTPRINT_AB
    assert [len(second.required_resources[n].items) for n in FOOTPRINT_AB[:2]] == [1, 1]
    assert tenancy.NAMESPACE in second.required_resources


def test_the_first_call_of_a_steady_deployment_waits_and_keeps_every_replica():
    rsp = call(t.request(deployment(2), None, None, OWN, namespaces=None, quotas=None))
    assert wire.conditions(rsp)[fn.SCHEDULED][:2] == ("Unknown", "WaitingForInputs")
    assert {k: v["spec"] for k, v in wire.desired(rsp).items()} == {
        k: v["spec"] for k, v in OWN.items()
    }


def with_implausible_pool(cluster: dict) -> dict:
    """The cluster with a second pool, q, whose report counts more nodes than it has."""
    out = copy.deepcopy(cluster)
    spec, status = t.pool("q", 2, histogram=[(FULL, 2)], observed_nodes=9)
    out["spec"]["nodePools"].append(spec)
    out["status"]["gpuPools"].append(status)
    return out


@pytest.mark.parametrize(
    ("steady", "noticed"),
    [
        pytest.param(True, False, id="a steady pass reads only the pools its replicas use"),
        pytest.param(False, True, id="a placing pass reads every pool of the cluster"),
    ],
)
def test_a_pool_no_replica_uses_is_read_only_when_the_pass_places(steady, noticed):
    clusters = [with_implausible_pool(CLUSTERS[0]), *CLUSTERS[1:]]
    xr = deployment(2 if steady else 3)
    calls = wire.reconcile(call, xr, OWN, [*clusters, *OWN.values(), *OTHERS, *TENANT])
    inputs_valid = wire.conditions(calls[-1][1])["InputsValid"]
    assert ("pool q" in inputs_valid[2]) is noticed, inputs_valid


def names(calls) -> list[list[str]]:
    return [sorted(rsp.requirements.resources) for _, rsp in calls]


def test_under_crossplane_v2_4_a_deployment_seeded_with_the_fleet_returns_to_its_footprint():
    """Crossplane v2.4 seeds each reconcile with what the last one ended on: a steady
    deployment whose last reconcile placed (on the fleet) is given the fleet, plans on
    it, and requires its footprint, so the reconcile after reads only that, in one call."""
    fetchable = [*CLUSTERS, *OWN.values(), *OTHERS, *TENANT]
    placing = wire.reconcile(call, deployment(2), {"replica-0": OWN["replica-0"]}, fetchable)
    fleet = placing[-1][1].requirements
    assert sorted(fleet.resources) == FLEET
    steady_calls = wire.reconcile(call, deployment(2), OWN, fetchable, seeded=fleet)
    assert names(steady_calls) == [FOOTPRINT_AB, FOOTPRINT_AB]
    after = wire.reconcile(call, deployment(2), OWN, fetchable, steady_calls[-1][1].requirements)
    assert names(after) == [FOOTPRINT_AB]
    assert applied(after[-1][1]) == applied(fleet_pass(deployment(2), OWN, CLUSTERS))
