"""`modelplane-agent` as a process: kubeconfig, list-watch, a status write, probes, the
per-node debug view, SIGTERM.

The API server is a small fake on 127.0.0.1 that serves a list per kind,
holds every watch open without events, and records patches.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml
from modelplane_testkit import agent_builders as t

LISTS = {
    "/api/v1/nodes": [t.node("n1")],
    "/apis/resource.k8s.io/v1/resourceslices": [
        t.resource_slice("n1", [t.device("g0"), t.device("g1")])
    ],
    "/apis/resource.k8s.io/v1/deviceclasses": [t.device_class("gpu.nvidia.com", "true")],
    "/apis/agent.modelplane.ai/v1alpha1/poolobservations": [
        t.pool_observation("a100", [("gpu", t.NVIDIA, "gpu.nvidia.com")])
    ],
}


class FakeApiServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, throttled_patches: int = 0, forbidden_watches: tuple[str, ...] = ()):
        """`throttled_patches`: how many status writes to answer 429 Retry-After: 2;
        `forbidden_watches`: list paths whose watches are answered 403."""
        super().__init__(("127.0.0.1", 0), Handler)
        self.patches: list[tuple[str, dict]] = []
        self.patch_times: list[float] = []  # monotonic, every PATCH, answered or not
        self.throttled = throttled_patches
        self.forbidden = forbidden_watches
        self.closing = threading.Event()


DISCOVERY = {
    "/apis/resource.k8s.io": {
        "kind": "APIGroup",
        "name": "resource.k8s.io",
        "versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"}],
    },
    "/apis/resource.k8s.io/v1": {
        "kind": "APIResourceList",
        "groupVersion": "resource.k8s.io/v1",
        "resources": [
            {"name": kind, "namespaced": kind == "resourceclaims"}
            for kind in ("resourceslices", "resourceclaims", "deviceclasses")
        ],
    },
}


class Handler(BaseHTTPRequestHandler):
    server: FakeApiServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if ("watch=true" in query or "watch=1" in query) and path in self.server.forbidden:
            status = {"kind": "Status", "code": 403, "reason": "Forbidden",
                      "message": f"{path.rsplit('/', 1)[-1]} is forbidden"}  # fmt: skip
            self._reply(403, json.dumps(status).encode())
            return
        if path in DISCOVERY:  # v1.35 without --runtime-config for v1alpha3
            self._reply(200, json.dumps(DISCOVERY[path]).encode())
            return
        if "watch=true" in query or "watch=1" in query:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            self.server.closing.wait(30)
            return
        body = json.dumps(
            {"kind": "List", "metadata": {"resourceVersion": "5"}, "items": LISTS.get(path, [])}
        ).encode()
        self._reply(200, body)

    def do_PATCH(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        patch = json.loads(self.rfile.read(length))
        self.server.patch_times.append(time.monotonic())
        if self.server.throttled > 0:
            self.server.throttled -= 1
            status = {"kind": "Status", "code": 429, "reason": "TooManyRequests",
                      "message": "too many requests, please try again later"}  # fmt: skip
            self._reply(429, json.dumps(status).encode(), {"Retry-After": "2"})
            return
        self.server.patches.append((self.path, patch))
        self._reply(200, json.dumps(patch).encode())

    def _reply(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch_json(port: int, path: str) -> object:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        return json.loads(response.read())


def probe(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def wait_for(check, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def write_kubeconfig(folder: Path, port: int) -> Path:
    """A kubeconfig pointing at the fake API server on 127.0.0.1:`port`, with a token."""
    kubeconfig = folder / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return kubeconfig


def test_the_agent_process_publishes_answers_probes_and_stops_on_sigterm(tmp_path: Path):
    api = FakeApiServer()
    threading.Thread(target=api.serve_forever, daemon=True).start()
    kubeconfig = write_kubeconfig(tmp_path, api.server_port)
    port = free_port()
    log = tmp_path / "agent.log"
    with log.open("w") as out:
        agent = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from modelplane_agent.main import cli; cli()",
                f"--kubeconfig={kubeconfig}",
                f"--listen=127.0.0.1:{port}",
                "--debug-nodes",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            ready = wait_for(lambda: probe(port, "/readyz") == 200)
            written = wait_for(lambda: bool(api.patches))
            healthy = probe(port, "/healthz")
            view = fetch_json(port, "/debug/nodes")
            agent.send_signal(signal.SIGTERM)
            code = agent.wait(timeout=10)
        finally:
            if agent.poll() is None:
                agent.kill()
            api.closing.set()
            api.shutdown()
    output = log.read_text()
    assert ready, output
    assert written, output
    assert healthy == 200, output
    assert code == 0, output
    path, patch = api.patches[0]
    assert path == (
        "/apis/agent.modelplane.ai/v1alpha1/poolobservations/a100/status"
        "?fieldManager=modelplane-agent"
    )
    assert patch["status"]["nodesByFreeDevices"] == [{"free": {"gpu": 2}, "nodes": 1}]
    assert view == {
        "nodes": {"n1": {"a100": {"free": {"gpu": 2}}}},
        "pools": {
            "a100": {"observedNodes": 1, "observing": {"status": "True", "reason": "Observed"}}
        },
    }
    assert "PoolObservation/a100 status written (change)" in output
    assert output.count("devicetaintrules not served by the API server") == 1, output


def test_the_agent_process_honours_retry_after_and_says_which_watch_is_forbidden(tmp_path: Path):
    claims = "/apis/resource.k8s.io/v1/resourceclaims"
    api = FakeApiServer(throttled_patches=1, forbidden_watches=(claims,))
    threading.Thread(target=api.serve_forever, daemon=True).start()
    kubeconfig = write_kubeconfig(tmp_path, api.server_port)
    port = free_port()
    log = tmp_path / "agent.log"

    def says_forbidden() -> bool:
        return any(
            c["type"] == "Current" and c["reason"] == "WatchFailing"
            for _, patch in api.patches
            for c in patch["status"]["conditions"]
        )

    with log.open("w") as out:
        agent = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from modelplane_agent.main import cli; cli()",
                f"--kubeconfig={kubeconfig}",
                f"--listen=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            failing = wait_for(says_forbidden)
            healthy = probe(port, "/healthz")
            agent.send_signal(signal.SIGTERM)
            code = agent.wait(timeout=10)
        finally:
            if agent.poll() is None:
                agent.kill()
            api.closing.set()
            api.shutdown()
    output = log.read_text()
    assert failing, output
    assert (healthy, code) == (200, 0), output
    assert api.patch_times[1] - api.patch_times[0] >= 2.0, output  # Retry-After: 2
    assert (
        "PoolObservation/a100 status written (change)" in output
        and "status write failed: 429 TooManyRequests: too many requests, please try again "
        "later; retrying in "
        in output
    ), output
    assert "resourceclaims watch failed (403 Forbidden); resuming in " in output, output
    condition = next(
        c
        for _, patch in api.patches
        for c in patch["status"]["conditions"]
        if c["type"] == "Current" and c["status"] == "False"
    )
    assert condition["message"].startswith("ResourceClaim watch failing since "), condition
    assert ": 403 Forbidden; the report is as of " in condition["message"], condition
