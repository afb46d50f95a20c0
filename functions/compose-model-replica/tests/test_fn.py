"""compose-model-replica through RunFunction: what it composes, relays and says."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest
import structlog
from compose_model_replica.core import unchanged
from compose_model_replica.fn import FunctionRunner
from crossplane.function.proto.v1.run_function_pb2 import READY_FALSE, READY_TRUE
from modelplane_common import currency, labels, template_digest
from modelplane_common.orphans import COMPOSED_ANNOTATION
from modelplane_common.outcome import MAX_MESSAGE
from modelplane_common.pods_created import released
from modelplane_common.timeutil import format_time, parse_time
from modelplane_testkit import admission_builders as a
from modelplane_testkit import wire
from modelplane_testkit.wire import conditions, desired, desired_status, events, request, run

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
FRESH = "2026-11-29T11:59:30Z"
EARLIER = "2026-11-29T11:50:00Z"
STALE = "2026-11-29T11:40:00Z"
FUTURE = "2026-11-29T12:20:00Z"
# compose-inference-cluster's lease on its verdicts (modelplane_common.currency): good at NOW.
VOUCHED = "2026-11-29T12:20:00Z"
LAPSED = "2026-11-29T11:59:59Z"

CLUSTER = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceCluster",
    "metadata": {"name": "east"},
    "spec": {
        "credentials": {"secretRef": {"namespace": "ops", "name": "east-kc", "key": "kubeconfig"}},
        "nodePools": [
            # Room for every shape the tests compose (admission judges it with whole-node
            # accounting: this cluster publishes no histogram).
            {"name": "h100", "nodeCount": 8, "devices": [{"name": "gpu", "count": 8}]},
            {"name": "l40s", "nodeCount": 4, "devices": [{"name": "gpu", "count": 8}]},
        ],
        "observation": {"mode": "Observed", "maxAge": "5m"},
    },
    "status": {"providerConfigRef": {"name": "east"}, "agent": {"present": True}},
}

TEMPLATE = {"spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0"}]}}
GPU = {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 8}


def standalone(name="serve", pool="h100", copies=1, requests=(GPU,)):
    member = {"role": "Standalone", "nodePoolName": pool, "template": TEMPLATE}
    if requests:
        member["deviceRequests"] = list(requests)
    return {"name": name, "copies": copies, "members": [member]}


def gang(name="serve", pool="h100", copies=1, nodes=2):
    return {
        "name": name,
        "copies": copies,
        "members": [
            {"role": "Leader", "nodePoolName": pool, "deviceRequests": [GPU], "template": TEMPLATE},
            {
                "role": "Worker",
                "nodePoolName": pool,
                "worker": {"nodes": nodes},
                "deviceRequests": [GPU],
                "template": TEMPLATE,
            },
        ],
    }


def xr(*engines, cluster="east", name="r0", namespace="team-a", status=None):
    body = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelReplica",
        "metadata": {
            "name": name,
            "namespace": namespace,
            # Placed long enough ago for admission to judge it (admission.COMMIT_DELAY).
            "annotations": {labels.PLACED_AT: EARLIER},
            "labels": {labels.CLUSTER: cluster},
        },
        "spec": {
            "clusterName": cluster,
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
            ],
            "engines": list(engines) or [standalone()],
        },
    }
    if status is not None:
        body["status"] = status
    return body


def cluster(mode="Observed", agent=True, pools=("h100", "l40s"), max_age="5m", pc="east"):
    body = copy.deepcopy(CLUSTER)
    body["spec"]["observation"] = {"mode": mode, "maxAge": max_age}
    body["spec"]["nodePools"] = [p for p in body["spec"]["nodePools"] if p["name"] in pools]
    body["status"]["agent"]["present"] = agent
    if pc is None:
        del body["status"]["providerConfigRef"]
    return body


def tenancy_cluster(priority_classes=(), reserved=()):
    """The test cluster with its spec.tenancy."""
    body = cluster()
    body["spec"]["tenancy"] = {
        "priorityClassNames": list(priority_classes),
        "reservedNamespaces": list(reserved),
    }
    return body


def with_priority(engine, name):
    """`engine` whose first member's template names PriorityClass `name`."""
    engine = copy.deepcopy(engine)
    member = engine["members"][0]
    member["template"] = {"spec": {**member["template"]["spec"], "priorityClassName": name}}
    return engine


SCHEDULED = {"state": "True", "reason": "AllBound", "message": "", "since": EARLIER}


def report(pods, scheduled_pods, observed_at=FRESH, **scheduled):
    """An agent report; `scheduled` overrides SCHEDULED's fields of its Scheduled condition."""
    fields = {**SCHEDULED, **scheduled}
    condition = {"type": "Scheduled", "status": fields["state"], "reason": fields["reason"]}
    if fields["message"]:
        condition["message"] = fields["message"]
    if fields["since"] is not None:
        condition["lastTransitionTime"] = fields["since"]
    return {
        "observedAt": observed_at,
        "pods": pods,
        "scheduledPods": scheduled_pods,
        "conditions": [condition],
    }


def remote_object(kind, remote_status=None, ready=False, synced=True, synced_message="",
                  spec=None):  # fmt: skip
    manifest = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"}}
    status: dict = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    status["conditions"].append(
        {"type": "Synced", "status": "True" if synced else "False", "message": synced_message}
    )
    if remote_status is not None:
        status["atProvider"] = {"manifest": {**manifest, "status": remote_status}}
    return {
        "apiVersion": labels.OBJECT_API_VERSION,
        "kind": "Object",
        "metadata": {
            "name": f"observed-{kind.lower()}",
            "namespace": "team-a",
            "uid": "3f1c",
            "resourceVersion": "812",
        },
        "spec": spec or {"forProvider": {"manifest": manifest}},
        "status": status,
    }


def observation(status):
    return {"east/observation": remote_object("ReplicaObservation", status, ready=True)}


def call(replica, observed=None, required=None, fetched=True):
    if required is None and fetched:
        required = {"cluster": [cluster()]}
    if required is not None and "cluster-replicas" not in required:
        # Crossplane fetched the cluster's replicas: this one alone, unless a test says.
        required = {**required, "cluster-replicas": [replica]}
    if required is not None and "resource-quotas" not in required:
        # And the namespace's ResourceQuotas: none, unless a test says.
        required = {**required, "resource-quotas": []}
    runner = FunctionRunner(clock=lambda: NOW)
    return run(runner, request(replica, observed or {}, required if fetched else None))


def pods_scheduled(rsp):
    return conditions(rsp)["PodsScheduled"]


# --- PodsScheduled: every reason, and what the agent must say for it -----------------------


@pytest.mark.parametrize(
    ("replica", "cluster_body", "observed", "expected"),
    [
        pytest.param(
            xr(), cluster(), {}, ("Unknown", "NotObserved"), id="no report yet is NotObserved"
        ),
        pytest.param(
            xr(),
            cluster(agent=False),
            {},
            ("Unknown", "NotObserved"),
            id="no agent on the cluster is NotObserved",
        ),
        pytest.param(
            xr(),
            cluster(mode="Declared"),
            observation(report(1, 1)),
            ("Unknown", "NotObserved"),
            id="Declared mode is NotObserved even with an old report",
        ),
        pytest.param(
            xr(),
            cluster(),
            observation(report(1, 1, observed_at=STALE)),
            ("Unknown", "NotObserved"),
            id="a report older than maxAge is NotObserved",
        ),
        pytest.param(
            xr(),
            cluster(max_age="30m"),
            observation(report(1, 1, observed_at=STALE)),
            ("True", "AllPodsScheduled"),
            id="maxAge is the cluster's, not a constant",
        ),
        pytest.param(
            xr(),
            cluster(),
            observation(report(1, 1, observed_at=FUTURE)),
            ("Unknown", "NotObserved"),
            id="a report from beyond maxAge in the future is NotObserved",
        ),
        pytest.param(
            xr(),
            cluster(),
            observation({"pods": 1}),
            ("Unknown", "NotObserved"),
            id="a malformed report is NotObserved",
        ),
        pytest.param(
            xr(gang(nodes=2)),
            cluster(),
            observation(report(1, 1)),
            ("False", "WaitingForPods"),
            id="a bound leader without its workers is WaitingForPods",
        ),
        pytest.param(
            xr(standalone(copies=3)),
            cluster(),
            observation(report(2, 1, state="False", reason="Pending")),
            ("False", "WaitingForPods"),
            id="fewer pods than copies is WaitingForPods even while some pend",
        ),
        pytest.param(
            xr(gang(nodes=2, copies=2)),
            cluster(),
            observation(report(6, 6)),
            ("True", "AllPodsScheduled"),
            id="every pod of every gang copy bound is AllPodsScheduled",
        ),
        pytest.param(
            xr(standalone(), standalone("decode")),
            cluster(),
            observation(report(2, 1, state="False", reason="Pending")),
            ("False", "PodsPending"),
            id="all pods exist and some are unbound is PodsPending",
        ),
        pytest.param(
            xr(),
            cluster(),
            observation(report(1, 0, state="False", reason="Unschedulable", message="0/4 nodes")),
            ("False", "Unschedulable"),
            id="the scheduler's Unschedulable is Unschedulable",
        ),
        pytest.param(
            xr(gang(nodes=2)),
            cluster(),
            observation(report(1, 0, state="False", reason="Unschedulable", message="0/4 nodes")),
            ("False", "Unschedulable"),
            id="Unschedulable wins over WaitingForPods so the deployment can heal",
        ),
        pytest.param(
            xr({"name": "serve", "members": [{"role": "Worker", "nodePoolName": "h100"}]}),
            cluster(),
            observation(report(1, 1)),
            ("Unknown", "InvalidSpec"),
            id="an invalid spec hides how many pods are expected",
        ),
    ],
)
def test_pods_scheduled(replica, cluster_body, observed, expected):
    rsp = call(replica, observed, {"cluster": [cluster_body]})
    assert pods_scheduled(rsp)[:2] == expected


