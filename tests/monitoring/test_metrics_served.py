"""A function serves its metrics on --metrics-address: the real command, on 127.0.0.1.

compose-inference-cluster is started as Crossplane's runtime starts it (its
console script), serving gRPC and metrics on free loopback ports; one
RunFunction for examples/clusters/gpu-north.yaml goes through it, and
/metrics, parsed with prometheus_client's own parser, must show that call
(result, latency, bytes) and what the pass decided (a verdict per pool of
the cluster, its conditions).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import yaml
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane_common import metrics
from modelplane_testkit.wire import request
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
FUNCTION = "compose-inference-cluster"
CLUSTER = yaml.safe_load((ROOT / "examples" / "clusters" / "gpu-north.yaml").read_text())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(port: int, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"{FUNCTION} exited with {process.returncode}"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{FUNCTION} did not listen on {port} within {timeout}s")


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[int, int]]:
    """The function serving gRPC and metrics: (grpc port, metrics port)."""
    grpc_port, metrics_port = _free_port(), _free_port()
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / FUNCTION),
            "--insecure",
            f"--address=127.0.0.1:{grpc_port}",
            f"--metrics-address=127.0.0.1:{metrics_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(grpc_port, process)
        _wait_for(metrics_port, process)
        yield grpc_port, metrics_port
    finally:
        process.terminate()
        process.wait(timeout=30)


def _scrape(port: int) -> dict[tuple[str, frozenset], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{metrics.PATH}", timeout=10) as rsp:
        text = rsp.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _sum(samples: dict, name: str, **labels: str) -> float:
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def test_a_call_and_its_decisions_are_scraped_from_the_metrics_port(served):
    grpc_port, metrics_port = served
    req = request(CLUSTER)
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        rsp = grpcv1.FunctionRunnerServiceStub(channel).RunFunction(req, timeout=30)
    samples = _scrape(metrics_port)

    ok = {"function": FUNCTION, "result": "ok"}
    assert _sum(samples, "modelplane_function_requests_total", **ok) == 1
    assert _sum(samples, "modelplane_function_request_duration_seconds_count") == 1
    assert _sum(samples, "modelplane_function_request_bytes_sum") == req.ByteSize()
    assert _sum(samples, "modelplane_function_response_bytes_sum") == rsp.ByteSize()
    pools = len(CLUSTER["spec"]["nodePools"])
    assert _sum(samples, "modelplane_pool_verdicts_total", cluster="gpu-north") == pools
    assert _sum(samples, "modelplane_function_conditions_total", function=FUNCTION) == len(
        rsp.conditions
    )
    assert _sum(samples, "process_resident_memory_bytes") > 0
