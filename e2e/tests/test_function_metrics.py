"""Where the harness's functions serve their metrics, and how the demo reads and shows them.

The harness runs a function's processes with metrics when, and only when,
the DeploymentRuntimeConfig asks for them (METRICS_ADDRESS on Crossplane's
runtime container, as deploy/control-plane/functions.yaml sets it); the demo
prints a `curl` per process and sums `modelplane_placements_total` over the
processes, checked against the replicas each cluster holds. A function
started by the harness's own command line serves /metrics that the demo's
scrape reads.
"""

from __future__ import annotations

import sys
from collections import Counter
from functools import partial
from pathlib import Path

import pytest
import yaml
from modelplane_common import metrics
from modelplane_devtools.paths import ROOT
from modelplane_devtools.processes import Supervisor, free_port, listening
from modelplane_e2e import functions, pki, runtime
from modelplane_e2e.demo import fleet, scraped, session
from modelplane_e2e.stack import Installed, Stack
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

FUNCTIONS_YAML = ROOT / "deploy" / "control-plane" / "functions.yaml"
(SHIPPED,) = [
    d
    for d in yaml.safe_load_all(FUNCTIONS_YAML.read_text())
    if d["kind"] == "DeploymentRuntimeConfig"
]


def _config(env: list[dict], container: str = functions.RUNTIME_CONTAINER) -> dict:
    containers = [{"name": container, "env": env}]
    return {
        "spec": {"deploymentTemplate": {"spec": {"template": {"spec": {"containers": containers}}}}}
    }


@pytest.mark.parametrize(
    ("config", "asks"),
    [
        (SHIPPED, True),
        (_config([{"name": "METRICS_ADDRESS", "value": ":9090"}]), True),
        (_config([]), False),
        (_config([{"name": "METRICS_ADDRESS", "value": ""}]), False),
        (_config([{"name": "METRICS_ADDRESS", "value": ":8080"}], container="sidecar"), False),
        ({"spec": {}}, False),
        ({}, False),
    ],
    ids=[
        "the shipped runtime config asks for metrics",
        "METRICS_ADDRESS on the runtime container asks, whatever its port",
        "no METRICS_ADDRESS asks none",
        "an empty METRICS_ADDRESS asks none (the function serves none)",
        "METRICS_ADDRESS on another container asks none",
        "a config without a template asks none",
        "an empty config asks none",
    ],
)
def test_the_runtime_config_decides_whether_the_functions_serve_metrics(config, asks):
    assert functions.asks_for_metrics(config) is asks


@pytest.mark.parametrize(
    ("metrics_address", "expected"),
    [("127.0.0.2:4321", ["--metrics-address=127.0.0.2:4321"]), (None, [])],
    ids=["a metrics address becomes the function's flag", "no address, no flag"],
)
def test_the_workspace_source_serves_metrics_only_where_asked(metrics_address, expected):
    command = functions.PackageSource().serve("fn", "127.0.0.2:9443", Path("/c"), metrics_address)
    assert [w for w in command if w.startswith("--metrics")] == expected


def _supervised(tmp_path: Path, named: dict[str, list[str]]) -> Supervisor:
    """Processes that exit at once, each started with its arguments (kept on its Popen)."""
    supervisor = Supervisor(tmp_path / "logs")
    for name, args in named.items():
        supervisor.start(name, [sys.executable, "-c", "pass", *args]).popen.wait()
    return supervisor


FN = "modelplane-ai-compose-model-deployment"
PROCESSES = {
    f"{FN}-1": ["--address=127.0.0.2:9443", "--metrics-address=127.0.0.2:4321"],
    FN: ["--address=127.0.0.1:9443", "--metrics-address=127.0.0.1:4321"],
    f"{FN}-dns": ["--port=53", "--record=x=127.0.0.1"],
    "modelplane-ai-compose-model-replica": ["--metrics-address=127.0.0.1:5555"],
    "workload-0-modelplane-agent": ["--listen=127.0.0.1:8081"],
}