@pytest.mark.parametrize(
    ("status", "defect"),
    [
        pytest.param(
            {**report(1, 1), "observedAt": "yesterday"}, "observedAt", id="observedAt unreadable"
        ),
        pytest.param(
            {**report(1, 1), "observedAt": "2026-11-29T11:59:30"},
            'observedAt: not an RFC 3339 time (got "2026-11-29T11:59:30")',
            id="observedAt without a zone",
        ),
        pytest.param(
            {**report(1, 1), "pods": "one"},
            'pods: must be a count (got "one")',
            id="pods not a count",
        ),
        pytest.param(
            {**report(1, 1), "pods": 1.5}, "pods: must be a count (got 1.5)", id="pods fractional"
        ),
        pytest.param(
            report(1, 2), "scheduledPods: exceeds the 1 pods (got 2)", id="more bound than seen"
        ),
        pytest.param(
            {**report(1, 1), "conditions": []},
            "no Scheduled condition",
            id="no Scheduled condition",
        ),
        pytest.param(
            {**report(1, 1), "conditions": "Scheduled"},
            "no Scheduled condition",
            id="conditions not a list",
        ),
        pytest.param(
            report(1, 1, since=None), "without a lastTransitionTime", id="True without a time"
        ),
        pytest.param(report(2, 1), "while some pods are not bound", id="True with unbound pods"),
        pytest.param(
            report(1, 1, state="Maybe"),
            'conditions[Scheduled].status: must be True, False or Unknown (got "Maybe")',
            id="Scheduled status unknown word",
        ),
    ],
)
def test_malformed_report_is_not_observed_and_warned(status, defect):
    rsp = call(xr(), observation(status))
    state, reason, message = pods_scheduled(rsp)
    assert (state, reason) == ("Unknown", "NotObserved")
    assert message.startswith("the agent's report is malformed: ")
    assert defect in message
    assert ("Warning", message) in events(rsp)
    assert desired_status(rsp)["pods"] == {"expected": 1}


def test_counts_delivered_as_floats_are_counts():
    rsp = call(xr(standalone(copies=3)), observation(report(3.0, 3.0)))
    assert pods_scheduled(rsp)[:2] == ("True", "AllPodsScheduled")
    assert desired_status(rsp)["pods"] == {"expected": 3, "observed": 3, "scheduled": 3}


def test_expected_pods_count_leader_and_every_worker_of_every_copy():
    replica = xr(gang(copies=2, nodes=3), standalone("router", copies=2, requests=()))
    assert desired_status(call(replica))["pods"]["expected"] == 2 * (1 + 3) + 2


def test_all_scheduled_relays_the_agents_transition_time():
    rsp = call(xr(), observation(report(1, 1, since=EARLIER)))
    assert desired_status(rsp)["scheduledAt"] == EARLIER


def test_a_report_the_agent_says_is_not_current_is_judged_by_its_observed_at_alone():
    # While a watch fails the agent freezes observedAt and adds Current=False beside
    # Scheduled (design/agent.md, "Freshness"): the replica is judged as before, and
    # goes Unknown only once observedAt is stale.
    status = report(1, 1, since=EARLIER)
    status["conditions"].append(
        {"type": "Current", "status": "False", "reason": "WatchFailing", "message": "Pod watch"}
    )
    rsp = call(xr(), observation(status))
    assert pods_scheduled(rsp)[:2] == ("True", "AllPodsScheduled")
    assert desired_status(rsp)["scheduledAt"] == EARLIER
    stale = call(xr(), observation({**status, "observedAt": STALE}))
    assert pods_scheduled(stale)[:2] == ("Unknown", "NotObserved")


def vouched_by(replicas_current, until=VOUCHED):
    """The cluster as compose-inference-cluster publishes it: its verdict on every replica
    report (status.agent.replicasCurrent, if any) and until when it vouches for it."""
    body = cluster()
    body["status"]["agent"]["vouchedUntil"] = until
    if replicas_current is not None:
        body["status"]["agent"]["replicasCurrent"] = replicas_current
    return body


FRESHNESS = {
    "a stale report is judged while its cluster vouches for every replica report": (
        STALE, True, VOUCHED, ("True", "AllPodsScheduled")
    ),
    "a stale report is unknown once its cluster judges the agent's word stale": (
        STALE, False, VOUCHED, ("Unknown", "NotObserved")
    ),
    "a fresh report is judged with no word from the cluster (an agent that predates it)": (
        FRESH, None, VOUCHED, ("True", "AllPodsScheduled")
    ),
    "a stale report is unknown with no word from the cluster": (
        STALE, None, VOUCHED, ("Unknown", "NotObserved")
    ),
    "a fresh report is judged beside a stale word from the cluster": (
        FRESH, False, VOUCHED, ("True", "AllPodsScheduled")
    ),
    "a word whose lease lapsed (the cluster stopped reconciling) vouches for nothing": (
        STALE, True, LAPSED, ("Unknown", "NotObserved")
    ),
    "a word with an unreadable lease vouches for nothing": (
        STALE, True, "yesterday", ("Unknown", "NotObserved")
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("observed_at", "replicas_current", "until", "expected"),
    FRESHNESS.values(),
    ids=FRESHNESS.keys(),
)
def test_a_report_is_fresh_while_its_observed_at_is_or_its_cluster_vouches_for_it(
    observed_at, replicas_current, until, expected
):
    rsp = call(
        xr(),
        observation(report(1, 1, observed_at=observed_at)),
        {"cluster": [vouched_by(replicas_current, until)]},
    )
    assert pods_scheduled(rsp)[:2] == expected


@pytest.mark.parametrize(
    ("previous", "expected"),
    [
        pytest.param(
            {
                "conditions": [
                    {"type": "PodsScheduled", "status": "False", "reason": "WaitingForPods"}
                ]
            },
            FRESH,
            id="after WaitingForPods scheduledAt is not before the report completing the gang",
        ),
        pytest.param(
            {"conditions": [{"type": "PodsScheduled", "status": "False", "reason": "PodsPending"}]},
            EARLIER,
            id="after PodsPending the agent's flip to True is exact",
        ),
        pytest.param(
            {
                "scheduledAt": "2026-11-29T11:55:00Z",
                "conditions": [
                    {"type": "PodsScheduled", "status": "True", "reason": "AllPodsScheduled"}
                ],
            },
            "2026-11-29T11:55:00Z",
            id="a published scheduledAt holds while the agent has not flipped again",
        ),
        pytest.param(
            {
                "scheduledAt": "2026-11-29T11:45:00Z",
                "conditions": [
                    {"type": "PodsScheduled", "status": "True", "reason": "AllPodsScheduled"}
                ],
            },
            EARLIER,
            id="a newer flip of the agent moves scheduledAt forward",
        ),
    ],
)
def test_scheduled_at_is_never_earlier_than_all_expected_pods_were_bound(previous, expected):
    rsp = call(xr(gang(nodes=2), status=previous), observation(report(3, 3, since=EARLIER)))
    assert desired_status(rsp)["scheduledAt"] == expected


@pytest.mark.parametrize(
    "status",
    [
        report(1, 0, state="False", reason="Pending"),
        report(1, 1, observed_at=STALE),
        {"pods": 1},
    ],
    ids=["pending", "stale", "malformed"],
)
def test_scheduled_at_is_withdrawn_unless_all_pods_are_scheduled(status):
    previous = {"scheduledAt": EARLIER}
    assert "scheduledAt" not in desired_status(call(xr(status=previous), observation(status)))


def test_unschedulable_names_the_engine_whose_workload_the_scheduler_names():
    first = call(xr(standalone("prefill"), standalone("decode")))
    decode_workload = desired(first)["east/decode/workload"]["spec"]["forProvider"]["manifest"]
    said = f"pod team-a/{decode_workload['metadata']['name']}-7d9f-x2x9z: 0/4 nodes are available"
    rsp = call(
        xr(standalone("prefill"), standalone("decode")),
        observation(report(2, 1, state="False", reason="Unschedulable", message=said)),
    )
    assert pods_scheduled(rsp) == ("False", "Unschedulable", f"engine decode: {said}")
    assert ("Warning", f"pods are unschedulable: engine decode: {said}") in events(rsp)


def test_unschedulable_without_a_workload_name_still_quotes_the_scheduler():
    said = "0/4 nodes are available: 4 cannot allocate all claims"
    rsp = call(
        xr(standalone("prefill"), standalone("decode")),
        observation(report(2, 1, state="False", reason="Unschedulable", message=said)),
    )
    assert pods_scheduled(rsp) == ("False", "Unschedulable", said)


def test_unschedulable_message_holds_while_the_state_holds():
    held = "engine serve: 0/4 nodes are available"
    previous = {
        "conditions": [
            {"type": "PodsScheduled", "status": "False", "reason": "Unschedulable", "message": held}
        ]
    }
    now_said = "0/5 nodes are available"
    rsp = call(
        xr(status=previous),
        observation(report(1, 0, state="False", reason="Unschedulable", message=now_said)),
    )
    assert pods_scheduled(rsp) == ("False", "Unschedulable", held)
    assert ("Warning", f"pods are unschedulable: engine serve: {now_said}") in events(rsp)


def test_an_unschedulable_message_of_any_length_is_relayed_capped_and_holds_across_passes():
    said = "0/4 nodes are available: " + "x" * 300_000
    scheduler_says = observation(report(1, 0, state="False", reason="Unschedulable", message=said))
    first = pods_scheduled(call(xr(), scheduler_says))
    assert first[:2] == ("False", "Unschedulable")
    assert first[2] == f"engine serve: {said}"[:MAX_MESSAGE]
    held = {
        "conditions": [
            {"type": "PodsScheduled", "status": first[0], "reason": first[1], "message": first[2]}
        ]
    }
    rsp = call(xr(status=held), scheduler_says)
    assert pods_scheduled(rsp) == first
    assert max(len(message) for _, message in events(rsp)) <= MAX_MESSAGE


@pytest.mark.parametrize(
    ("status_a", "status_b"),
    [
        (
            report(1, 0, state="False", reason="Pending"),
            report(5, 2, state="False", reason="Pending"),
        ),
        (report(1, 1, since=EARLIER), report(9, 9, since=FRESH)),
        (report(0, 0, observed_at=STALE), report(0, 0, observed_at="2026-11-29T11:30:00Z")),
    ],
    ids=["pending", "scheduled", "stale"],
)
def test_messages_of_a_holding_state_carry_no_counts_or_times(status_a, status_b):
    a = call(xr(standalone(copies=1)), observation(status_a))
    b = call(xr(standalone(copies=1)), observation(status_b))
    assert pods_scheduled(a) == pods_scheduled(b)


# --- What is composed -----------------------------------------------------------------------


def manifest(rsp, name):
    return desired(rsp)[name]["spec"]["forProvider"]["manifest"]


def test_requires_the_inference_cluster_by_name():
    rsp = call(xr(cluster="gpu-west"), fetched=False)
    selector = rsp.requirements.resources["cluster"]
    assert (selector.api_version, selector.kind, selector.match_name) == (
        "modelplane.ai/v1alpha1",
        "InferenceCluster",
        "gpu-west",
    )


def test_standalone_engine_is_a_deployment_of_its_copies_pinned_to_its_pool():
    rsp = call(xr(standalone(copies=3, pool="l40s")))
    deployment = manifest(rsp, "east/serve/workload")
    assert deployment["apiVersion"] == "apps/v1"
    assert deployment["kind"] == "Deployment"
    assert deployment["metadata"]["namespace"] == "team-a"
    assert deployment["spec"]["replicas"] == 3
    selector = {
        labels.REPLICA: "r0",
        labels.REPLICA_NAMESPACE: "team-a",
        labels.ENGINE: "serve",
    }
    assert deployment["spec"]["selector"] == {"matchLabels": selector}
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["labels"] == {**selector, labels.ROLE: "Standalone"}
    assert pod["spec"]["nodeSelector"] == {labels.POOL: "l40s"}
    assert pod["spec"]["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    ]
    # Independent copies may share a node.
    assert "affinity" not in pod["spec"]


def test_claiming_member_gets_a_resource_claim_template_its_pods_reference():
    request_ = {
        "name": "gpu",
        "deviceClassName": "gpu.nvidia.com",
        "count": 2,
        "selectors": [
            {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].arch == "Hopper"'}},
            {
                "cel": {
                    "expression": "device.capacity['gpu.nvidia.com'].memory"
                    ".isGreaterThan(quantity('40Gi'))"
                }
            },
        ],
    }
    nic = {"name": "nic", "deviceClassName": "rdma.mellanox.com", "count": 1}
    rsp = call(xr(standalone(requests=[request_, nic])))
    template = manifest(rsp, "east/serve/claims-standalone")
    assert template["apiVersion"] == "resource.k8s.io/v1"
    assert template["kind"] == "ResourceClaimTemplate"
    assert template["metadata"]["namespace"] == "team-a"
    assert template["spec"]["spec"] == {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": "gpu.nvidia.com",
                        "allocationMode": "ExactCount",
                        "count": 2,
                        "selectors": [
                            {
                                "cel": {
                                    "expression": 'device.attributes["gpu.nvidia.com"].arch'
                                    ' == "Hopper"'
                                }
                            },
                            {
                                "cel": {
                                    "expression": "device.capacity['gpu.nvidia.com'].memory"
                                    ".isGreaterThan(quantity('40Gi'))"
                                }
                            },
                        ],
                    },
                },
                {
                    "name": "nic",
                    "exactly": {
                        "deviceClassName": "rdma.mellanox.com",
                        "allocationMode": "ExactCount",
                        "count": 1,
                    },
                },
            ]
        }
    }
    pod = manifest(rsp, "east/serve/workload")["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [
        {"name": "modelplane-devices", "resourceClaimTemplateName": template["metadata"]["name"]}
    ]
    assert pod["containers"][0]["resources"]["claims"] == [{"name": "modelplane-devices"}]


