"""An InferenceCluster's own Ready: its provider config and pool Objects, not its capacity."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple

import pytest
from compose_inference_cluster.fn import FunctionRunner
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_testkit.wire import conditions, request, run

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
FRESH = "2026-11-29T11:59:00Z"
STALE = "2026-11-29T11:40:00Z"
OBJECT = "kubernetes.m.crossplane.io/v1alpha1"


def cluster(mode: str = "Observed", key: str = "kubeconfig") -> dict:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "east"},
        "spec": {
            "credentials": {"secretRef": {"namespace": "ops", "name": "east-kc", "key": key}},
            "nodePools": [
                {
                    "name": "h100",
                    "nodeCount": 2,
                    "devices": [
                        {"name": "gpu", "claim": "DRA", "driver": "gpu.nvidia.com", "count": 8}
                    ],
                }
            ],
            "observation": {"mode": mode, "maxAge": "5m"},
        },
    }


def pool_object(ready: str, observed_at: str = FRESH) -> dict:
    report = {
        "observedAt": observed_at,
        "observedNodes": 2,
        "nodesByFreeDevices": [{"free": {"gpu": 8}, "nodes": 2}],
    }
    return {
        "apiVersion": OBJECT,
        "kind": "Object",
        "status": {
            "atProvider": {"manifest": {"kind": "PoolObservation", "status": report}},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


PROVIDER_CONFIG = {"apiVersion": OBJECT, "kind": "ClusterProviderConfig"}
AGENT_SEEN = {
    "apiVersion": OBJECT,
    "kind": "Object",
    "status": {"atProvider": {"manifest": {"kind": "CustomResourceDefinition"}}},
}
AGENT_NOT_SEEN = {
    "apiVersion": OBJECT,
    "kind": "Object",
    "status": {"conditions": [{"type": "Synced", "status": "False"}]},
}
BASE = {"provider-config": PROVIDER_CONFIG}


class Case(NamedTuple):
    spec: str
    xr: dict  # the InferenceCluster
    observed: dict[str, dict]  # observed composed resources by name
    ready: bool  # the XR's own Ready
    capacity_observed: str | None  # CapacityObserved's status; None when not set


CASES = [
    Case(
        spec="provider config and every pool Object Ready is Ready",
        xr=cluster(),
        observed={**BASE, "agent-crd": AGENT_SEEN, "pool-h100": pool_object("True")},
        ready=True,
        capacity_observed="True",
    ),
    Case(
        spec="a pool Object that is not Ready keeps the cluster not Ready",
        xr=cluster(),
        observed={**BASE, "agent-crd": AGENT_SEEN, "pool-h100": pool_object("False")},
        ready=False,
        capacity_observed="True",
    ),
    Case(
        spec="a pool Object composed this pass is not Ready until observed Ready",
        xr=cluster(),
        observed={**BASE, "agent-crd": AGENT_SEEN},
        ready=False,
        capacity_observed="False",
    ),
    Case(
        spec="no agent: CapacityObserved False, the cluster is Ready for whole-node placement",
        xr=cluster(),
        observed={**BASE, "agent-crd": AGENT_NOT_SEEN},
        ready=True,
        capacity_observed="False",
    ),
    Case(
        spec="a stale report: CapacityObserved False, still Ready",
        xr=cluster(),
        observed={**BASE, "agent-crd": AGENT_SEEN, "pool-h100": pool_object("True", STALE)},
        ready=True,
        capacity_observed="False",
    ),
    Case(
        spec="Declared capacity is Ready with its provider config alone",
        xr=cluster(mode="Declared"),
        observed=BASE,
        ready=True,
        capacity_observed="False",
    ),
    Case(
        spec="the first pass composes the provider config: Ready for whole-node placement",
        xr=cluster(),
        observed={},
        ready=True,
        capacity_observed="False",
    ),
    Case(
        spec="an incomplete credentials reference decides nothing, observes nothing, is not Ready",
        xr=cluster(key=""),
        observed={},
        ready=False,
        capacity_observed=None,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.spec)
def test_ready_is_the_provider_config_and_pool_objects_not_the_capacity_data(case: Case):
    rsp = run(FunctionRunner(clock=lambda: NOW), request(case.xr, case.observed))
    assert rsp.desired.composite.ready == (fnv1.READY_TRUE if case.ready else fnv1.READY_FALSE)
    # An invalid spec decides nothing, so it says nothing about capacity either.
    assert conditions(rsp).get("CapacityObserved", (None,))[0] == case.capacity_observed
