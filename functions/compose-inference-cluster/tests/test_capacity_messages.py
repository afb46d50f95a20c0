"""The review's 64-pool case: every pool's report malformed at the XRD's limits.

Before the one message rule this gave a 33.5 MB CapacityObserved condition
and 64 events of 0.5 MB; now every message is at most MAX_MESSAGE, and the
condition names a few pools per list and counts the rest.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime

from compose_inference_cluster import core
from compose_inference_cluster.fn import FunctionRunner
from modelplane_common.composed import observed_object
from modelplane_common.outcome import MAX_MESSAGE
from modelplane_testkit.wire import conditions, events, request, run

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
POOLS = 64  # the XRD's maxItems on nodePools
GPU = {
    "name": "gpu",
    "claim": "DRA",
    "driver": "gpu.nvidia.com",
    "deviceClassName": "gpu.nvidia.com",
    "count": 8,
}


def pool_name(i: int) -> str:
    return f"{i:02d}" + "p" * 61  # 63 characters, the XRD's maxLength


def cluster() -> dict:
    """64 pools of the longest names, alternating fallbacks so both lists are long."""
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "east"},
        "spec": {
            "credentials": {
                "secretRef": {"namespace": "ops", "name": "east-kc", "key": "kubeconfig"}
            },
            "nodePools": [
                {
                    "name": pool_name(i),
                    "nodeCount": 4,
                    "devices": [copy.deepcopy(GPU)],
                    "fallback": "DeviceCount" if i % 2 else "WholeNode",
                }
                for i in range(POOLS)
            ],
            "observation": {"mode": "Observed", "maxAge": "5m"},
        },
    }


def malformed_report() -> dict:
    """512 buckets of 8 undeclared ~58-character keys: one 318 KB message before."""
    return {
        "observedAt": "2026-11-29T11:59:00Z",
        "observedNodes": 4,
        "nodesByFreeDevices": [
            {"free": {f"{b:04d}-{k}-" + "k" * 50: 1 for k in range(8)}, "nodes": 1}
            for b in range(512)
        ],
    }


VALID_REPORT = {
    "observedAt": "2026-11-29T11:59:00Z",
    "observedNodes": 4,
    "nodesByFreeDevices": [{"free": {"gpu": 8}, "nodes": 4}],
}


def observed_pools(valid: int = 0) -> dict:
    """Every pool's Object; the first `valid` pools report well, the rest malformed."""
    pools = {
        f"pool-{pool_name(i)}": {
            "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
            "kind": "Object",
            "status": {
                "atProvider": {
                    "manifest": {
                        "kind": "PoolObservation",
                        "status": copy.deepcopy(VALID_REPORT if i < valid else malformed_report()),
                    }
                },
                "conditions": [{"type": "Ready", "status": "True", "reason": "Available"}],
            },
        }
        for i in range(POOLS)
    }
    agent_crd = {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "status": {"atProvider": {"manifest": {"kind": "CustomResourceDefinition"}}},
    }
    return {"agent-crd": agent_crd, **pools}


def test_64_pools_at_the_xrd_limits_give_a_condition_within_the_cap_without_cutting_it():
    # Three lists at once (observed, WholeNode, DeviceCount), names of 63 characters:
    # the longest CapacityObserved message the rule can build, before emit's last cap.
    observed = {name: observed_object(body) for name, body in observed_pools(valid=6).items()}
    decision = core.decide("east", cluster()["spec"], observed, {}, NOW, "v0.0.0")
    (capacity,) = [c for c in decision.conditions if c.type == "CapacityObserved"]
    assert len(capacity.message) <= MAX_MESSAGE, len(capacity.message)
    assert capacity.message.startswith(f"observed: {pool_name(0)}, {pool_name(1)}, ")
    assert " and 3 more; WholeNode fallback: " in capacity.message
    assert capacity.message.endswith(" and 26 more")  # 29 DeviceCount pools, 3 named
    assert all(len(e.message) <= MAX_MESSAGE for e in decision.events)
    rejected = [e for e in decision.events if "observation rejected" in e.message]
    assert len(rejected) == POOLS - 6  # one warning per rejected pool, none lost


def test_64_malformed_pools_through_run_function_write_no_message_over_the_cap():
    rsp = run(FunctionRunner(clock=lambda: NOW), request(cluster(), observed_pools()))
    status, reason, message = conditions(rsp)["CapacityObserved"]
    assert (status, reason) == ("False", "NoPoolObserved")
    assert len(message) <= MAX_MESSAGE
    warnings = [m for severity, m in events(rsp) if severity == "Warning"]
    assert len(warnings) == POOLS
    assert max(len(m) for m in warnings) <= MAX_MESSAGE
    assert all(m.endswith(" and 4094 more") for m in warnings)