def test_claimless_member_gets_no_claim_template_and_no_claims():
    rsp = call(xr(standalone(requests=())))
    assert sorted(desired(rsp)) == ["east/observation", "east/serve/workload"]
    pod = manifest(rsp, "east/serve/workload")["spec"]["template"]["spec"]
    assert "resourceClaims" not in pod
    assert "resources" not in pod["containers"][0]


def test_gang_is_a_leader_worker_set_whose_copy_pods_take_distinct_nodes():
    rsp = call(xr(gang(copies=2, nodes=3, pool="h100")))
    lws = manifest(rsp, "east/serve/workload")
    assert (lws["apiVersion"], lws["kind"]) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    assert lws["spec"]["replicas"] == 2
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 4
    term = {
        "labelSelector": {
            "matchLabels": {
                labels.REPLICA: "r0",
                labels.REPLICA_NAMESPACE: "team-a",
                labels.ENGINE: "serve",
            }
        },
        "matchLabelKeys": ["leaderworkerset.sigs.k8s.io/group-key"],
        "topologyKey": "kubernetes.io/hostname",
    }
    for role, pod in (
        ("Leader", template["leaderTemplate"]),
        ("Worker", template["workerTemplate"]),
    ):
        assert pod["metadata"]["labels"][labels.ROLE] == role
        assert pod["spec"]["nodeSelector"] == {labels.POOL: "h100"}
        assert pod["spec"]["affinity"]["podAntiAffinity"] == {
            "requiredDuringSchedulingIgnoredDuringExecution": [term]
        }
    assert {"east/serve/claims-leader", "east/serve/claims-worker"} <= set(desired(rsp))


