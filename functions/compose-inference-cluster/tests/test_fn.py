"""compose-inference-cluster through RunFunction: what it composes, publishes and says."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest
import structlog
from compose_inference_cluster.fn import FunctionRunner
from modelplane_testkit import wire
from modelplane_testkit.wire import conditions, desired, desired_status, events, request, run

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
FRESH = "2026-11-29T11:59:00Z"
STALE = "2026-11-29T11:40:00Z"

XR = {
    "apiVersion": "modelplane.ai/v1alpha1",
    "kind": "InferenceCluster",
    "metadata": {"name": "east"},
    "spec": {
        "credentials": {"secretRef": {"namespace": "ops", "name": "east-kc", "key": "kubeconfig"}},
        "nodePools": [
            {
                "name": "h100",
                "nodeCount": 4,
                "maxNodeCount": 6,
                "devices": [
                    {
                        "name": "gpu",
                        "claim": "DRA",
                        "driver": "gpu.nvidia.com",
                        "deviceClassName": "gpu.nvidia.com",
                        "count": 8,
                    },
                ],
            },
            {
                "name": "l40s",
                "nodeCount": 2,
                "devices": [
                    {
                        "name": "gpu",
                        "claim": "DRA",
                        "driver": "gpu.nvidia.com",
                        "deviceClassName": "gpu.nvidia.com",
                        "count": 4,
                    },
                    {
                        "name": "nic",
                        "claim": "DRA",
                        "driver": "rdma.mellanox.com",
                        "deviceClassName": "rdma.mellanox.com",
                        "count": 2,
                    },
                    {"name": "nvlink", "claim": "Synthetic", "count": 1},
                ],
            },
        ],
        "observation": {"mode": "Observed", "maxAge": "5m"},
    },
}


def xr(**spec_changes):
    body = copy.deepcopy(XR)
    body["spec"].update(spec_changes)
    return body


def pool_object(report=None):
    manifest = {"apiVersion": "agent.modelplane.ai/v1alpha1", "kind": "PoolObservation"}
    if report is not None:
        manifest["status"] = report
    return {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "status": {
            "atProvider": {"manifest": manifest},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Available"}],
        },
    }


AGENT_CRD = {
    "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
    "kind": "Object",
    "status": {"atProvider": {"manifest": {"kind": "CustomResourceDefinition"}}},
}
AGENT_CRD_NOT_SEEN = {
    "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
    "kind": "Object",
    "status": {"conditions": [{"type": "Synced", "status": "False", "reason": "ReconcileError"}]},
}
PROVIDER_CONFIG = {
    "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
    "kind": "ClusterProviderConfig",
    "metadata": {"name": "east"},
    "spec": {
        "credentials": {
            "source": "Secret",
            "secretRef": {"namespace": "ops", "name": "east-kc", "key": "kubeconfig"},
        }
    },
}
H100_REPORT = {
    "observedAt": FRESH,
    "observedNodes": 4,
    "nodesByFreeDevices": [{"free": {"gpu": 8}, "nodes": 2}, {"free": {"gpu": 2}, "nodes": 1}],
}
L40S_REPORT = {
    "observedAt": FRESH,
    "observedNodes": 2,
    "nodesByFreeDevices": [{"free": {"gpu": 4, "nic": 2}, "nodes": 2}],
}
OBSERVED_ALL = {
    "provider-config": PROVIDER_CONFIG,
    "agent-crd": AGENT_CRD,
    "pool-h100": pool_object(H100_REPORT),
    "pool-l40s": pool_object(L40S_REPORT),
}


def render(xr_body, observed, now=NOW):
    return run(FunctionRunner(clock=lambda: now), request(xr_body, observed))


def pools(rsp):
    return {p["name"]: p for p in desired_status(rsp)["gpuPools"]}


OBSERVED_KEYS = {"observedAt", "observedNodes", "nodesByFreeDevices"}


def test_observed_cluster_publishes_each_pools_histogram():
    rsp = render(XR, OBSERVED_ALL)
    published = pools(rsp)
    assert published["h100"] == {
        "name": "h100",
        "nodes": 6,
        "devices": XR["spec"]["nodePools"][0]["devices"],
        "observedAt": FRESH,
        "observedNodes": 4,
        "nodesByFreeDevices": [{"free": {"gpu": 8}, "nodes": 2}, {"free": {"gpu": 2}, "nodes": 1}],
        "changedAt": FRESH,
        "current": True,
    }
    assert published["l40s"]["nodes"] == 2
    assert published["l40s"]["nodesByFreeDevices"] == [{"free": {"gpu": 4, "nic": 2}, "nodes": 2}]
    assert conditions(rsp)["CapacityObserved"] == (
        "True",
        "AllPoolsObserved",
        "observed: h100, l40s",
    )
    assert desired_status(rsp)["providerConfigRef"] == {"name": "east"}


def with_replicas_current_at(h100=None, l40s=None):
    """The observed pools, each report carrying the agent's replicasCurrentAt if given."""
    observed = dict(OBSERVED_ALL)
    for pool, at, report in (("h100", h100, H100_REPORT), ("l40s", l40s, L40S_REPORT)):
        if at is not None:
            observed[f"pool-{pool}"] = pool_object({**report, "replicasCurrentAt": at})
    return observed


