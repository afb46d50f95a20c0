"""A real workload cluster on 127.0.0.1 for the agent's live test: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler from `.tools/bin` (built by the e2e tooling).

No kubelet runs: nodes are Node objects whose status the test writes (Ready, with
capacity), and their devices are ResourceSlices the test publishes as a DRA driver
would. The real kube-scheduler allocates ResourceClaims against them and binds pods;
the controller manager creates claims from templates and cleans them up (its node
lifecycle controller is off, or it would taint the kubelet-less nodes).

The DRA features the oracle's states exercise are on in every component that reads
them (`FEATURE_GATES`): in v1.35 DRAAdminAccess is beta and on by default (named
anyway, so a change of default cannot silently turn it off), DRADeviceTaints,
DRADeviceTaintRules and DRAPartitionableDevices are alpha; DeviceTaintRule is only
served as resource.k8s.io/v1alpha3, enabled with --runtime-config.

Every process is started by this fixture and stopped by its PID; logs stay in the
test's temporary folder and a failing test prints their tails. A missing binary is a
failure naming it, never a skip.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
TOOLS = ROOT / ".tools" / "bin"
FEATURE_GATES = "--feature-gates=" + ",".join(
    f"{gate}=true"
    for gate in (
        "DRAAdminAccess",
        "DRADeviceTaints",
        "DRADeviceTaintRules",
        "DRAPartitionableDevices",
    )
)


def binary(name: str) -> str:
    path = TOOLS / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is missing: build the e2e tools (make e2e-tools)")
    return str(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(into: Path) -> None:
    """A CA, the API server's serving certificate, an admin client and the SA key."""
    into.mkdir(parents=True)
    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "2", "-subj", "/CN=agent-live-ca", cwd=into,
    )  # fmt: skip
    (into / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, subject, ext in (
        ("apiserver", "/CN=kube-apiserver", ["-extfile", "san.ext"]),
        ("admin", "/O=system:masters/CN=admin", []),
    ):
        openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", subject, cwd=into,
        )  # fmt: skip
        openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", *ext, cwd=into,
        )  # fmt: skip
    openssl("genrsa", "-out", "sa.key", "2048", cwd=into)
    openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=into)


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Cluster:
    workdir: Path
    kubeconfig: Path
    processes: list[Process] = field(default_factory=list)

    free_port = staticmethod(free_port)

    def start(self, name: str, command: list[str]) -> Process:
        log = self.workdir / f"{name}.log"
        out = log.open("w")
        popen = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        process = Process(name, popen, log)
        self.processes.append(process)
        return process

    def wait(self, process: Process, ready: Callable[[], bool], seconds: float = 90) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if process.popen.poll() is not None:
                pytest.fail(f"{process.name} exited {process.popen.returncode}:\n{process.tail()}")
            if ready():
                return
            time.sleep(0.2)
        pytest.fail(f"{process.name} not ready after {seconds}s:\n{process.tail()}")

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.popen.poll() is None:
                process.popen.terminate()
                try:
                    process.popen.wait(10)
                except subprocess.TimeoutExpired:
                    process.popen.kill()
                    process.popen.wait()

    def report(self) -> str:
        return "\n".join(f"--- {p.name} ({p.log})\n{p.tail(15)}" for p in self.processes)


def _apiserver_ready(port: int, pki: Path) -> Callable[[], bool]:
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))

    def ready() -> bool:
        try:
            url = f"https://127.0.0.1:{port}/readyz"
            with urllib.request.urlopen(url, context=context, timeout=2) as response:
                return response.read() == b"ok"
        except OSError:
            return False

    return ready


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("agent-live")
    pki = workdir / "pki"
    make_pki(pki)
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "live",
                        "cluster": {
                            "server": f"https://127.0.0.1:{api_port}",
                            "certificate-authority": str(pki / "ca.crt"),
                        },
                    }
                ],
                "users": [
                    {
                        "name": "admin",
                        "user": {
                            "client-certificate": str(pki / "admin.crt"),
                            "client-key": str(pki / "admin.key"),
                        },
                    }
                ],
                "contexts": [{"name": "live", "context": {"cluster": "live", "user": "admin"}}],
                "current-context": "live",
            }
        )
    )
    running = Cluster(workdir, kubeconfig)
    try:
        etcd = running.start(
            "etcd",
            [
                binary("etcd"),
                f"--data-dir={workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",
            ],
        )
        running.wait(etcd, lambda: listening(etcd_port))
        apiserver = running.start(
            "kube-apiserver",
            [
                binary("kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--authorization-mode=RBAC",
                "--endpoint-reconciler-type=none",
                "--enable-priority-and-fairness=false",
                FEATURE_GATES,
                "--runtime-config=resource.k8s.io/v1alpha3=true",
            ],
        )
        running.wait(apiserver, _apiserver_ready(api_port, pki), 120)
        common = [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            FEATURE_GATES,
        ]
        running.start(
            "kube-controller-manager",
            [
                binary("kube-controller-manager"),
                *common,
                f"--secure-port={free_port()}",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                "--controllers=*,-node-lifecycle-controller",
            ],
        )
        running.start(
            "kube-scheduler", [binary("kube-scheduler"), *common, f"--secure-port={free_port()}"]
        )
        yield running
    finally:
        running.stop()


@dataclass
class ApiServer:
    """The cluster's kube-apiserver, to stop by its PID and start again as a restart does."""

    cluster: Cluster

    def _running(self) -> Process:
        return next(
            p
            for p in reversed(self.cluster.processes)
            if p.name.startswith("kube-apiserver") and p.popen.poll() is None
        )

    def stop(self) -> list[str]:
        """SIGKILL to its PID, as a crash (SIGTERM drains requests for tens of seconds);
        returns its command line, to start it with."""
        process = self._running()
        process.popen.kill()
        process.popen.wait(10)
        return list(process.popen.args)

    def start(self, command: list[str]) -> Process:
        """The same command: the same port, etcd and certificates. Waits until ready."""
        port = int(next(a for a in command if a.startswith("--secure-port=")).partition("=")[2])
        starts = sum(p.name.startswith("kube-apiserver") for p in self.cluster.processes)
        process = self.cluster.start(f"kube-apiserver-{starts + 1}", command)
        self.cluster.wait(process, _apiserver_ready(port, self.cluster.workdir / "pki"), 120)
        return process


@pytest.fixture
def apiserver(cluster: Cluster) -> ApiServer:
    return ApiServer(cluster)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    running = getattr(item, "funcargs", {}).get("cluster")
    if report.failed and running is not None:
        report.sections.append(("workload cluster logs", running.report()))