def test_template_affinity_node_selector_and_labels_are_kept_beside_ours():
    template = {
        "metadata": {"labels": {"app": "vllm", labels.REPLICA: "spoofed"}},
        "spec": {
            "containers": [{"name": "vllm", "image": "vllm"}],
            "nodeSelector": {"zone": "a", labels.POOL: "wrong"},
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "x"}}}
                    ]
                }
            },
        },
    }
    engine = gang()
    engine["members"][0]["template"] = template
    pod = manifest(call(xr(engine)), "east/serve/workload")["spec"]["leaderWorkerTemplate"][
        "leaderTemplate"
    ]
    assert pod["metadata"]["labels"]["app"] == "vllm"
    assert pod["metadata"]["labels"][labels.REPLICA] == "r0"
    assert pod["spec"]["nodeSelector"] == {"zone": "a", labels.POOL: "h100"}
    terms = pod["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert [t["topologyKey"] for t in terms] == ["zone", "kubernetes.io/hostname"]


def test_bare_pod_spec_template_is_accepted():
    engine = standalone()
    engine["members"][0]["template"] = {"containers": [{"name": "vllm", "image": "vllm"}]}
    pod = manifest(call(xr(engine)), "east/serve/workload")["spec"]["template"]
    assert pod["spec"]["containers"][0]["name"] == "vllm"


def test_same_name_in_two_namespaces_never_selects_the_others_pods():
    a = manifest(call(xr(namespace="team-a")), "east/observation")
    b = manifest(call(xr(namespace="team-b")), "east/observation")
    assert a["metadata"]["namespace"] == "team-a"
    assert b["metadata"]["namespace"] == "team-b"
    assert a["spec"]["selector"]["matchLabels"] != b["spec"]["selector"]["matchLabels"]
    pod_a = manifest(call(xr(namespace="team-a")), "east/serve/workload")["spec"]["template"]
    assert a["spec"]["selector"]["matchLabels"].items() <= pod_a["metadata"]["labels"].items()


def test_objects_target_the_clusters_provider_config_in_the_replicas_namespace():
    for name, obj in desired(call(xr(gang()))).items():
        assert obj["apiVersion"] == "kubernetes.m.crossplane.io/v1alpha1", name
        assert obj["kind"] == "Object", name
        assert obj["metadata"]["namespace"] == "team-a", name
        assert "-east-" in obj["metadata"]["name"], name
        assert obj["spec"]["providerConfigRef"] == {"kind": "ClusterProviderConfig", "name": "east"}
        manifest = obj["spec"]["forProvider"]["manifest"]
        assert manifest["metadata"]["namespace"] == "team-a", name


@pytest.mark.parametrize(
    ("engine", "query_checks"),
    [
        (standalone(), "object.status.availableReplicas >= object.spec.replicas"),
        (gang(), "object.status.readyReplicas >= object.spec.replicas"),
    ],
    ids=["Deployment", "LeaderWorkerSet"],
)
def test_workload_object_is_ready_only_when_its_workload_is_available(engine, query_checks):
    readiness = desired(call(xr(engine)))["east/serve/workload"]["spec"]["readiness"]
    assert readiness["policy"] == "DeriveFromCelQuery"
    assert "c.type == 'Available' && c.status == 'True'" in readiness["celQuery"]
    assert query_checks in readiness["celQuery"]


def test_long_names_fit_kubernetes_limits_and_stay_distinct():
    long_name = "a" * 120
    rsp = call(xr(standalone("e" * 40), name=long_name))
    workload = manifest(rsp, f"east/{'e' * 40}/workload")
    assert len(workload["metadata"]["name"]) <= 40
    assert len(workload["spec"]["template"]["metadata"]["labels"][labels.REPLICA]) <= 63
    other = manifest(call(xr(standalone("e" * 40), name="a" * 121)), f"east/{'e' * 40}/workload")
    assert other["metadata"]["name"] != workload["metadata"]["name"]


def test_agent_present_composes_the_observation_none_without_agent_or_in_declared_mode():
    assert "east/observation" in desired(call(xr()))
    assert "east/observation" not in desired(
        call(xr(), required={"cluster": [cluster(agent=False)]})
    )
    assert "east/observation" not in desired(
        call(xr(), required={"cluster": [cluster(mode="Declared")]})
    )


def test_an_existing_observation_survives_the_agent_momentarily_unreported():
    rsp = call(xr(), observation(report(1, 1)), {"cluster": [cluster(agent=False)]})
    assert "east/observation" in desired(rsp)
    assert pods_scheduled(rsp)[:2] == ("True", "AllPodsScheduled")


# --- Readiness ------------------------------------------------------------------------------


def test_desired_ready_follows_the_observed_objects_ready_condition():
    observed = {
        "east/serve/workload": remote_object("Deployment", {}, ready=True),
        "east/serve/claims-standalone": remote_object("ResourceClaimTemplate", ready=False),
    }
    rsp = call(xr(), observed)
    assert rsp.desired.resources["east/serve/workload"].ready == 1  # READY_TRUE
    assert rsp.desired.resources["east/serve/claims-standalone"].ready == 0  # unspecified


@pytest.mark.parametrize(
    ("observed", "expected"),
    [
        pytest.param(
            {},
            ("False", "WorkloadsNotReady", "engine serve: the workload is not created yet"),
            id="nothing created yet",
        ),
        pytest.param(
            {
                "east/serve/workload": remote_object(
                    "Deployment",
                    {
                        "conditions": [
                            {
                                "type": "Available",
                                "status": "False",
                                "message": "Deployment does not have minimum availability.",
                            }
                        ]
                    },
                )
            },
            (
                "False",
                "WorkloadsNotReady",
                "engine serve: the Deployment is not Available: "
                "Deployment does not have minimum availability.",
            ),
            id="remote workload not Available quotes its condition",
        ),
        pytest.param(
            {"east/serve/workload": remote_object("Deployment", {"replicas": 1})},
            (
                "False",
                "WorkloadsNotReady",
                "engine serve: waiting for every pod of the Deployment to be available",
            ),
            id="remote workload without an Available verdict is waited for",
        ),
        pytest.param(
            {
                "east/serve/workload": remote_object(
                    "Deployment",
                    synced=False,
                    synced_message='cannot create object: namespaces "team-a" not found',
                )
            },
            (
                "False",
                "WorkloadsNotSynced",
                "engine serve: cannot apply to the cluster: "
                'cannot create object: namespaces "team-a" not found (namespace team-a is '
                "composed on the cluster by the replica's ModelDeployment, once it places a "
                "replica there)",
            ),
            id="missing remote namespace is WorkloadsNotSynced quoting the provider and "
            "naming who composes it",
        ),
        pytest.param(
            {"east/serve/workload": remote_object("Deployment", {}, ready=True)},
            ("True", "AllWorkloadsReady", "every engine's workload is available"),
            id="available workload is ready",
        ),
    ],
)
def test_workloads_ready(observed, expected):
    assert conditions(call(xr(standalone(requests=())), observed))["WorkloadsReady"] == expected


HUGE = "x" * 300_000


@pytest.mark.parametrize(
    "workload",
    [
        pytest.param(
            remote_object("Deployment", synced=False, synced_message=HUGE),
            id="the provider's Synced message",
        ),
        pytest.param(
            remote_object(
                "Deployment",
                {"conditions": [{"type": "Available", "status": "False", "message": HUGE}]},
            ),
            id="the workload's Available message",
        ),
    ],
)
def test_a_workload_clusters_message_of_any_length_reaches_the_replica_capped(workload):
    rsp = call(xr(standalone(requests=())), {"east/serve/workload": workload})
    (engine,) = desired_status(rsp)["engines"]
    assert len(engine["message"]) == MAX_MESSAGE
    assert len(conditions(rsp)["WorkloadsReady"][2]) <= MAX_MESSAGE


AVAILABLE = {"east/serve/workload": remote_object("Deployment", {}, ready=True)}


@pytest.mark.parametrize(
    ("replica", "observed", "required", "ready"),
    [
        pytest.param(xr(), AVAILABLE, {"cluster": [cluster()]}, True, id="available is Ready"),
        pytest.param(xr(), {}, {"cluster": [cluster()]}, False, id="nothing created yet"),
        pytest.param(
            xr(standalone("prefill"), standalone("decode")),
            {"east/prefill/workload": remote_object("Deployment", {}, ready=True)},
            {"cluster": [cluster()]},
            False,
            id="one engine of two available is not Ready",
        ),
        pytest.param(
            xr(), {}, None, False, id="first call, nothing composed: not Ready (never vacuous)"
        ),
        pytest.param(
            xr(), AVAILABLE, None, True, id="cluster not fetched: a serving replica stays Ready"
        ),
        pytest.param(
            xr(), AVAILABLE, {"cluster": []}, True, id="cluster gone: a serving replica stays Ready"
        ),
        pytest.param(
            {**xr(), "spec": {"clusterName": "east", "engines": []}},
            AVAILABLE,
            {"cluster": [cluster()]},
            False,
            id="a spec naming no engine is not Ready",
        ),
    ],
)
def test_the_replica_is_ready_exactly_when_its_workloads_ready_is_true(
    replica, observed, required, ready
):
    rsp = run(FunctionRunner(clock=lambda: NOW), request(replica, observed, required))
    assert rsp.desired.composite.ready == (READY_TRUE if ready else READY_FALSE)
    assert conditions(rsp)["WorkloadsReady"][0] == ("True" if ready else "False")


def test_engines_status_names_each_engine():
    observed = {"east/prefill/workload": remote_object("Deployment", {}, ready=True)}
    rsp = call(xr(standalone("prefill"), standalone("decode")), observed)
    assert desired_status(rsp)["engines"] == [
        {"name": "prefill", "ready": True, "message": "available"},
        {"name": "decode", "ready": False, "message": "the workload is not created yet"},
    ]


# --- Bad input never drops running work ------------------------------------------------------

RUNNING = {
    "east/serve/workload": remote_object(
        "Deployment",
        {},
        ready=True,
        spec={
            "providerConfigRef": {"kind": "ClusterProviderConfig", "name": "east"},
            "forProvider": {"manifest": {"apiVersion": "apps/v1", "kind": "Deployment"}},
        },
    ),
    "east/serve/claims-standalone": remote_object("ResourceClaimTemplate", ready=True),
    "east/observation": remote_object("ReplicaObservation", report(1, 1), ready=True),
}


@pytest.mark.parametrize(
    ("replica", "required", "reason", "warned"),
    [
        pytest.param(xr(), None, "ClusterNotResolved", False, id="cluster not fetched yet"),
        pytest.param(xr(), {"cluster": []}, "ClusterNotFound", True, id="cluster absent"),
        pytest.param(
            xr(), {"cluster": [cluster(pc=None)]}, "ClusterNotReady", True, id="no provider config"
        ),
        pytest.param(
            xr(),
            {"cluster": [cluster(pools=("l40s",))]},
            "PoolNotFound",
            True,
            id="the pinned pool left the cluster spec",
        ),
        pytest.param(
            xr({"name": "serve", "members": [{"role": "Worker", "nodePoolName": "h100"}]}),
            {"cluster": [cluster()]},
            "InvalidSpec",
            True,
            id="Worker without Leader or worker.nodes",
        ),
        pytest.param(
            xr(gang(nodes=None)),
            {"cluster": [cluster()]},
            "InvalidSpec",
            True,
            id="Leader and Worker without worker.nodes",
        ),
        pytest.param(
            xr(
                {
                    "name": "serve",
                    "members": [{**standalone()["members"][0], "worker": {"nodes": 2}}],
                }
            ),
            {"cluster": [cluster()]},
            "InvalidSpec",
            True,
            id="worker set on a Standalone member",
        ),
        pytest.param(
            xr({**standalone(), "copies": 0}),
            {"cluster": [cluster()]},
            "InvalidSpec",
            True,
            id="zero copies",
        ),
        pytest.param(
            xr({**standalone(), "members": standalone()["members"] * 2}),
            {"cluster": [cluster()]},
            "InvalidSpec",
            True,
            id="two Standalone members",
        ),
        pytest.param(
            xr(standalone(requests=[{"name": "gpu", "count": 1}])),
            {"cluster": [cluster()]},
            "InvalidSpec",
            True,
            id="device request without a device class",
        ),
        pytest.param(
            xr(
                standalone(
                    requests=[
                        {
                            "name": "gpu",
                            "deviceClassName": "gpu.nvidia.com",
                            "count": 1,
                            "selectors": [{"cel": "device.driver == 'gpu.nvidia.com'"}],
                        }
                    ]
                )
            ),
            {"cluster": [cluster()]},
            "InvalidSpec",
            True,
            id="a selector's cel given as a plain string, not DRA's {expression}",
        ),
        pytest.param(
            {**xr(), "spec": {**xr()["spec"], "tolerations": "all"}},
            {"cluster": [cluster()]},
            "InvalidSpec",
            True,
            id="tolerations not a list",
        ),
        pytest.param(
            xr(namespace="kube-system"),
            {"cluster": [cluster()]},
            "NamespaceReserved",
            True,
            id="a namespace reserved on every cluster",
        ),
        pytest.param(
            xr(namespace="gpu-operator"),
            {"cluster": [tenancy_cluster(reserved=("gpu-operator",))]},
            "NamespaceReserved",
            True,
            id="a namespace the cluster reserves",
        ),
        pytest.param(
            xr(with_priority(standalone(), "system-node-critical")),
            {"cluster": [tenancy_cluster(priority_classes=("inference-high",))]},
            "PriorityClassNotApproved",
            True,
            id="a priority class the cluster does not approve (since removed from its list)",
        ),
    ],
)
def test_bad_input_keeps_running_workloads_unchanged_and_says_why(
    replica, required, reason, warned
):
    rsp = run(
        FunctionRunner(clock=lambda: NOW),
        request(replica, RUNNING, required),
    )
    got = desired(rsp)
    for name, body in RUNNING.items():
        assert name in got, name
        if name.startswith("east/serve/"):
            # Unchanged: server-set fields stripped, spec as it was.
            assert got[name] == unchanged({k: v for k, v in body.items() if k != "status"})
    status, got_reason, message = conditions(rsp)["WorkloadsComposed"]
    assert (status, got_reason) == ("False", reason)
    assert message.endswith("composed resources are kept unchanged until this is fixed")
    warnings = [m for severity, m in events(rsp) if severity == "Warning"]
    assert bool(warnings) == warned


def test_pool_gone_for_one_engine_still_composes_the_others():
    observed = {"east/prefill/workload": remote_object("Deployment", {}, ready=True)}
    replica = xr(standalone("prefill", pool="h100"), standalone("decode", pool="l40s"))
    rsp = call(replica, observed, {"cluster": [cluster(pools=("l40s",))]})
    got = desired(rsp)
    assert got["east/prefill/workload"] == unchanged(
        {k: v for k, v in observed["east/prefill/workload"].items() if k != "status"}
    )
    assert manifest(rsp, "east/decode/workload")["kind"] == "Deployment"
    assert conditions(rsp)["WorkloadsComposed"][2].startswith(
        "engine prefill: pool h100 is not in InferenceCluster east's spec"
    )
    assert desired_status(rsp)["engines"][0] == {
        "name": "prefill",
        "ready": False,
        "message": "pool h100 is not in InferenceCluster east's spec",
    }


def test_missing_cluster_still_relays_the_agents_report():
    rsp = call(xr(), RUNNING, {"cluster": []})
    assert pods_scheduled(rsp)[:2] == ("True", "AllPodsScheduled")


def test_missing_cluster_without_a_report_says_so_in_pods_scheduled():
    rsp = call(xr(), {}, {"cluster": []})
    assert pods_scheduled(rsp) == ("Unknown", "NotObserved", "InferenceCluster east does not exist")


def test_unreadable_max_age_falls_back_to_five_minutes_and_warns():
    rsp = call(xr(), observation(report(1, 1)), {"cluster": [cluster(max_age="soon")]})
    assert pods_scheduled(rsp)[:2] == ("True", "AllPodsScheduled")
    assert any("maxAge" in m for severity, m in events(rsp) if severity == "Warning")


# --- A clean pass removes what the spec no longer asks for -----------------------------------


def test_engine_removed_from_the_spec_is_removed():
    observed = {
        "east/old/workload": remote_object("Deployment", {}, ready=True),
        "east/old/claims-standalone": remote_object("ResourceClaimTemplate", ready=True),
    }
    got = desired(call(xr(), observed))
    assert not any(name.startswith("east/old/") for name in got)
    assert "east/serve/workload" in got


def test_moved_replica_replaces_its_objects_on_the_new_cluster():
    west = cluster()
    west["metadata"]["name"] = "west"
    west["status"]["providerConfigRef"]["name"] = "west"
    rsp = call(xr(cluster="west"), RUNNING, {"cluster": [west]})
    got = desired(rsp)
    assert not any(name.startswith("east/") for name in got)
    workload = got["west/serve/workload"]
    assert "-west-" in workload["metadata"]["name"]
    assert workload["spec"]["providerConfigRef"]["name"] == "west"


def test_moved_replica_keeps_the_old_objects_while_the_new_cluster_is_unresolved():
    got = desired(call(xr(cluster="west"), RUNNING, {"cluster": []}))
    assert set(got) == set(RUNNING)


def test_declared_mode_removes_the_observation():
    got = desired(call(xr(), RUNNING, {"cluster": [cluster(mode="Declared")]}))
    assert "east/observation" not in got
    assert "east/serve/workload" in got


# --- Unknown and malformed input keeps everything and names the field --------------------------


def test_an_unknown_observation_mode_keeps_the_observation_and_names_the_value():
    rsp = call(xr(), RUNNING, {"cluster": [cluster(mode="Sometimes")]})
    assert set(desired(rsp)) == set(RUNNING)
    status, reason, message = conditions(rsp)["WorkloadsComposed"]
    assert (status, reason) == ("False", "ClusterInvalid")
    assert (
        "InferenceCluster east is invalid: spec.observation.mode: Input should be 'Observed' "
        "or 'Declared' (got \"Sometimes\")" in message
    )


def test_a_cluster_whose_status_is_not_an_object_keeps_everything():
    broken = cluster()
    broken["status"] = "ready"
    rsp = call(xr(), RUNNING, {"cluster": [broken]})
    assert set(desired(rsp)) == set(RUNNING)
    assert conditions(rsp)["WorkloadsComposed"][:2] == ("False", "ClusterNotReady")


def test_a_malformed_template_is_an_invalid_engine_not_a_crash():
    engine = copy.deepcopy(standalone())
    engine["members"][0]["template"]["spec"]["containers"] = ["vllm"]
    rsp = call(xr(engine), RUNNING)
    # Every Object kept as it is; no Namespace: the deployment composes it.
    assert set(desired(rsp)) == set(RUNNING)
    message = conditions(rsp)["WorkloadsComposed"][2]
    assert (
        'members[0] (Standalone).template.spec.containers[0]: must be an object (got "vllm")'
        in (message)
    )


def test_lower_case_rfc3339_times_in_conditions_are_read():
    observed = {
        **copy.deepcopy(RUNNING),
        "east/observation": remote_object(
            "ReplicaObservation", report(1, 1, since=EARLIER.lower()), ready=True
        ),
    }
    observed["east/serve/workload"]["status"]["conditions"][0]["lastTransitionTime"] = (
        "2026-01-01t09:00:00z"
    )
    rsp = call(xr(), observed)
    assert pods_scheduled(rsp)[:2] == ("True", "AllPodsScheduled")


def test_a_composite_without_a_name_is_fatal():
    body = xr()
    del body["metadata"]["name"]
    rsp = call(body, RUNNING)
    assert events(rsp) == [
        ("Fatal", "cannot read the composite: metadata.name: must be a non-empty string (got null)")
    ]


def test_an_unknown_member_role_is_never_guessed_and_keeps_everything():
    engine = copy.deepcopy(standalone())
    engine["members"][0]["role"] = "Solo"
    rsp = call(xr(engine), RUNNING)
    # Every Object kept as it is; no Namespace: the deployment composes it.
    assert set(desired(rsp)) == set(RUNNING)
    message = conditions(rsp)["WorkloadsComposed"][2]
    assert (
        "members[0].role: Input should be 'Standalone', 'Leader' or 'Worker' (got \"Solo\")"
        in message
    )


def test_each_request_logs_its_decision_and_timings_at_debug_bound_to_tag_and_xr():
    req = request(xr(standalone()), {}, {"cluster": [cluster()]})
    req.meta.tag = "abc"
    with structlog.testing.capture_logs() as captured:
        run(FunctionRunner(clock=lambda: NOW), req)
    (decided,) = [line for line in captured if line["event"] == "decided"]
    assert decided["log_level"] == "debug"
    assert (decided["tag"], decided["xr_kind"], decided["xr_namespace"], decided["xr_name"]) == (
        "abc",
        "ModelReplica",
        "team-a",
        "r0",
    )
    assert "PodsScheduled" in decided["conditions"]
    assert {"read_ms", "decide_ms", "write_ms"} <= set(decided)


# --- admission (design/admission.md) -------------------------------------------------------


def full_cluster():
    """east/h100 publishes a histogram with no free node: nothing new fits."""
    body = cluster()
    body["status"]["gpuPools"] = [
        {
            "name": "h100",
            "nodes": 8,
            "devices": body["spec"]["nodePools"][0]["devices"],
            "observedAt": FRESH,
            "observedNodes": 8,
            "nodesByFreeDevices": [{"free": {"gpu": 0}, "nodes": 8}],
            "current": True,
        }
    ]
    body["status"]["agent"]["vouchedUntil"] = VOUCHED
    return body


def observed_cluster(observed_at=FRESH, free=8):
    """east with one pool, h100, published by the agent at `observed_at`: 8 nodes, `free`
    GPUs free on each; current while `observed_at` is within maxAge (compose-inference-
    cluster's verdict at NOW, with its lease)."""
    body = cluster(pools=("h100",))
    body["status"]["gpuPools"] = [
        {
            "name": "h100",
            "nodes": 8,
            "devices": body["spec"]["nodePools"][0]["devices"],
            "observedAt": observed_at,
            "observedNodes": 8,
            "nodesByFreeDevices": [{"free": {"gpu": free}, "nodes": 8}],
            "current": currency.is_current(parse_time(observed_at), NOW, timedelta(minutes=5)),
        }
    ]
    body["status"]["agent"]["vouchedUntil"] = VOUCHED
    return body


PENDING_ONLY = {labels.CLUSTER: "east", labels.CHARGE: labels.CHARGE_PENDING}
EVERY_REPLICA = {labels.CLUSTER: "east"}


def replica_requirements(rsp) -> dict[str, dict]:
    """The ModelReplica requirements of the cluster, by name: their match labels."""
    return {
        name: dict(selector.match_labels.labels)
        for name, selector in rsp.requirements.resources.items()
        if name.startswith("cluster-") and selector.kind == "ModelReplica"
    }


@pytest.mark.parametrize(
    ("replica", "required", "expected"),
    [
        pytest.param(
            xr(),
            None,
            {"cluster-pending-replicas": PENDING_ONLY},
            id="an undecided replica asks first for its cluster's pending replicas only",
        ),
        pytest.param(
            xr(),
            {"cluster": [observed_cluster()]},
            {"cluster-pending-replicas": PENDING_ONLY},
            id="on a cluster whose every pool is freshly observed it keeps to the pending ones",
        ),
        pytest.param(
            xr(),
            {"cluster": [observed_cluster(observed_at=STALE)]},
            {"cluster-replicas": EVERY_REPLICA},
            id="on a cluster whose observation is older than maxAge it asks for every replica",
        ),
        pytest.param(
            xr(),
            {"cluster": [cluster()]},
            {"cluster-replicas": EVERY_REPLICA},
            id="on a cluster with a pool counted by its fallback it asks for every replica",
        ),
        pytest.param(
            xr(),
            {"cluster": [cluster(mode="Declared")]},
            {"cluster-replicas": EVERY_REPLICA},
            id="on a Declared cluster it asks for every replica",
        ),
        pytest.param(
            xr(status={"admission": {"placedAt": EARLIER, "verdict": "Admitted"}}),
            {"cluster": [observed_cluster()]},
            {},
            id="a replica whose verdict is recorded asks for no replica of its cluster",
        ),
    ],
)
def test_admission_asks_for_the_replicas_it_must_charge(replica, required, expected):
    runner = FunctionRunner(clock=lambda: NOW)
    rsp = run(runner, request(replica, {}, required))
    assert replica_requirements(rsp) == expected


@pytest.mark.parametrize(
    ("required", "expected"),
    [
        pytest.param(
            {"cluster": [observed_cluster()], "cluster-pending-replicas": []},
            ("True", "Admitted"),
            id="the pending replicas of a freshly observed cluster are enough to judge",
        ),
        pytest.param(
            {"cluster": [observed_cluster(free=0)], "cluster-pending-replicas": []},
            ("False", "Overcommitted"),
            id="judged on the pending replicas, a full pool still overcommits it",
        ),
        pytest.param(
            {"cluster": [cluster()], "cluster-pending-replicas": []},
            ("False", "WaitingForAdmission"),
            id="the pending replicas alone are not judged on a cluster counted by its fallback",
        ),
        pytest.param(
            {"cluster": [observed_cluster(observed_at=STALE)], "cluster-pending-replicas": []},
            ("False", "WaitingForAdmission"),
            id="the pending replicas alone are not judged once the observation is stale",
        ),
    ],
)
def test_admission_judges_only_on_the_set_its_cluster_allows(required, expected):
    runner = FunctionRunner(clock=lambda: NOW)
    rsp = run(runner, request(xr(), {}, {**required, "resource-quotas": []}))
    assert conditions(rsp)["Admitted"][:2] == expected


def test_an_overcommitted_replica_composes_nothing_and_says_where_it_falls_short():
    rsp = call(xr(), required={"cluster": [full_cluster()]})
    assert conditions(rsp)["Admitted"][:2] == ("False", "Overcommitted")
    assert "pool h100" in conditions(rsp)["Admitted"][2]
    assert conditions(rsp)["WorkloadsComposed"][:2] == ("False", "Overcommitted")
    assert not [name for name in desired(rsp) if name.startswith("east/serve/")]
    assert desired_status(rsp)["admission"]["verdict"] == "Overcommitted"
    assert desired_status(rsp)["admission"]["placedAt"] == EARLIER
    assert [e for e in events(rsp) if "does not fit pool h100" in e[1]]


def test_a_running_replica_is_admitted_whatever_the_queue_says():
    rsp = call(xr(), RUNNING, {"cluster": [full_cluster()]})
    assert conditions(rsp)["Admitted"][:2] == ("True", "Admitted")
    assert "east/serve/workload" in desired(rsp)


def test_a_record_from_before_shapes_were_recorded_stays_admitted_and_records_its_shape():
    record = {"placedAt": EARLIER, "verdict": "Admitted", "decidedAt": EARLIER}
    rsp = call(xr(status={"admission": record}), required={"cluster": [full_cluster()]})
    assert conditions(rsp)["Admitted"][:2] == ("True", "Admitted")
    assert desired_status(rsp)["admission"] == {**record, "charged": a.charged(standalone())}
    assert "east/serve/workload" in desired(rsp)


def assert_not_judged(rsp, expected: str) -> None:
    """The replica waits, not judged, naming `expected` in its condition and a Warning
    event, and composes no workload."""
    assert conditions(rsp)["Admitted"] == (
        "False",
        "WaitingForAdmission",
        f"not judged: {expected}",
    )
    assert ("Warning", expected) in events(rsp)
    assert not [name for name in desired(rsp) if name.startswith("east/serve/")]


def test_a_malformed_placement_time_waits_and_names_the_field_and_value():
    replica = xr()
    replica["metadata"]["annotations"][labels.PLACED_AT] = "yesterday"
    rsp = call(replica)
    expected = (
        'metadata.annotations["modelplane.ai/placed-at"]: '
        'must be an RFC 3339 time (got "yesterday")'
    )
    assert_not_judged(rsp, expected)


@pytest.mark.parametrize(
    ("replica", "body", "expected", "namespace_composed"),
    [
        pytest.param(
            xr(namespace="modelplane-system"),
            cluster(),
            "metadata.namespace: is reserved on every workload cluster (default, "
            "modelplane-system and kube-*): a tenant's pods may not run in a system namespace "
            '(got "modelplane-system")',
            False,
            id="the agent's namespace is refused, naming it, and not composed",
        ),
        pytest.param(
            xr(namespace="lws-system"),
            tenancy_cluster(reserved=("lws-system", "gpu-operator")),
            "metadata.namespace: is reserved on this workload cluster "
            '(spec.tenancy.reservedNamespaces) (got "lws-system")',
            False,
            id="a namespace on the cluster's reserved list is refused, naming it, and not composed",
        ),
        pytest.param(
            xr(with_priority(standalone(), "system-node-critical")),
            cluster(),
            "engine serve: members[0] (Standalone).template.spec.priorityClassName: is not "
            "approved on this cluster (spec.tenancy.priorityClassNames: none) "
            '(got "system-node-critical")',
            True,
            id="a priority class on a cluster that approves none is refused, naming it",
        ),
    ],
)
def test_a_replica_its_cluster_refuses_is_not_admitted_and_composes_no_workload(
    replica, body, expected, namespace_composed
):
    rsp = call(replica, required={"cluster": [body]})
    assert_not_judged(rsp, expected)
    # Whether the cluster accepts the namespace or not, its ModelDeployment composes it
    # (namespace_composed: it does there), never the replica.
    assert "east/namespace" not in desired(rsp)
    assert "admission" not in desired_status(rsp)


def test_a_reserved_namespace_is_never_relabelled_on_the_workload_cluster():
    rsp = call(xr(namespace="kube-system"))
    assert not [n for n in desired(rsp) if n.startswith("east/")]
    assert conditions(rsp)["WorkloadsComposed"][:2] == ("False", "NamespaceReserved")


def test_an_approved_priority_class_reaches_the_pods():
    replica = xr(with_priority(standalone(), "inference-high"))
    rsp = call(
        replica, required={"cluster": [tenancy_cluster(priority_classes=("inference-high",))]}
    )
    pod = manifest(rsp, "east/serve/workload")["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "inference-high"
    assert conditions(rsp)["Admitted"][:2] == ("True", "Admitted")


def test_a_replica_in_its_commit_delay_waits_and_asks_to_be_called_back():
    replica = xr()
    replica["metadata"]["annotations"][labels.PLACED_AT] = "2026-11-29T11:59:57Z"
    rsp = call(replica)
    assert conditions(rsp)["Admitted"][:2] == ("False", "WaitingForAdmission")
    assert rsp.meta.ttl.ToTimedelta().total_seconds() == 7
    assert "admission" not in desired_status(rsp)


# --- When to be called again ----------------------------------------------------------------

SERVING = {**AVAILABLE, **observation(report(1, 1))}


# SERVING's report (observedAt FRESH, 11:59:30) turns stale at 12:04:31: 271 s from NOW.
REPORT_TURNS_STALE = 271

REPLICA_TTLS = {
    "admitted, nothing available yet: events drive it, 60s backs them up": ({}, None, 60),
    "available but its pods not yet reported: 60s": (AVAILABLE, None, 60),
    "available with a pod unscheduled: 60s": (
        {**AVAILABLE, **observation(report(1, 0, state="False", reason="Pending"))}, None, 60
    ),
    "Ready with every pod scheduled: when its report turns stale": (
        SERVING, None, REPORT_TURNS_STALE
    ),
    "Ready, its cluster vouching for the report until later: the 5m cap": (
        SERVING, True, 300
    ),
    "Ready, its cluster judging the agent's word stale: when its own report turns stale": (
        SERVING, False, REPORT_TURNS_STALE
    ),
    "Ready on a stale report its cluster vouches for: the 5m cap, its word is good for 20m": (
        {**AVAILABLE, **observation(report(1, 1, observed_at=STALE))}, True, 300
    ),
    "Ready, its report stale: 60s polls the cluster for the agent's word": (
        {**AVAILABLE, **observation(report(1, 1, observed_at=STALE))}, None, 60
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("observed", "replicas_current", "seconds"),
    REPLICA_TTLS.values(),
    ids=REPLICA_TTLS.keys(),
)
def test_a_replica_is_called_again_on_events_backed_by_60s_or_at_its_next_deadline(
    observed, replicas_current, seconds
):
    rsp = call(xr(), observed, {"cluster": [vouched_by(replicas_current)]})
    assert rsp.meta.ttl.ToTimedelta().total_seconds() == seconds


@pytest.mark.parametrize(
    ("opened", "converging"),
    [pytest.param(*case[:2], id=case[2]) for case in wire.OPEN_CIRCUIT_TTLS],
)
def test_a_replica_at_rest_with_an_open_circuit_is_called_again_soon_while_it_may_drop_events(
    opened, converging
):
    rsp = call(xr(status=wire.open_circuit(NOW - opened)), SERVING)
    seconds = rsp.meta.ttl.ToTimedelta().total_seconds()
    assert seconds == (10 if converging else REPORT_TURNS_STALE)


def with_times(placed_at, created=None, label="east"):
    replica = xr()
    replica["metadata"]["annotations"][labels.PLACED_AT] = placed_at
    replica["metadata"]["labels"][labels.CLUSTER] = label
    if created is not None:
        replica["metadata"]["creationTimestamp"] = created
    return replica


REPLACED = (
    'metadata.annotations["modelplane.ai/placed-at"]: outside [creationTimestamp - 60s, '
    "now + 60s]: queued at its creationTimestamp 2026-11-29T11:50:00Z instead"
)


@pytest.mark.parametrize(
    ("placed_at", "created", "replaced"),
    [
        pytest.param(EARLIER, EARLIER, None, id="a-stamp-at-its-creation-is-believed"),
        pytest.param(
            "2026-11-29T11:49:00Z",
            EARLIER,
            None,
            id="a-stamp-up-to-60s-before-creation-is-believed",
        ),
        pytest.param("2026-11-29T11:50:00.250000Z", EARLIER, None, id="a-sub-second-stamp-is-read"),
        pytest.param(
            "2026-11-29T11:48:59Z",
            EARLIER,
            f'{REPLACED} (got "2026-11-29T11:48:59Z")',
            id="a-stamp-over-60s-before-creation-is-replaced",
        ),
        pytest.param(
            "2000-01-01T00:00:00Z",
            EARLIER,
            f'{REPLACED} (got "2000-01-01T00:00:00Z")',
            id="a-forged-ancient-stamp-is-replaced",
        ),
        pytest.param(
            "2026-11-29T12:01:01Z",
            EARLIER,
            f'{REPLACED} (got "2026-11-29T12:01:01Z")',
            id="a-stamp-over-60s-in-the-future-is-replaced",
        ),
    ],
)
def test_an_implausible_placement_time_is_replaced_by_the_creation_time_and_said(
    placed_at, created, replaced
):
    rsp = call(with_times(placed_at, created))
    status, reason, message = conditions(rsp)["Admitted"]
    assert (status, reason) == ("True", "Admitted")
    warned = [text for severity, text in events(rsp) if severity == "Warning"]
    if replaced is None:
        assert "outside" not in message and not warned
    else:
        assert message.endswith(f"; {replaced}")
        assert replaced in warned


def test_a_replica_labelled_for_another_cluster_is_not_judged_and_says_why():
    rsp = call(with_times(EARLIER, EARLIER, label="west"))
    expected = (
        "metadata.labels[\"modelplane.ai/cluster\"]: must equal spec.clusterName 'east', "
        'the cluster whose queue it is judged in (got "west")'
    )
    assert_not_judged(rsp, expected)


LONG_CLUSTER = "gpu-east-" + "a" * 244  # 253 characters: an InferenceCluster name may be


def test_a_replica_on_a_long_named_cluster_labelled_as_the_scheduler_writes_it_is_judged():
    replica = xr(cluster=LONG_CLUSTER)
    replica["metadata"]["labels"][labels.CLUSTER] = labels.label_value(LONG_CLUSTER)
    long_named = cluster()
    long_named["metadata"]["name"] = LONG_CLUSTER
    rsp = call(replica, required={"cluster": [long_named]})
    assert conditions(rsp)["Admitted"][:2] == ("True", "Admitted")
    fellows = [s for s in rsp.requirements.resources.values() if s.kind == "ModelReplica"]
    assert [dict(s.match_labels.labels)[labels.CLUSTER] for s in fellows] == [
        labels.label_value(LONG_CLUSTER)
    ]


def test_a_replica_labelled_for_another_cluster_keeps_its_running_work():
    rsp = call(with_times(EARLIER, EARLIER, label="west"), RUNNING, {"cluster": [full_cluster()]})
    assert conditions(rsp)["Admitted"][:2] == ("True", "Admitted")
    assert "east/serve/workload" in desired(rsp)


def test_a_stamp_from_the_future_without_a_creation_time_is_queued_last_and_said():
    rsp = call(with_times("2026-11-29T13:00:00Z"))
    expected = (
        'metadata.annotations["modelplane.ai/placed-at"]: outside [creationTimestamp - 60s, '
        'now + 60s]: queued last instead (got "2026-11-29T13:00:00Z")'
    )
    assert ("Warning", expected) in events(rsp)
    assert conditions(rsp)["Admitted"][:2] == ("False", "WaitingForAdmission")


# -- the workload namespace (design/tenancy.md) ------------------------------------------------


def _cluster_with_pod_security(level):
    body = cluster()
    if level is not None:
        body["spec"]["workloads"] = {"podSecurity": level}
    return body


def _kinds(rsp):
    return sorted(obj["spec"]["forProvider"]["manifest"]["kind"] for obj in desired(rsp).values())


@pytest.mark.parametrize(
    "replica",
    [
        pytest.param(xr(), id="a standalone engine"),
        pytest.param(xr(gang()), id="a gang"),
        pytest.param(xr(standalone(requests=())), id="a member that claims nothing"),
    ],
)
def test_a_replica_composes_no_namespace_its_deployment_composes_it_once_per_cluster(replica):
    rsp = call(replica, required={"cluster": [_cluster_with_pod_security("restricted")]})
    assert "Namespace" not in _kinds(rsp)
    assert "east/namespace" not in desired(rsp)
    assert conditions(rsp)["WorkloadsComposed"][:2] == ("True", "Composed")


LEGACY_NAMESPACE = {"east/namespace": remote_object("Namespace", ready=True)}


def test_an_earlier_releases_namespace_object_is_dropped_by_a_clean_pass():
    # Crossplane deletes the Object; its policies (no Delete) keep the remote namespace.
    rsp = call(xr(), {**RUNNING, **LEGACY_NAMESPACE})
    assert conditions(rsp)["WorkloadsComposed"][:2] == ("True", "Composed")
    assert "east/namespace" not in desired(rsp)
    assert {"east/serve/workload", "east/observation"} <= set(desired(rsp))


def test_an_earlier_releases_namespace_object_is_kept_by_a_pass_that_is_not_clean():
    rsp = call(xr(), {**RUNNING, **LEGACY_NAMESPACE}, required={"cluster": []})
    assert conditions(rsp)["WorkloadsComposed"][:2] == ("False", "ClusterNotFound")
    assert set(desired(rsp)) == {*RUNNING, "east/namespace"}


def test_an_unknown_pod_security_level_is_an_invalid_cluster_that_composes_nothing_new():
    rsp = call(xr(), RUNNING, required={"cluster": [_cluster_with_pod_security("lax")]})
    assert set(desired(rsp)) == set(RUNNING)
    status, reason, message = conditions(rsp)["WorkloadsComposed"]
    assert (status, reason) == ("False", "ClusterInvalid")
    assert "spec.workloads.podSecurity" in message and '"lax"' in message


def test_a_replica_not_admitted_yet_composes_its_observation_and_no_namespace():
    placed_now = xr()
    placed_now["metadata"]["annotations"][labels.PLACED_AT] = format_time(NOW)
    rsp = call(placed_now)
    assert conditions(rsp)["Admitted"][:2] == ("False", "WaitingForAdmission")
    assert sorted(desired(rsp)) == ["east/observation"]


# -- PodsCreated (pods_created.py) -------------------------------------------------------------

REFUSED = {
    "conditions": [
        {
            "type": "ReplicaFailure",
            "status": "True",
            "reason": "FailedCreate",
            "message": 'pods "r0-x" is forbidden: violates PodSecurity "baseline:latest"',
        }
    ]
}


@pytest.mark.parametrize(
    ("missing_since", "grace", "reason"),
    [
        pytest.param("2026-11-29T11:56:00Z", None, "Creating", id="4m missing of 5m: Creating"),
        pytest.param("2026-11-29T11:54:00Z", None, "NotCreated", id="6m missing of 5m: released"),
        pytest.param("2026-11-29T11:54:00Z", "10m", "Creating", id="the spec's grace is read"),
    ],
)
def test_an_admitted_replica_without_its_pods_relays_the_refusal(missing_since, grace, reason):
    status = {
        "admission": {"placedAt": EARLIER, "verdict": "Admitted", "decidedAt": EARLIER},
        "pods": {"expected": 1, "observed": 0, "scheduled": 0, "missingSince": missing_since},
    }
    replica = xr(status=status)
    if grace is not None:
        replica["spec"]["missingPodsGracePeriod"] = grace
    observed = {
        **observation(report(0, 0, state="False", reason="Pending", since=None)),
        "east/serve/workload": remote_object("Deployment", REFUSED),
    }
    rsp = call(replica, observed)
    status_, why, message = conditions(rsp)["PodsCreated"]
    assert (status_, why) == ("False", reason)
    assert 'the Deployment reports FailedCreate: pods "r0-x" is forbidden' in message
    assert desired_status(rsp)["pods"]["missingSince"] == missing_since
    warned = [text for severity, text in events(rsp) if "holds no capacity" in text]
    assert len(warned) == (1 if reason == "NotCreated" else 0)


@pytest.mark.parametrize(
    ("missing_since", "grace", "reason"),
    [
        pytest.param("2026-11-29T11:01:00Z", "100000h", "Creating", id="59m of 100000h: Creating"),
        pytest.param(
            "2026-11-29T10:59:00Z", "100000h", "NotCreated", id="61m of 100000h: released at 1h"
        ),
        pytest.param(
            "2026-11-29T10:59:00Z",
            "99999999999h",
            "NotCreated",
            id="61m of a grace no clock holds: released at 1h, no crash",
        ),
    ],
)
def test_a_grace_past_the_platforms_hour_holds_capacity_an_hour_and_says_so(
    missing_since, grace, reason
):
    placed = "2026-11-29T09:00:00Z"
    status = {
        "admission": {"placedAt": placed, "verdict": "Admitted", "decidedAt": placed},
        "pods": {"expected": 1, "observed": 0, "scheduled": 0, "missingSince": missing_since},
    }
    replica = xr(status=status)
    replica["metadata"]["annotations"][labels.PLACED_AT] = placed
    replica["spec"]["missingPodsGracePeriod"] = grace
    observed = {
        **observation(report(0, 0, state="False", reason="Pending", since=None)),
        "east/serve/workload": remote_object("Deployment", REFUSED),
    }
    rsp = call(replica, observed)
    assert conditions(rsp)["PodsCreated"][:2] == ("False", reason)
    line = f'spec.missingPodsGracePeriod: longer than the maximum 1h; using 1h (got "{grace}")'
    assert ("Warning", line) in events(rsp)


@pytest.mark.parametrize(
    ("observed", "admitted"),
    [
        pytest.param(
            {"east/namespace": remote_object("Namespace", ready=True)},
            False,
            id="an earlier release's Namespace Object alone is no running work: it waits",
        ),
        pytest.param(
            {
                "east/namespace": remote_object("Namespace", ready=True),
                **observation(report(0, 0)),
            },
            False,
            id="nor with its ReplicaObservation: it waits",
        ),
        pytest.param(
            {"east/serve/workload": remote_object("Deployment", {}, ready=True)},
            True,
            id="an engine's workload already there is running work: admitted at once",
        ),
    ],
)
def test_only_an_engine_object_admits_a_replica_in_its_commit_delay_at_once(observed, admitted):
    replica = xr()
    replica["metadata"]["annotations"][labels.PLACED_AT] = "2026-11-29T11:59:57Z"
    rsp = call(replica, observed)
    assert (conditions(rsp)["Admitted"][0] == "True") is admitted


# --- templates by digest: taken from the ModelDeployment only while the digest matches ------


EDITED = {"spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.12.0"}]}}
# A template compose-model-deployment refuses: it binds pods without the cluster's scheduler.
BYPASS = {"spec": {"nodeName": "gpu-1", "containers": [{"name": "vllm", "image": "evil"}]}}