REPLICAS_VERDICT = {
    "the latest of the pools' words within maxAge: current": (
        with_replicas_current_at("2026-11-29T11:50:00Z", "2026-11-29T11:59:10Z"), True
    ),
    "one pool's word is enough (the other's heartbeat has not come round)": (
        with_replicas_current_at(h100="2026-11-29T11:58:00Z"), True
    ),
    "the latest word older than maxAge: not current": (
        with_replicas_current_at(h100=STALE, l40s=STALE), False
    ),
    "an agent that publishes none: no verdict, each report judged alone": (OBSERVED_ALL, None),
    "pool reports momentarily missing: no verdict, each report judged alone": (
        {"provider-config": PROVIDER_CONFIG, "agent-crd": AGENT_CRD}, None
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("observed", "verdict"), REPLICAS_VERDICT.values(), ids=REPLICAS_VERDICT.keys()
)
def test_the_cluster_publishes_its_verdict_on_the_agents_replica_reports(observed, verdict):
    agent = desired_status(render(xr(), observed))["agent"]
    assert agent.get("replicasCurrent") == verdict
    assert agent["vouchedUntil"] == "2026-11-29T12:30:00Z"


def heartbeat(at, h100=H100_REPORT, l40s=L40S_REPORT):
    """Both pools reported again at `at` (the agent's clock), with their replica word."""
    return {
        **OBSERVED_ALL,
        "pool-h100": pool_object({**h100, "observedAt": at, "replicasCurrentAt": at}),
        "pool-l40s": pool_object({**l40s, "observedAt": at, "replicasCurrentAt": at}),
    }


def test_a_heartbeat_after_the_confirming_one_changes_nothing_published():
    """Every replica and deployment requires its cluster and is woken by every change of
    it: a heartbeat must not be one (design/reconcile.md, "Crossplane v2.4"). The first
    report after a change confirms it (observedAt moves past the replicas it counts)."""
    first = desired_status(render(xr(), heartbeat("2026-11-29T11:59:00Z")))
    confirmed = desired_status(
        render({**xr(), "status": first}, heartbeat("2026-11-29T11:59:30Z"), NOW)
    )
    assert {p["name"]: (p["observedAt"], p["changedAt"]) for p in confirmed["gpuPools"]} == {
        "h100": ("2026-11-29T11:59:30Z", "2026-11-29T11:59:00Z"),
        "l40s": ("2026-11-29T11:59:30Z", "2026-11-29T11:59:00Z"),
    }
    later = NOW + timedelta(minutes=2)
    again = render({**xr(), "status": confirmed}, heartbeat("2026-11-29T12:01:50Z"), now=later)
    assert desired_status(again) == confirmed


def test_a_changed_histogram_moves_its_pools_observed_at_and_nothing_else():
    seen = desired_status(render(xr(), heartbeat("2026-11-29T11:58:30Z")))
    first = desired_status(render({**xr(), "status": seen}, heartbeat("2026-11-29T11:59:00Z")))
    changed = {**H100_REPORT, "nodesByFreeDevices": [{"free": {"gpu": 8}, "nodes": 3}]}
    later = NOW + timedelta(minutes=2)
    again = desired_status(
        render({**xr(), "status": first}, heartbeat("2026-11-29T12:01:50Z", h100=changed), later)
    )
    before, after = ({p["name"]: p for p in status["gpuPools"]} for status in (first, again))
    assert (after["h100"]["observedAt"], after["h100"]["changedAt"]) == (
        "2026-11-29T12:01:50Z",
        "2026-11-29T12:01:50Z",
    )
    assert after["h100"]["nodesByFreeDevices"] == [{"free": {"gpu": 8}, "nodes": 3}]
    assert after["l40s"] == before["l40s"]
    assert again["agent"] == first["agent"]


VERDICT_FLIPS = {
    "a pool reported within maxAge is current": (NOW, True),
    "a pool reported exactly maxAge ago is still current": (NOW + timedelta(minutes=4), True),
    "a pool whose last report passed maxAge flips to not current": (
        NOW + timedelta(minutes=4, seconds=1), False
    ),
}  # fmt: skip


@pytest.mark.parametrize(("now", "current"), VERDICT_FLIPS.values(), ids=VERDICT_FLIPS.keys())
def test_a_pools_verdict_flips_when_its_last_report_passes_max_age(now, current):
    published = pools(
        render(xr(observation={"mode": "Observed", "maxAge": "5m"}), OBSERVED_ALL, now)
    )
    assert (published["h100"]["current"], published["l40s"]["current"]) == (current, current)
    assert published["h100"]["observedAt"] == FRESH


LEASES = {
    "with more than 15 minutes left the lease is kept": (
        "2026-11-29T12:15:01Z", "2026-11-29T12:15:01Z"
    ),
    "with 15 minutes or less left it is renewed for 30": (
        "2026-11-29T12:15:00Z", "2026-11-29T12:30:00Z"
    ),
    "a lapsed lease is renewed": ("2026-11-29T11:00:00Z", "2026-11-29T12:30:00Z"),
}  # fmt: skip


@pytest.mark.parametrize(("held", "published"), LEASES.values(), ids=LEASES.keys())
def test_the_lease_on_the_verdicts_is_renewed_only_when_15_minutes_are_left(held, published):
    previous = {"agent": {"present": True, "vouchedUntil": held}}
    agent = desired_status(render({**xr(), "status": previous}, OBSERVED_ALL))["agent"]
    assert agent["vouchedUntil"] == published


def test_a_declared_cluster_publishes_no_verdict_and_no_lease():
    agent = desired_status(render(xr(observation={"mode": "Declared"}), OBSERVED_ALL))["agent"]
    assert agent == {"present": True}


def test_an_unreadable_replicas_current_at_is_not_relayed_and_named_in_a_warning():
    observed = with_replicas_current_at(h100="soon")
    rsp = render(xr(), observed)
    assert "replicasCurrentAt" not in desired_status(rsp)["agent"]
    assert ("Warning", "pool h100: replicasCurrentAt: not an RFC 3339 time (got 'soon')") in events(
        rsp
    )


def test_composes_provider_config_agent_crd_and_one_pool_observation_per_pool():
    resources = desired(render(XR, OBSERVED_ALL))
    assert sorted(resources) == ["agent-crd", "pool-h100", "pool-l40s", "provider-config"]
    assert resources["provider-config"]["spec"]["credentials"] == {
        "source": "Secret",
        "secretRef": {"namespace": "ops", "name": "east-kc", "key": "kubeconfig"},
    }
    crd = resources["agent-crd"]
    assert crd["spec"]["managementPolicies"] == ["Observe"]
    assert crd["spec"]["forProvider"]["manifest"]["metadata"]["name"] == (
        "poolobservations.agent.modelplane.ai"
    )
    pool = resources["pool-l40s"]
    assert pool["metadata"] == {"name": "east-pool-l40s", "namespace": "ops"}
    assert pool["spec"]["watch"] is True
    assert pool["spec"]["providerConfigRef"] == {"kind": "ClusterProviderConfig", "name": "east"}
    assert pool["spec"]["forProvider"]["manifest"]["spec"] == {
        "poolName": "l40s",
        "nodeSelector": {"matchLabels": {"modelplane.ai/pool": "l40s"}},
        # The synthetic kind is matched for placement only: never observed.
        "devices": [
            {"name": "gpu", "driver": "gpu.nvidia.com", "deviceClassName": "gpu.nvidia.com"},
            {"name": "nic", "driver": "rdma.mellanox.com", "deviceClassName": "rdma.mellanox.com"},
        ],
        "maxAge": "5m",
    }


def test_the_fleet_taints_reach_the_agent_as_every_pool_tolerations():
    taints = [
        {"key": "modelplane.ai/dedicated", "value": "inference", "effect": "NoSchedule"},
        {"key": "gpu", "effect": "NoExecute"},
    ]
    resources = desired(render(xr(taints=taints), OBSERVED_ALL))
    for pool in ("pool-h100", "pool-l40s"):
        assert resources[pool]["spec"]["forProvider"]["manifest"]["spec"]["tolerations"] == [
            {
                "key": "modelplane.ai/dedicated",
                "operator": "Equal",
                "value": "inference",
                "effect": "NoSchedule",
            },
            {"key": "gpu", "operator": "Equal", "value": "", "effect": "NoExecute"},
        ]


def test_a_kinds_declared_attributes_and_capacity_reach_its_pool_observation():
    body = xr()
    body["spec"]["nodePools"][0]["devices"][0]["attributes"] = {
        "driverVersion": {"version": "550.54.15"},
        "cores": {"int": 132.0},  # protobuf carries every number as a float
        "gpu.nvidia.com/mig": {"bool": False},
    }
    body["spec"]["nodePools"][0]["devices"][0]["capacity"] = {"memory": {"value": "80Gi"}}
    resources = desired(render(body, OBSERVED_ALL))
    (h100,) = resources["pool-h100"]["spec"]["forProvider"]["manifest"]["spec"]["devices"]
    l40s = resources["pool-l40s"]["spec"]["forProvider"]["manifest"]["spec"]["devices"]
    assert h100 == {
        "name": "gpu",
        "driver": "gpu.nvidia.com",
        "deviceClassName": "gpu.nvidia.com",
        "attributes": {
            "driverVersion": {"version": "550.54.15"},
            "cores": {"int": 132},
            "gpu.nvidia.com/mig": {"bool": False},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }
    assert all("attributes" not in d and "capacity" not in d for d in l40s)


def test_a_pools_min_pod_requests_reach_its_pool_observation_and_only_its_own():
    body = xr()
    body["spec"]["nodePools"][0]["minPodRequests"] = {"cpu": 8, "memory": "64Gi"}
    resources = desired(render(body, OBSERVED_ALL))
    h100 = resources["pool-h100"]["spec"]["forProvider"]["manifest"]["spec"]
    l40s = resources["pool-l40s"]["spec"]["forProvider"]["manifest"]["spec"]
    assert h100["minPodRequests"] == {"cpu": "8", "memory": "64Gi"}
    assert "minPodRequests" not in l40s


@pytest.mark.parametrize(
    ("observation", "composed"),
    [
        pytest.param({"maxAge": "90s"}, "90s", id="the declared maxAge, as spelt"),
        pytest.param({}, "5m", id="none declared: the default the scheduler judges by"),
    ],
)
def test_every_pool_observation_carries_the_clusters_max_age(observation, composed):
    body = xr()
    body["spec"]["observation"] = {"mode": "Observed", **observation}
    resources = desired(render(body, OBSERVED_ALL))
    for pool in ("pool-h100", "pool-l40s"):
        assert resources[pool]["spec"]["forProvider"]["manifest"]["spec"]["maxAge"] == composed


FALLBACKS = {
    "a cluster without the agent composes no pool observation and publishes nothing observed": (
        {"provider-config": PROVIDER_CONFIG, "agent-crd": AGENT_CRD_NOT_SEEN},
        {"h100": "the agent is not installed", "l40s": "the agent is not installed"},
        ["agent-crd", "provider-config"],
    ),
    "a pool the agent has not reported on yet publishes nothing observed": (
        {**OBSERVED_ALL, "pool-h100": pool_object(None)},
        {"h100": "has not reported"},
        ["agent-crd", "pool-h100", "pool-l40s", "provider-config"],
    ),
    "a pool the agent is blind to publishes nothing observed": (
        {
            **OBSERVED_ALL,
            "pool-h100": pool_object(
                {
                    **H100_REPORT,
                    "conditions": [
                        {
                            "type": "Observing",
                            "status": "False",
                            "reason": "Forbidden",
                            "message": "no RBAC",
                        }
                    ],
                }
            ),
        },
        {"h100": "Forbidden: no RBAC"},
        ["agent-crd", "pool-h100", "pool-l40s", "provider-config"],
    ),
}


@pytest.mark.parametrize(
    ("observed", "fallback", "composed"), FALLBACKS.values(), ids=FALLBACKS.keys()
)
def test_pools_fall_back_without_a_valid_report(observed, fallback, composed):
    rsp = render(XR, observed)
    published = pools(rsp)
    for pool, why in fallback.items():
        assert not OBSERVED_KEYS & published[pool].keys()
        assert published[pool]["nodes"] > 0 and published[pool]["devices"]
        status, _reason, message = conditions(rsp)["CapacityObserved"]
        assert status == "False"
        assert f"{pool} (" in message and why in message
    assert sorted(desired(rsp)) == composed


MALFORMED = {
    "negative counts": (
        {"free": {"gpu": -2}, "nodes": 1},
        "nodesByFreeDevices[0].free.gpu: must be a non-negative count (got -2)",
    ),
    "free above the declared per-node count": (
        {"free": {"gpu": 9}, "nodes": 1},
        "nodesByFreeDevices[0].free.gpu: above the 8 declared per node (got 9)",
    ),
    "unknown device keys": (
        {"free": {"tpu": 1}, "nodes": 1},
        'nodesByFreeDevices[0].free: names an undeclared device kind (got "tpu")',
    ),
}


@pytest.mark.parametrize(
    ("bucket", "defect"),
    MALFORMED.values(),
    ids=[f"a histogram with {k} is never published" for k in MALFORMED],
)
def test_malformed_histograms_fall_back_with_a_warning_naming_pool_and_defect(bucket, defect):
    bad = {**H100_REPORT, "nodesByFreeDevices": [bucket]}
    rsp = render(XR, {**OBSERVED_ALL, "pool-h100": pool_object(bad)})
    assert not OBSERVED_KEYS & pools(rsp)["h100"].keys()
    assert pools(rsp)["l40s"].keys() >= OBSERVED_KEYS
    warnings = [m for severity, m in events(rsp) if severity == "Warning"]
    assert any("pool h100" in m and defect in m for m in warnings), warnings


def test_too_many_buckets_are_never_published():
    buckets = [{"free": {"gpu": g % 9}, "nodes": 1} for g in range(513)]
    bad = {**H100_REPORT, "observedNodes": 600, "nodesByFreeDevices": buckets}
    rsp = render(XR, {**OBSERVED_ALL, "pool-h100": pool_object(bad)})
    assert not OBSERVED_KEYS & pools(rsp)["h100"].keys()
    assert any("nodesByFreeDevices: more than 512 buckets (got 513)" in m for _, m in events(rsp))


def test_malformed_observed_at_is_never_published():
    bad = {**H100_REPORT, "observedAt": "last tuesday"}
    rsp = render(XR, {**OBSERVED_ALL, "pool-h100": pool_object(bad)})
    assert not OBSERVED_KEYS & pools(rsp)["h100"].keys()
    assert any("pool h100" in m and "observedAt" in m for _, m in events(rsp))


def test_a_stale_observation_is_published_but_reported_as_stale():
    # The scheduler judges staleness against maxAge; the publisher still
    # relays the agent's observedAt so that judgement has the facts.
    stale = {**H100_REPORT, "observedAt": STALE}
    rsp = render(XR, {**OBSERVED_ALL, "pool-h100": pool_object(stale)})
    assert pools(rsp)["h100"]["observedAt"] == STALE
    status, reason, message = conditions(rsp)["CapacityObserved"]
    assert (status, reason) == ("False", "SomePoolsUnobserved")
    assert "h100 (observation is older than 5m)" in message


def test_declared_mode_composes_no_observation_and_publishes_nothing_observed():
    declared = xr(observation={"mode": "Declared"})
    rsp = render(declared, {"provider-config": PROVIDER_CONFIG})
    assert sorted(desired(rsp)) == ["provider-config"]
    for pool in pools(rsp).values():
        assert not OBSERVED_KEYS & pool.keys()
    assert conditions(rsp)["CapacityObserved"][:2] == ("False", "Declared")


def with_fallbacks(cluster_wide=None, h100=None, **spec_changes):
    body = xr(**spec_changes)
    if cluster_wide is not None:
        body["spec"].setdefault("observation", {})["fallback"] = cluster_wide
    if h100 is not None:
        body["spec"]["nodePools"][0]["fallback"] = h100
    return body


CAPACITY_MESSAGES = [
    pytest.param(
        with_fallbacks(h100="DeviceCount"),
        {**OBSERVED_ALL, "pool-h100": pool_object({**H100_REPORT, "observedAt": STALE})},
        (
            "False",
            "SomePoolsUnobserved",
            "observed: l40s; DeviceCount fallback: h100 (observation is older than 5m)",
        ),
        id="a stale pool counted by devices is named under DeviceCount with its reason",
    ),
    pytest.param(
        with_fallbacks("DeviceCount", h100="WholeNode"),
        {"provider-config": PROVIDER_CONFIG, "agent-crd": AGENT_CRD_NOT_SEEN},
        (
            "False",
            "NoPoolObserved",
            "WholeNode fallback: h100 (the agent is not installed on "
            "the cluster); DeviceCount fallback: l40s (the agent is not installed on the cluster)",
        ),
        id="without the agent each pool is listed under its own fallback",
    ),
    pytest.param(
        with_fallbacks("DeviceCount", observation={"mode": "Declared"}),
        {"provider-config": PROVIDER_CONFIG},
        (
            "False",
            "Declared",
            "observation.mode is Declared: the scheduler counts every pool "
            "by its fallback; DeviceCount fallback: h100, l40s",
        ),
        id="a Declared cluster counted by devices says so",
    ),
    pytest.param(
        xr(observation={"mode": "Declared"}),
        {"provider-config": PROVIDER_CONFIG},
        (
            "False",
            "Declared",
            "observation.mode is Declared: the scheduler counts every pool "
            "by its fallback; WholeNode fallback: h100, l40s",
        ),
        id="a Declared cluster without a fallback counts whole nodes",
    ),
    pytest.param(
        with_fallbacks("DeviceCount"),
        OBSERVED_ALL,
        ("True", "AllPoolsObserved", "observed: h100, l40s"),
        id="observed pools never mention their fallback",
    ),
]


@pytest.mark.parametrize(("body", "observed", "expected"), CAPACITY_MESSAGES)
def test_capacity_observed_names_each_pools_fallback(body, observed, expected):
    assert conditions(render(body, observed))["CapacityObserved"] == expected


def test_an_unknown_fallback_is_whole_node_with_a_warning_and_the_spec_stays_valid():
    rsp = render(
        with_fallbacks("Sometimes"),
        {"provider-config": PROVIDER_CONFIG, "agent-crd": AGENT_CRD_NOT_SEEN},
    )
    assert conditions(rsp)["Configured"][:2] == ("True", "ValidSpec")
    assert "WholeNode fallback: h100" in conditions(rsp)["CapacityObserved"][2]
    assert (
        "Warning",
        "spec.observation.fallback: must be one of WholeNode, DeviceCount; using WholeNode "
        '(got "Sometimes")',
    ) in events(rsp)


def test_a_rejected_report_warns_with_the_pools_fallback():
    bad = {**H100_REPORT, "nodesByFreeDevices": [{"free": {"gpu": 9}, "nodes": 1}]}
    rsp = render(
        with_fallbacks(h100="DeviceCount"), {**OBSERVED_ALL, "pool-h100": pool_object(bad)}
    )
    warnings = [m for severity, m in events(rsp) if severity == "Warning"]
    assert any(
        m.startswith("pool h100: observation rejected, falling back to DeviceCount accounting")
        for m in warnings
    ), warnings


BOUND_BREAKING = {
    # h100 declares nodeCount 4, maxNodeCount 6: 7 nodes is within the surge margin, 8 is not.
    "more nodes than the pool declares plus the surge margin": (
        {"observedNodes": 8, "nodesByFreeDevices": [{"free": {"gpu": 8}, "nodes": 1}]},
        "observedNodes: more than the pool's 6 declared node(s) plus a surge margin of 1 (got 8)",
    ),
    "a histogram of more nodes than observedNodes": (
        {"nodesByFreeDevices": [{"free": {"gpu": 1}, "nodes": 9}]},
        "nodesByFreeDevices: counts more nodes than the 4 observed (got 9)",
    ),
}


@pytest.mark.parametrize(
    ("change", "defect"),
    BOUND_BREAKING.values(),
    ids=[f"{k}: rejected, yet published as the pool's ceiling" for k in BOUND_BREAKING],
)
def test_a_report_breaking_only_a_node_count_bound_is_rejected_and_published_as_a_ceiling(
    change, defect
):
    # The scheduler parses the published copy, rejects it again and never counts the
    # pool above it (a report may only lower capacity: capacity/pools.py, rule 3).
    report = {**H100_REPORT, **change}
    rsp = render(xr(), {**OBSERVED_ALL, "pool-h100": pool_object(report)})
    warnings = [m for severity, m in events(rsp) if severity == "Warning"]
    assert any(
        m.startswith(
            "pool h100: observation rejected, falling back to WholeNode accounting, "
            "never above the report's free capacity: "
        )
        and defect in m
        for m in warnings
    ), warnings
    h100 = pools(rsp)["h100"]
    assert h100["nodesByFreeDevices"] == report["nodesByFreeDevices"]
    assert h100["observedNodes"] == report["observedNodes"]
    assert desired_status(rsp)["observedPools"] == "1/2"  # not counted as observed
    assert "h100 (" in conditions(rsp)["CapacityObserved"][2]


def test_switching_to_declared_removes_the_observation_objects():
    declared = xr(observation={"mode": "Declared"})
    assert sorted(desired(render(declared, OBSERVED_ALL))) == ["provider-config"]


def test_a_pool_that_leaves_the_spec_loses_its_observation_object():
    only_h100 = xr(nodePools=[XR["spec"]["nodePools"][0]])
    resources = desired(render(only_h100, OBSERVED_ALL))
    assert "pool-l40s" not in resources
    assert "pool-h100" in resources


def test_pool_objects_stay_while_the_agent_crd_object_momentarily_stops_reporting():
    observed = {**OBSERVED_ALL, "agent-crd": AGENT_CRD_NOT_SEEN}
    resources = desired(render(XR, observed))
    assert {"pool-h100", "pool-l40s"} <= resources.keys()


INVALID_SPECS = {
    "a credentials reference without its key": (
        {"credentials": {"secretRef": {"namespace": "ops", "name": "east-kc"}}},
        "spec.credentials.secretRef.key: is required (got no value)",
    ),
    "a pool without devices": (
        {
            "nodePools": [
                {**XR["spec"]["nodePools"][0]},
                {**XR["spec"]["nodePools"][1], "devices": []},
            ]
        },
        "spec.nodePools[1].devices: List should have at least 1 item after validation, "
        "not 0 (got [])",
    ),
    "a pool renamed to an invalid name": (
        {
            "nodePools": [
                {**XR["spec"]["nodePools"][0], "name": "H100!"},
                XR["spec"]["nodePools"][1],
            ]
        },
        "spec.nodePools[0].name: String should match pattern",
    ),
    "an unknown observation mode": (
        {"observation": {"mode": "Sometimes"}},
        "spec.observation.mode: Input should be 'Observed' or 'Declared' (got \"Sometimes\")",
    ),
    "no pools at all": ({"nodePools": None}, "spec.nodePools: Input should be a valid list"),
    "pools of the wrong type": (
        {"nodePools": "h100"},
        'spec.nodePools: Input should be a valid list (got "h100")',
    ),
}


@pytest.mark.parametrize(
    ("change", "defect"),
    INVALID_SPECS.values(),
    ids=[f"{k} keeps every composed resource and the published pools" for k in INVALID_SPECS],
)
def test_an_invalid_spec_keeps_everything_and_names_the_field(change, defect):
    before = render(XR, OBSERVED_ALL)
    published = desired_status(before)
    broken = {**xr(**change), "status": published}
    rsp = render(broken, OBSERVED_ALL)
    status, reason, message = conditions(rsp)["Configured"]
    assert (status, reason) == ("False", "InvalidSpec")
    assert defect in message
    assert any(severity == "Warning" and defect in m for severity, m in events(rsp))
    resources = desired(rsp)
    assert resources.keys() == OBSERVED_ALL.keys()
    assert resources["provider-config"]["spec"] == PROVIDER_CONFIG["spec"]
    assert desired_status(rsp) == published


def test_an_empty_spec_keeps_everything():
    rsp = render({**XR, "spec": {}}, OBSERVED_ALL)
    assert conditions(rsp)["Configured"][:2] == ("False", "InvalidSpec")
    assert desired(rsp).keys() == OBSERVED_ALL.keys()


def test_a_composite_whose_spec_is_not_an_object_is_fatal_naming_the_field():
    rsp = render({**XR, "spec": "east"}, OBSERVED_ALL)
    assert events(rsp) == [
        ("Fatal", 'cannot read the composite: spec: must be an object (got "east")')
    ]


def test_nodes_is_max_node_count_else_node_count():
    published = pools(render(XR, OBSERVED_ALL))
    assert (published["h100"]["nodes"], published["l40s"]["nodes"]) == (6, 2)


def test_events_say_when_a_pool_starts_and_stops_being_observed():
    previously = xr()
    previously["status"] = {"gpuPools": [{"name": "l40s", "observedAt": FRESH}]}
    rsp = render(previously, {**OBSERVED_ALL, "pool-l40s": pool_object(None)})
    messages = events(rsp)
    assert ("Normal", "pool h100: publishing observed capacity") in messages
    assert any(
        s == "Warning" and m.startswith("pool l40s: observation withdrawn") for s, m in messages
    )


def test_a_steady_state_emits_no_events():
    steady = xr()
    steady["status"] = {
        "gpuPools": [{"name": "h100", "observedAt": FRESH}, {"name": "l40s", "observedAt": FRESH}]
    }
    assert events(render(steady, OBSERVED_ALL)) == []


def test_pool_objects_are_ready_only_when_their_object_is():
    observed = copy.deepcopy(OBSERVED_ALL)
    observed["pool-h100"]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    rsp = render(XR, observed)
    ready = {name: r.ready for name, r in rsp.desired.resources.items()}
    assert ready["pool-l40s"] == 1  # READY_TRUE
    assert ready["pool-h100"] != 1


@pytest.mark.parametrize(
    "since",
    ["2026-01-01t09:00:00z", "2026-01-01T10:00:00.123456789+01:00", "not a time"],
    ids=[
        "a lower-case RFC 3339 time",
        "an offset with nanoseconds",
        "a malformed time is simply not read",
    ],
)
def test_a_ready_condition_is_read_whatever_its_time_spelling(since):
    observed = copy.deepcopy(OBSERVED_ALL)
    observed["pool-h100"]["status"]["conditions"][0]["lastTransitionTime"] = since
    rsp = render(XR, observed)
    assert rsp.desired.resources["pool-h100"].ready == 1  # READY_TRUE


def test_an_observed_at_far_in_the_future_says_so():
    future = {**H100_REPORT, "observedAt": "2999-12-31T23:59:59Z"}
    rsp = render(XR, {**OBSERVED_ALL, "pool-h100": pool_object(future)})
    message = conditions(rsp)["CapacityObserved"][2]
    assert (
        "h100 (observation is in the future, more than 5m ahead of the control plane's clock "
        "(check the agent's clock))" in message
    )


def test_each_request_logs_its_decision_and_timings_at_debug_bound_to_tag_and_xr():
    req = request(xr(), {})
    req.meta.tag = "abc"
    with structlog.testing.capture_logs() as captured:
        run(FunctionRunner(clock=lambda: NOW), req)
    (decided,) = [line for line in captured if line["event"] == "decided"]
    assert decided["log_level"] == "debug"
    assert (decided["tag"], decided["xr_kind"], decided["xr_name"]) == (
        "abc",
        "InferenceCluster",
        "east",
    )
    assert decided["pools"] == {"NoAgent": 2}
    assert decided["conditions"]["Configured"] == "True/ValidSpec"
    assert {"read_ms", "decide_ms", "write_ms"} <= set(decided)


@pytest.mark.parametrize(
    ("observation", "seconds"),
    [
        pytest.param({"mode": "Observed", "maxAge": "2m"}, 30, id="observed: a quarter of maxAge"),
        pytest.param(
            {"mode": "Observed", "maxAge": "1m"},
            1,
            id="reports exactly maxAge old: the second they turn stale, to flip the verdict",
        ),
        pytest.param({"mode": "Observed", "maxAge": "2s"}, 1, id="never below one second"),
        pytest.param({"mode": "Observed", "maxAge": "5m"}, 60, id="never above the 60s backstop"),
        pytest.param({"mode": "Declared"}, 300, id="declared reads no agent: the at-rest 5m cap"),
    ],
)
def test_an_observed_cluster_is_called_again_within_a_quarter_of_its_max_age(observation, seconds):
    rsp = render(xr(observation=observation), OBSERVED_ALL)
    assert rsp.meta.ttl.ToTimedelta().total_seconds() == seconds


@pytest.mark.parametrize(
    ("opened", "converging"),
    [pytest.param(*case[:2], id=case[2]) for case in wire.OPEN_CIRCUIT_TTLS],
)
def test_a_cluster_with_an_open_circuit_is_called_again_soon_while_it_may_drop_events(
    opened, converging
):
    body = xr(observation={"mode": "Declared"})
    body["status"] = wire.open_circuit(NOW - opened)
    seconds = render(body, OBSERVED_ALL).meta.ttl.ToTimedelta().total_seconds()
    assert seconds == (10 if converging else 300)
