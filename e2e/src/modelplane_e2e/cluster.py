"""A running Kubernetes cluster of the harness: its API server and what reaches it.

`stack.start_cluster` makes one; the kwok and LWS controllers, the agent's live
tests and the fault tests are handed one. A cluster's kube-apiserver can be
killed by its PID and started again with the same command (`ApiServer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from modelplane_devtools.processes import Process, Supervisor

from modelplane_e2e import pki
from modelplane_e2e.kube import Kube


@dataclass
class ApiServer:
    """A cluster's kube-apiserver, started by the Supervisor with one fixed command."""

    supervisor: Supervisor
    name: str
    command: tuple[str, ...]
    kube: Kube
    process: Process | None = None

    def start(self, timeout: float = 120) -> Process:
        """Start it (again: the same port, etcd and certificates) and wait until ready."""
        assert self.process is None, f"{self.name} is already running"
        self.process = self.supervisor.start(self.name, self.command)
        self.supervisor.wait_until(self.process, self.ready, "ready", timeout)
        return self.process

    def kill(self) -> int:
        """SIGKILL to its PID, as a crash (SIGTERM would drain requests for tens of
        seconds); returns its exit status. Its log continues when it starts again."""
        assert self.process is not None, f"{self.name} is not running"
        code = self.supervisor.kill_process(self.process)
        self.process = None
        return code

    def ready(self) -> bool:
        return self.kube.kubectl("get", "--raw=/readyz", check=False) == "ok"


@dataclass
class Cluster:
    """One Kubernetes API server with its etcd and controllers."""

    name: str
    kube: Kube
    server: str
    kubeconfig: Path  # the admin's, every certificate embedded
    workdir: Path  # its own folder: etcd's data, its certificates, the kubeconfig
    ca: Path  # the CA kube-apiserver's serving certificate chains to
    serving: pki.KeyPair  # kube-apiserver's serving certificate, for a proxy to present
    supervisor: Supervisor  # runs its processes, and those a test starts beside them
    apiserver: ApiServer