def by_digest(engine):
    """The engine as compose-model-deployment writes it: each template named by digest."""
    out = copy.deepcopy(engine)
    for member in out["members"]:
        member["templateDigest"] = template_digest.of(member.pop("template"))
    return out


def owned(replica, deployment="llm", namespace="team-a"):
    """The replica labelled as its deployment composes it."""
    replica["metadata"]["labels"].update(
        {labels.DEPLOYMENT: deployment, labels.DEPLOYMENT_NAMESPACE: namespace}
    )
    return replica


def model_deployment(*engines, template=TEMPLATE, name="llm", namespace="team-a"):
    """The ModelDeployment whose engines give each member `template`."""
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "template": {
                "spec": {
                    "engines": [
                        {
                            "name": engine,
                            "members": [
                                {"role": "Standalone", "template": copy.deepcopy(template)}
                            ],
                        }
                        for engine in engines or ("serve",)
                    ]
                }
            },
        },
    }


def with_deployment(*deployments):
    return {"cluster": [cluster()], "deployment": list(deployments)}


def kept_as_observed(rsp, observed):
    """Every observed engine Object is in the response exactly as observed."""
    got = desired(rsp)
    return all(
        got.get(name) == unchanged({k: v for k, v in body.items() if k != "status"})
        for name, body in observed.items()
        if name.startswith("east/serve/")
    )


