"""The real agent on the workload cluster: installed as the README says, run as a process.

`install` does what README's install step 3 does, from the repository:
`kubectl apply -k deploy/agent` (the agent's CRDs, the Namespace, the
ServiceAccount, the ClusterRole and its binding, the Deployment). kwok plays
kubelet on the workload cluster and runs no container, so the Deployment's
pod reads Running once bound to a fake node while nothing executes in it; in
its place `modelplane-agent` from
this workspace's virtualenv runs as a process (`Agent`) with the container's
arguments as the API server holds them (only `--listen` moved to a free port
on 127.0.0.1, and `--kubeconfig` added), and with the service account's
identity: its kubeconfig holds a token the API server issued for
`modelplane-system/modelplane-agent`, so the agent can read and write exactly
what the ClusterRole grants, as in a cluster. No `--max-age`: its heartbeats
follow the `spec.maxAge` compose-inference-cluster writes on each
PoolObservation.

`Agent.stop()` and `Agent.start()` stop it by its PID and start it again,
as a crash or a rescheduled pod would; its log (one file across restarts)
stays in the stack's log folder, and a failing e2e test shows its tail.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml
from modelplane_devtools.paths import ROOT
from modelplane_devtools.processes import Process, Supervisor, free_port

from modelplane_e2e import install_steps
from modelplane_e2e.kube import Kube

KUSTOMIZATION = ROOT / "deploy" / "agent"
NAMESPACE = "modelplane-system"
SERVICE_ACCOUNT = "modelplane-agent"
DEPLOYMENT = "modelplane-agent"
CRDS = ("poolobservations.agent.modelplane.ai", "replicaobservations.agent.modelplane.ai")
# The suite's InferenceClusters' spec.observation.maxAge, which reaches the agent on
# every PoolObservation (pool heartbeats every 9-12 s, each carrying replicasCurrentAt;
# replica reports are written only when they change).
MAX_AGE = "1m"


class AgentMissing(RuntimeError):
    pass


def command() -> Path:
    """The workspace's `modelplane-agent` console script (installed by `uv sync`)."""
    path = Path(sys.executable).parent / "modelplane-agent"
    if not path.is_file():
        raise AgentMissing(f"{path} is missing: run `uv sync --frozen` (the agent package)")
    return path


@dataclass(frozen=True)
class Installed:
    kubeconfig: Path  # the ServiceAccount's identity
    args: tuple[str, ...]  # the Deployment's container arguments, as applied


def install(kube: Kube, workdir: Path, name: str = DEPLOYMENT) -> Installed:
    """`kubectl apply -k deploy/agent`, as README step 3; then the agent's identity."""
    install_steps.run(kube, install_steps.AGENT)
    kube.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{c}" for c in CRDS)
    )
    deployment = kube.get("deployment", DEPLOYMENT, NAMESPACE)
    assert deployment is not None, f"kubectl apply -k {KUSTOMIZATION} made no {DEPLOYMENT}"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return Installed(identity(kube, workdir, name), tuple(container.get("args") or ()))


def identity(kube: Kube, workdir: Path, name: str = DEPLOYMENT) -> Path:
    """A kubeconfig holding a token the API server issued for the agent's ServiceAccount."""
    token = kube.kubectl(
        "create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE, "--duration=24h"
    ).strip()
    admin = yaml.safe_load(kube.kubeconfig.read_text())
    config = {
        **admin,
        "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
        "contexts": [
            {
                "name": SERVICE_ACCOUNT,
                "context": {
                    "cluster": admin["clusters"][0]["name"],
                    "user": SERVICE_ACCOUNT,
                    "namespace": NAMESPACE,
                },
            }
        ],
        "current-context": SERVICE_ACCOUNT,
    }
    path = workdir / f"{name}.kubeconfig"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@dataclass
class Agent:
    """One `modelplane-agent` process at a time, started and stopped by its PID; `name`
    names its process and log (one agent per workload cluster)."""

    supervisor: Supervisor
    installed: Installed
    process: Process | None = None
    port: int = 0
    name: str = DEPLOYMENT

    def start(self, timeout: float = 120) -> Agent:
        """Start it and wait until it is ready (every kind listed, so it publishes)."""
        assert self.process is None, "the agent is already running"
        self.port = free_port()
        self.process = self.supervisor.start(
            self.name,
            [
                command(),
                f"--kubeconfig={self.installed.kubeconfig}",
                *(a for a in self.installed.args if not a.startswith("--listen=")),
                f"--listen=127.0.0.1:{self.port}",
            ],
        )
        self.supervisor.wait_until(self.process, self.ready, "ready (every kind listed)", timeout)
        return self

    def stop(self) -> int:
        """SIGTERM by PID; returns the exit status (0 for a clean stop)."""
        assert self.process is not None, "the agent is not running"
        code = self.supervisor.stop_process(self.process)
        self.process = None
        return code

    def ready(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.port}/readyz"
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def tail(self, lines: int = 40) -> str:
        log = self.supervisor.logs / f"{self.name}.log"
        text = log.read_text(errors="replace").splitlines() if log.exists() else []
        return "\n".join(text[-lines:])


def start(kube: Kube, supervisor: Supervisor, workdir: Path, name: str = DEPLOYMENT) -> Agent:
    """Install the agent on the cluster and start it (process and log named `name`)."""
    return Agent(supervisor, install(kube, workdir, name), name=name).start()
