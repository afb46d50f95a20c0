"""The agent's image, as `make packages` builds it and deploy/agent runs it.

The image (dist/images/modelplane-agent.tar) is unpacked and its entrypoint
started under bubblewrap the way a kubelet would start the Deployment's
container: read-only root, the image's non-root user, no capabilities, the
Deployment's arguments with the listen address moved to a free port on
127.0.0.1, and a kubeconfig (bound read-only, as a mounted Secret) whose API
server does not answer. The agent then keeps retrying its watches with
backoff and stays alive but not ready: /healthz answers 200 (the liveness
probe must not restart an agent that waits for its API server), /readyz 503.
Tests in this module run in file order; the last one stops the agent.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from modelplane_agent.main import cli
from modelplane_devtools import artifacts, packages, render, version

ROOT = render.ROOT
AGENT = "modelplane-agent"
WORKSPACE_VERSION = version.version()
DEPLOYMENT = yaml.safe_load((ROOT / "deploy" / "agent" / "deployment.yaml").read_text())
POD = DEPLOYMENT["spec"]["template"]["spec"]
(CONTAINER,) = POD["containers"]
KUBECONFIG = "/tmp/kubeconfig"  # where the sandbox sees the test's kubeconfig
STARTUP_SECONDS = 90  # importing the agent on a loaded 2-core machine takes a few seconds


def _listen_default() -> str:
    (listen,) = [param for param in cli.params if param.name == "listen"]
    return str(listen.default)


LISTEN_PORT = int(_listen_default().rpartition(":")[2])


@pytest.fixture(scope="module")
def agent_image() -> Path:
    return packages.image(AGENT)


@pytest.fixture(scope="module")
def agent_runtime(agent_image) -> Iterator[packages.Runtime]:
    root = packages.world_readable_tempdir("modelplane-agent-image-")
    try:
        yield packages.unpack(agent_image, root / AGENT)
    finally:
        shutil.rmtree(root)


def _fully_qualified(reference: str) -> str:
    """An image reference as a container runtime resolves it (and skopeo records it).

    A first component that names no registry (no "." or ":", not localhost)
    is a repository on docker.io; the Deployment's short name is resolved so,
    and a kubelet finds the loaded archive under that full name.
    """
    first, _, _ = reference.partition("/")
    if "." in first or ":" in first or first == "localhost":
        return reference
    return f"docker.io/{reference}"


# ---------------------------------------------------------------- the image


def test_the_image_runs_modelplane_agent_as_a_non_root_user_on_its_listen_port(agent_image):
    config = packages.image_config(agent_image)["config"]
    assert config["Entrypoint"] == [f"/venv/bin/{AGENT}"]
    assert not config.get("Cmd")
    uid, _, gid = config["User"].partition(":")
    assert uid.isdigit() and int(uid) != 0, config["User"]
    assert gid.isdigit() and int(gid) != 0, config["User"]
    assert list(config["ExposedPorts"]) == [f"{LISTEN_PORT}/tcp"]
    assert config["Labels"]["org.opencontainers.image.version"] == WORKSPACE_VERSION
    assert config["Labels"]["org.opencontainers.image.licenses"] == "Apache-2.0"


def test_the_image_is_the_functions_debian_base_plus_the_agents_venv(agent_image):
    agent_layers = [layer["digest"] for layer in packages.image_manifest(agent_image)["layers"]]
    function = packages.image(render.FUNCTIONS[0])
    function_layers = [layer["digest"] for layer in packages.image_manifest(function)["layers"]]
    assert len(agent_layers) == 2, "Debian base, the agent's venv"
    assert agent_layers[0] == function_layers[0], "the same base layer as the functions"
    assert agent_layers[1] != function_layers[1]


def test_the_deployment_runs_the_image_under_its_tag_user_and_port(agent_image):
    config = packages.image_config(agent_image)["config"]
    assert packages.image_tags(agent_image) == [_fully_qualified(CONTAINER["image"])]
    uid, _, gid = config["User"].partition(":")
    assert (POD["securityContext"]["runAsUser"], POD["securityContext"]["runAsGroup"]) == (
        int(uid),
        int(gid),
    )
    assert [port["containerPort"] for port in CONTAINER["ports"]] == [LISTEN_PORT]
    assert f"--listen=0.0.0.0:{LISTEN_PORT}" in CONTAINER["args"]


def test_the_deployments_image_tag_is_the_workspace_version():
    project = tomllib.loads((ROOT / "agent" / "pyproject.toml").read_text())["project"]
    assert project["version"] == WORKSPACE_VERSION
    assert CONTAINER["image"] == artifacts.reference(artifacts.AGENT, f"v{WORKSPACE_VERSION}")


# What only the functions need (the `function` extra of modelplane-common): about
# 22 MB the agent's image used to carry because modelplane_common.outcome imported it.
# (structlog the agent carries: its JSON log lines, design/tooling.md.)
FUNCTION_ONLY = {
    "crossplane-function-sdk-python",
    "grpcio",
    "grpcio-reflection",
    "protobuf",
}


def test_the_venv_carries_no_function_sdk_grpcio_or_protobuf(agent_runtime):
    site = agent_runtime.rootfs / "venv" / "lib" / "python3.11" / "site-packages"
    installed = {
        p.name.removesuffix(".dist-info").rpartition("-")[0].replace("_", "-").lower()
        for p in site.glob("*.dist-info")
    }
    wanted = {"lightkube", "prometheus-client", "modelplane-common", "structlog"}
    assert wanted <= installed, sorted(installed)
    assert installed & FUNCTION_ONLY == set()


def test_without_any_configuration_it_exits_naming_the_missing_kubeconfig(agent_runtime):
    # Outside a cluster (no service account token) and with no kubeconfig.
    done = subprocess.run(
        agent_runtime.command(["--listen", f"127.0.0.1:{render._free_port()}"]),
        capture_output=True,
        text=True,
        timeout=STARTUP_SECONDS,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "modelplane-agent: no Kubernetes configuration: not in a cluster (no "
        "/var/run/secrets/kubernetes.io/serviceaccount/token) and no kubeconfig at "
        "~/.kube/config; pass --kubeconfig"
    ]


# ---------------------------------------------------------------- the agent, running


@dataclass
class Running:
    runtime: packages.Runtime
    started: packages.Started
    port: int
    log: Path


def _kubeconfig(server: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "unreachable", "cluster": {"server": server}}],
            "users": [{"name": "agent", "user": {"token": "not-checked"}}],
            "contexts": [
                {"name": "unreachable", "context": {"cluster": "unreachable", "user": "agent"}}
            ],
            "current-context": "unreachable",
        }
    )


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _wait_for_http(running: Running) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if running.started.process.poll() is not None:
            raise AssertionError(f"the agent exited: {running.log.read_text()}")
        try:
            _get(running.port, "/healthz")
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"no answer on :{running.port}: {running.log.read_text()}")


@pytest.fixture(scope="module")
def running(agent_runtime, tmp_path_factory) -> Iterator[Running]:
    scratch = packages.world_readable_tempdir("modelplane-agent-run-")
    kubeconfig = scratch / "kubeconfig"
    # Nothing listens there: the port was free a moment ago.
    kubeconfig.write_text(_kubeconfig(f"https://127.0.0.1:{render._free_port()}"))
    kubeconfig.chmod(0o644)
    port = render._free_port()
    log = tmp_path_factory.mktemp("agent") / "agent.log"
    args = [arg for arg in CONTAINER["args"] if not arg.startswith("--listen=")]
    started = packages.start(
        agent_runtime,
        [*args, f"--listen=127.0.0.1:{port}", f"--kubeconfig={KUBECONFIG}"],
        log=log,
        files={KUBECONFIG: kubeconfig},
    )
    running = Running(agent_runtime, started, port, log)
    try:
        _wait_for_http(running)
        yield running
    finally:
        if started.process.poll() is None:
            started.terminate()
        shutil.rmtree(scratch)


def test_runs_as_the_image_user_with_no_capabilities_on_a_read_only_root(running):
    confinement = packages.Confinement.of(running.started.pid)
    assert running.runtime.uid != 0
    assert confinement.uids == (running.runtime.uid,) * 4
    assert confinement.effective_capabilities == 0
    assert "ro" in confinement.root_options, confinement.root_options


def test_is_alive_but_not_ready_while_no_api_server_answers(running):
    assert _get(running.port, "/healthz") == (200, "ok\n"), running.log.read_text()
    assert _get(running.port, "/readyz") == (503, "not synced\n"), running.log.read_text()


def test_counts_and_logs_each_failed_watch_naming_the_kind_and_error(running):
    deadline = time.monotonic() + 30
    while "nodes watch failed" not in running.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    log = running.log.read_text()
    assert any(
        r["level"] == "warning" and r["msg"].startswith("nodes watch failed (ConnectError: ")
        for r in _records(log)
    ), log
    status, metrics = _get(running.port, "/metrics")
    assert status == 200
    assert 'modelplane_agent_watch_restarts_total{cause="error",kind="nodes"}' in metrics
    assert 'modelplane_agent_synced{kind="nodes"} 0.0' in metrics


def test_exits_cleanly_on_sigterm(running):
    assert running.started.terminate() == 0, running.log.read_text()
    log = running.log.read_text()
    assert any(r["level"] == "info" and r["msg"] == "stopping" for r in _records(log)), log


def _records(log: str) -> list[dict]:
    """The agent's log lines, in the JSON format its Deployment asks for (--log-format)."""
    return [json.loads(line) for line in log.splitlines() if line.strip()]