def test_the_first_call_asks_for_the_deployment_by_name_in_its_namespace_beside_the_cluster():
    rsp = call(owned(xr(by_digest(standalone()))), fetched=False)
    selector = rsp.requirements.resources["deployment"]
    assert (selector.api_version, selector.kind, selector.match_name, selector.namespace) == (
        "modelplane.ai/v1alpha1",
        "ModelDeployment",
        "llm",
        "team-a",
    )
    assert "cluster" in rsp.requirements.resources


@pytest.mark.parametrize(
    "replica",
    [
        pytest.param(owned(xr()), id="a replica whose templates are inline asks for no deployment"),
        pytest.param(
            owned(xr(by_digest(standalone())), namespace="team-b"),
            id="labels naming another namespace's deployment ask for none",
        ),
    ],
)
def test_no_deployment_is_required_unless_a_template_is_named_by_digest_in_its_namespace(replica):
    rsp = call(replica, fetched=False)
    assert "deployment" not in rsp.requirements.resources


def test_a_matching_digest_composes_the_deployments_template():
    template = {
        "metadata": {"labels": {"app": "vllm"}},
        "spec": {"containers": [{"name": "vllm", "image": "vllm:v3", "args": ["--port", "8000"]}]},
    }
    replica = owned(xr(by_digest({**standalone(), "members": [
        {**standalone()["members"][0], "template": template}]})))  # fmt: skip
    rsp = call(replica, {}, with_deployment(model_deployment(template=template)))
    pod = manifest(rsp, "east/serve/workload")["spec"]["template"]
    assert pod["spec"]["containers"][0]["image"] == "vllm:v3"
    assert pod["spec"]["containers"][0]["args"] == ["--port", "8000"]
    assert pod["metadata"]["labels"]["app"] == "vllm"
    assert conditions(rsp)["WorkloadsComposed"][:2] == ("True", "Composed")