def test_a_functions_metrics_addresses_are_its_pods_flags_in_pod_order(tmp_path):
    processes = _supervised(tmp_path, PROCESSES).processes
    assert functions.metrics_addresses(processes, FN) == ["127.0.0.1:4321", "127.0.0.2:4321"]
    assert functions.metrics_addresses(processes, "modelplane-ai-compose-inference-cluster") == []


def test_the_banner_prints_a_curl_for_each_function_process_and_each_agent(tmp_path):
    running = Stack(tmp_path, _supervised(tmp_path, PROCESSES))
    running.installed = Installed("fleet", "provider", [], {FN: "dns://x", "other": "dns://y"})
    demo = fleet.Demo(running, workloads=[], deployments=[])
    lines = session._function_metrics(demo)
    assert lines == [
        f"  curl -s http://127.0.0.1:4321/metrics | grep '^modelplane_'   # {FN}, pod 1 of 2",
        f"  curl -s http://127.0.0.2:4321/metrics | grep '^modelplane_'   # {FN}, pod 2 of 2",
    ]


def test_placements_are_summed_over_every_process_by_cluster_and_change():
    before = generate_latest(metrics.REGISTRY).decode()
    decided = metrics.Decided(
        placements=(("gpu-east", "Placed"), ("gpu-east", "Placed"), ("gpu-edge", "Moved"))
    )
    metrics.record("compose-model-deployment", decided)
    after = generate_latest(metrics.REGISTRY).decode()
    # Two processes: one scraped before the pass, one after it (the same registry here).
    grown = scraped.placements([after, after]) - scraped.placements([before, before])
    assert grown == Counter({("gpu-east", "Placed"): 4, ("gpu-edge", "Moved"): 2})


@pytest.mark.parametrize(
    ("counted", "replicas_on", "short"),
    [
        ({("a", "Placed"): 2}, ["a", "a"], []),
        ({("a", "Placed"): 1, ("a", "Moved"): 1}, ["a", "a"], []),
        ({("a", "Placed"): 5}, ["a"], []),
        ({("a", "Placed"): 1}, ["a", "a"], ["a: 2 replicas, 1 counted Placed or Moved"]),
        ({("a", "Reshaped"): 3}, ["a"], ["a: 1 replicas, 0 counted Placed or Moved"]),
        ({("b", "Placed"): 1}, ["a"], ["a: 1 replicas, 0 counted Placed or Moved"]),
        ({}, [], []),
    ],
    ids=[
        "one placement counted per replica is enough",
        "a replica moved onto a cluster arrived there",
        "a pass repeated on a stale view counts again, never too few",
        "fewer counted than the cluster holds is short",
        "a reshape keeps a replica where it was placed: not an arrival",
        "a placement counted on another cluster does not count here",
        "no replicas, nothing owed",
    ],
)
def test_a_cluster_is_short_when_fewer_arrivals_were_counted_than_it_holds(
    counted, replicas_on, short
):
    assert scraped.uncounted(Counter(counted), replicas_on) == short


def test_a_function_started_as_the_harness_starts_it_serves_metrics_the_demo_scrapes(tmp_path):
    ca = pki.new_ca(tmp_path / "ca", "test-ca")
    certs = runtime.issue(ca, tmp_path / "certs", "fn")
    grpc_port, metrics_port = free_port(), free_port()
    command = functions.PackageSource().serve(
        "compose-model-deployment",
        f"127.0.0.1:{grpc_port}",
        certs.directory,
        f"127.0.0.1:{metrics_port}",
    )
    supervisor = Supervisor(tmp_path / "logs")
    process = supervisor.start("compose-model-deployment", command)
    try:
        supervisor.wait_until(process, partial(listening, metrics_port), "serving metrics")
        text = scraped.scrape(f"127.0.0.1:{metrics_port}")
    finally:
        supervisor.stop()
    assert "modelplane_placements" in {f.name for f in text_string_to_metric_families(text)}
    assert scraped.placements([text]) == Counter()  # served, nothing placed yet
