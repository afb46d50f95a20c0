"""The example clusters through the real `crossplane composition render`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import yaml
from modelplane_common.timeutil import format_time, parse_time
from modelplane_devtools import render
from modelplane_testkit.rendered import by_kind, composite, condition, results

CASES = {c["name"]: c for c in render.example_cases()}
OBSERVED_FIELDS = {"observedAt", "observedNodes", "nodesByFreeDevices"}


def render_case(functions, name):
    return render.render_case(functions, CASES[name])


def gpu_pools(xr):
    return {p["name"]: p for p in xr["status"]["gpuPools"]}


def test_observed_cluster_publishes_a_histogram_for_each_pool(functions):
    rendered = render_case(functions, "cluster-observed")
    pools = gpu_pools(composite(rendered))
    assert pools["h100"]["nodesByFreeDevices"] == [
        {"free": {"gpu": 8}, "nodes": 10},
        {"free": {"gpu": 4}, "nodes": 3},
        {"free": {"gpu": 0}, "nodes": 2},
    ]
    assert (pools["h100"]["nodes"], pools["h100"]["observedNodes"]) == (20, 16)
    assert pools["l40s"]["nodesByFreeDevices"][0] == {"free": {"gpu": 4, "nic": 2}, "nodes": 4}
    assert condition(composite(rendered), "CapacityObserved")["status"] == "True"
    objects = {o["metadata"]["name"]: o for o in by_kind(rendered, "Object")}
    assert set(objects) == {"gpu-east-agent-crd", "gpu-east-pool-h100", "gpu-east-pool-l40s"}
    assert len(by_kind(rendered, "ClusterProviderConfig")) == 1


def test_a_pools_smallest_pod_reaches_its_pool_observation(functions):
    rendered = render_case(functions, "cluster-observed")
    objects = {o["metadata"]["name"]: o for o in by_kind(rendered, "Object")}
    specs = {
        pool: objects[f"gpu-east-pool-{pool}"]["spec"]["forProvider"]["manifest"]["spec"]
        for pool in ("h100", "l40s")
    }
    assert specs["h100"]["minPodRequests"] == {"cpu": "8", "memory": "64Gi"}
    assert "minPodRequests" not in specs["l40s"]


def test_declared_cluster_publishes_no_observed_fields(functions):
    rendered = render_case(functions, "cluster-declared")
    for pool in gpu_pools(composite(rendered)).values():
        assert not OBSERVED_FIELDS & pool.keys()
        assert pool["nodes"] == 4
    assert by_kind(rendered, "Object") == []
    assert condition(composite(rendered), "CapacityObserved")["reason"] == "Declared"


def test_malformed_observation_falls_back_with_a_warning(functions):
    rendered = render_case(functions, "cluster-malformed-observation")
    pools = gpu_pools(composite(rendered))
    assert not OBSERVED_FIELDS & pools["h100"].keys()
    warnings = [r["message"] for r in results(rendered) if r.get("severity") == "Warning"]
    assert any(
        "pool h100" in m
        and "nodesByFreeDevices[0].free.gpu: above the 8 declared per node (got 12)" in m
        for m in warnings
    ), warnings
    message = condition(composite(rendered), "CapacityObserved")["message"]
    assert "l4 (observation is older than 5m)" in message


@pytest.mark.parametrize(
    ("said", "verdict"),
    [
        pytest.param({"pool-h100": 50, "pool-l40s": 400}, True, id="the latest word within maxAge"),
        pytest.param({"pool-h100": 400, "pool-l40s": 360}, False, id="every word older"),
    ],
)
def test_the_cluster_publishes_its_verdict_on_the_agents_replica_reports(functions, said, verdict):
    """Each pool heartbeat carries the agent's replicasCurrentAt; the cluster publishes
    whether the latest is within maxAge (5m here), with the lease every reader trusts it
    under, and the XRD declares both (validated offline)."""
    now = datetime.now(UTC).replace(microsecond=0)
    case = CASES["cluster-observed"]
    text = render.fill_time_tokens((render.ROOT / case["observed"]).read_text(), now)
    observed = [d for d in yaml.safe_load_all(text) if d]
    for doc in observed:
        name = doc["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
        if name in said:
            status = doc["status"]["atProvider"]["manifest"]["status"]
            status["replicasCurrentAt"] = format_time(now - timedelta(seconds=said[name]))
    rendered = functions.render(render.ROOT / case["xr"], render.ROOT / case["composition"],
                                observed=observed)  # fmt: skip
    xr = composite(rendered)
    agent = xr["status"]["agent"]
    assert (agent["present"], agent["replicasCurrent"]) == (True, verdict)
    lease = parse_time(agent["vouchedUntil"]) - now
    assert timedelta(minutes=29) < lease <= timedelta(minutes=31)
    assert all(p["current"] is True for p in xr["status"]["gpuPools"])
    xrd = render.ROOT / "apis" / "inferencecluster" / "definition.yaml"
    done = render.validate([xrd], [xr])
    assert done.returncode == 0, done.stdout + done.stderr