def test_a_digest_matches_whatever_order_the_deployments_keys_come_in():
    reordered = {"spec": {"containers": [{"image": TEMPLATE["spec"]["containers"][0]["image"],
                                          "name": "vllm"}]}}  # fmt: skip
    replica = owned(xr(by_digest(standalone())))
    rsp = call(replica, {}, with_deployment(model_deployment(template=reordered)))
    assert manifest(rsp, "east/serve/workload")["kind"] == "Deployment"


def test_a_gang_takes_each_members_own_template_by_position():
    leader = {"spec": {"containers": [{"name": "leader", "image": "l"}]}}
    worker = {"spec": {"containers": [{"name": "worker", "image": "w"}]}}
    engine = gang()
    engine["members"][0]["template"], engine["members"][1]["template"] = leader, worker
    body = model_deployment()
    body["spec"]["template"]["spec"]["engines"][0]["members"] = [
        {"role": "Leader", "template": leader},
        {"role": "Worker", "worker": {"nodes": 2}, "template": worker},
    ]
    rsp = call(owned(xr(by_digest(engine))), {}, with_deployment(body))
    lws = manifest(rsp, "east/serve/workload")["spec"]["leaderWorkerTemplate"]
    assert lws["leaderTemplate"]["spec"]["containers"][0]["image"] == "l"
    assert lws["workerTemplate"]["spec"]["containers"][0]["image"] == "w"


@pytest.mark.parametrize(
    ("replica", "required", "reason", "message", "warned"),
    [
        pytest.param(
            owned(xr(by_digest(standalone()))),
            {"cluster": [cluster()]},
            "DeploymentNotResolved",
            "waiting for ModelDeployment team-a/llm",
            False,
            id="the deployment not fetched yet waits, unwarned",
        ),
        pytest.param(
            owned(xr(by_digest(standalone()))),
            with_deployment(),
            "DeploymentNotFound",
            "ModelDeployment team-a/llm does not exist",
            True,
            id="the deployment absent is warned",
        ),
        pytest.param(
            owned(xr(by_digest(standalone()))),
            with_deployment(model_deployment(template=EDITED)),
            "TemplateDigestMismatch",
            "engine serve: members[0] (Standalone).templateDigest: is not the digest of "
            "ModelDeployment team-a/llm's template for it (holds "
            f"{template_digest.of(EDITED)}); its workloads are kept until the deployment "
            f'rewrites the replica (got "{template_digest.of(TEMPLATE)}")',
            False,
            id="the deployment's template edited since waits for the rewrite, unwarned",
        ),
        pytest.param(
            owned(xr(by_digest(standalone()))),
            with_deployment(model_deployment(template=BYPASS)),
            "TemplateDigestMismatch",
            f"(holds {template_digest.of(BYPASS)})",
            False,
            id="a template the deployment would refuse never reaches a workload",
        ),
        pytest.param(
            owned(xr(by_digest(standalone()))),
            with_deployment(model_deployment("other")),
            "TemplateDigestMismatch",
            "(holds no template there)",
            False,
            id="the deployment without the engine holds no template for it",
        ),
        pytest.param(
            owned(xr(by_digest(standalone())), deployment=""),
            {"cluster": [cluster()]},
            "DeploymentNotFound",
            'metadata.labels["modelplane.ai/deployment"]: must name the ModelDeployment whose '
            'templates the replica names by digest (got "")',
            True,
            id="no deployment label names the field and value",
        ),
        pytest.param(
            owned(xr(by_digest(standalone())), namespace="team-b"),
            {"cluster": [cluster()]},
            "DeploymentNotFound",
            'metadata.labels["modelplane.ai/deployment-namespace"]: must be the replica\'s own '
            "namespace 'team-a', where its ModelDeployment is (got \"team-b\")",
            True,
            id="a deployment label naming another namespace names the field and value",
        ),
    ],
)
@pytest.mark.parametrize(
    "observed",
    [
        pytest.param(RUNNING, id="running workloads are kept exactly as observed"),
        pytest.param({}, id="with nothing composed yet, nothing is"),
    ],
)
def test_a_template_not_in_hand_never_changes_or_deletes_workloads(
    replica, required, reason, message, warned, observed
):
    rsp = call(replica, observed, required)
    assert kept_as_observed(rsp, observed)
    assert {n for n in desired(rsp) if n.startswith("east/serve/")} == {
        n for n in observed if n.startswith("east/serve/")
    }
    status, got_reason, got_message = conditions(rsp)["WorkloadsComposed"]
    assert (status, got_reason) == ("False", reason)
    assert message in got_message
    warnings = [m for severity, m in events(rsp) if severity == "Warning"]
    assert any(message in w for w in warnings) == warned
    # Its workloads, kept, still say how it runs; it looks again at the 60s that polls
    # required resources (the template is one).
    assert conditions(rsp)["WorkloadsReady"][0] == ("True" if observed else "False")
    assert rsp.meta.ttl.ToTimedelta().total_seconds() == 60


def test_one_engine_whose_template_is_not_in_hand_leaves_the_others_composing():
    observed = {"east/serve/workload": RUNNING["east/serve/workload"]}
    replica = owned(xr(by_digest(standalone()), by_digest(standalone("decode", pool="l40s"))))
    body = model_deployment("serve", "decode")
    body["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"] = EDITED
    rsp = call(replica, observed, with_deployment(body))
    assert kept_as_observed(rsp, observed)
    assert manifest(rsp, "east/decode/workload")["kind"] == "Deployment"
    assert conditions(rsp)["WorkloadsComposed"][1] == "TemplateDigestMismatch"


def test_a_replica_with_inline_templates_composes_without_its_deployment():
    rsp = call(owned(xr()), {}, {"cluster": [cluster()]})
    (container,) = manifest(rsp, "east/serve/workload")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == TEMPLATE["spec"]["containers"][0]["image"]
    assert conditions(rsp)["WorkloadsComposed"][:2] == ("True", "Composed")
    assert "deployment" not in rsp.requirements.resources


def test_an_inline_template_that_bypasses_the_scheduler_is_still_refused():
    engine = standalone()
    engine["members"][0]["template"] = BYPASS
    rsp = call(owned(xr(engine)), RUNNING, {"cluster": [cluster()]})
    assert kept_as_observed(rsp, RUNNING)
    assert conditions(rsp)["WorkloadsComposed"][1] == "InvalidSpec"


def test_a_member_with_both_template_and_digest_is_an_invalid_engine():
    engine = standalone()
    engine["members"][0]["templateDigest"] = template_digest.of(TEMPLATE)
    rsp = call(owned(xr(engine)), RUNNING, with_deployment(model_deployment()))
    assert kept_as_observed(rsp, RUNNING)
    status, reason, message = conditions(rsp)["WorkloadsComposed"]
    assert (status, reason) == ("False", "InvalidSpec")
    assert "members[0] (Standalone).templateDigest: is set beside template" in message


# --- orphans (modelplane_common.orphans) ------------------------------------------------------

DEPLOYMENT_OWNER = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "ModelDeployment",
    "name": "llm",
    "uid": "7c1f",
    "controller": True,
    "blockOwnerDeletion": True,
}


def admitted_and_running():
    status = {
        "admission": {"placedAt": EARLIER, "verdict": "Admitted", "decidedAt": EARLIER},
        "pods": {"expected": 1, "observed": 1, "scheduled": 1},
    }
    observed = {
        **observation(report(1, 1)),
        "east/serve/workload": remote_object("Deployment", {}, ready=True),
    }
    return xr(status=status), observed


@pytest.mark.parametrize(
    ("composed", "owners", "orphan"),
    [
        pytest.param(True, [], True, id="composed, its owner reference removed: orphaned"),
        pytest.param(
            True,
            [{**DEPLOYMENT_OWNER, "controller": False}],
            True,
            id="composed, only a reference that is not its controller: orphaned",
        ),
        pytest.param(True, [DEPLOYMENT_OWNER], False, id="composed and owned: runs as before"),
        pytest.param(False, [], False, id="never composed (written by hand): runs as before"),
    ],
)
def test_an_orphaned_replica_composes_nothing_and_holds_no_capacity(composed, owners, orphan):
    replica, observed = admitted_and_running()
    if composed:  # what Crossplane writes on a resource it composes (it is r0)
        replica["metadata"]["labels"]["crossplane.io/composite"] = "llm"
        replica["metadata"].setdefault("annotations", {})[COMPOSED_ANNOTATION] = "replica-0"
    if owners:
        replica["metadata"]["ownerReferences"] = owners
    rsp = call(replica, observed)
    assert ("east/serve/workload" in desired(rsp)) is not orphan
    created_status, created_reason, _ = conditions(rsp)["PodsCreated"]
    assert released(created_status, created_reason) is orphan
    warned = [text for severity, text in events(rsp) if "no ModelDeployment owns" in text]
    assert len(warned) == (1 if orphan else 0)


# --- a verdict binds the shape it charged (design/admission.md) ------------------------------


def grown_xr(copies, grown_at=EARLIER):
    """r0, Admitted for its placement at 1 copy (status.admission.charged), its spec now at
    `copies`; `grown_at` is when it first saw the growth (None: not yet)."""
    record = {
        "placedAt": EARLIER,
        "verdict": "Admitted",
        "decidedAt": EARLIER,
        "charged": a.charged(standalone(copies=1)),
    }
    if grown_at is not None:
        record["grownAt"] = grown_at
    return xr(standalone(copies=copies), status={"admission": record})


@pytest.mark.parametrize(
    ("replica", "required", "fetched", "warned"),
    [
        pytest.param(
            grown_xr(3),
            {"cluster": [full_cluster()]},
            True,
            True,
            id="a growth that does not fit is refused and warned",
        ),
        pytest.param(grown_xr(3, grown_at=None), None, True, False, id="a growth first seen"),
        pytest.param(grown_xr(3), None, False, False, id="a growth whose inputs are not fetched"),
    ],
)
def test_a_grown_replica_not_admitted_keeps_its_running_workloads_unchanged(
    replica, required, fetched, warned
):
    rsp = call(replica, RUNNING, required, fetched=fetched)
    got = desired(rsp)
    for name, body in RUNNING.items():
        if name.startswith("east/serve/"):
            assert got[name] == unchanged({k: v for k, v in body.items() if k != "status"})
    assert conditions(rsp)["Admitted"][:2] == ("True", "GrowthNotAdmitted")
    assert desired_status(rsp)["admission"]["charged"] == a.charged(standalone(copies=1))
    growth_warnings = [m for s, m in events(rsp) if s == "Warning" and "growth" in m]
    assert bool(growth_warnings) == warned


def test_a_grown_replica_admitted_for_its_growth_composes_its_new_shape():
    rsp = call(grown_xr(3), RUNNING)
    assert conditions(rsp)["Admitted"][:2] == ("True", "Admitted")
    assert manifest(rsp, "east/serve/workload")["spec"]["replicas"] == 3
    assert desired_status(rsp)["admission"]["charged"] == a.charged(standalone(copies=3))
