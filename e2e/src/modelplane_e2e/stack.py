"""The e2e harness: Kubernetes clusters on 127.0.0.1, and the stack around them.

A cluster (`start_cluster`, the one definition every suite uses) is etcd,
kube-apiserver and kube-controller-manager from `.tools/bin`, plus what its
`Role` adds:

- `CONTROL_PLANE`: nothing more (Crossplane's cluster; its controller
  manager collects the garbage of composed resources).
- `WORKLOAD`: kube-scheduler, and the DRA features the agent and its oracle
  exercise, on in every component that reads them, with the API versions
  DeviceTaintRule needs: those of its Kubernetes version
  (`kube_versions`; v1.35.4 but for the agent's live tests, which run the
  version `MODELPLANE_KUBE_VERSION` names: `workload_role`).

No kubelet runs anywhere. In the e2e's workload cluster kwok plays the
kubelets (`kwok`: node heartbeats and leases, pods Running and Ready,
deleted pods removed), so its controller manager runs the node lifecycle
controller (`node_lifecycle`), and the LeaderWorkerSet controller runs with
its CRDs and webhooks (`lws`). Everywhere else nodes are Node objects a
test keeps Ready and the node lifecycle controller is off (it would taint
nodes without heartbeats). Devices are ResourceSlices published as a DRA
driver would (`fleet`). The real kube-scheduler allocates ResourceClaims
and binds pods; the controller manager creates claims from templates and
cleans them up. A
cluster's kube-apiserver can be killed by its PID and started again with
the same command, so the same port, etcd and certificates (`ApiServer`), as
a crash and a restart are (the agent's fault tests).

The e2e (`start`) runs a control plane and a workload cluster sharing one CA
and one `processes.Supervisor`; around them Crossplane core (the release
`crossplane_versions.selected()` names: v2.4.0, or the floor v2.3.4) with the
package manager's External runtime, running as its Helm chart's service
account (`crossplane_kubeconfig`) and an OCI registry for the packages on
the control plane (what `install` then installs: provider-kubernetes at the
selected release, the Configuration and the functions, run by the harness), and the agent
(`agent`, started by the session fixture once the stack is up) on the
workload cluster. provider-kubernetes reaches the workload cluster as the
least-privilege user of deploy/workload-cluster (`provider_identity`, the
Stack's `provider` client), never as system:masters. The agent's live
tests (agent/tests/live) run a workload cluster alone (`start_workload`),
with its own CA and Supervisor.

Everything listens on 127.0.0.1 on a free port, except what the binaries
fix themselves (provider-kubernetes: 8080 metrics and 9443 webhooks on all
interfaces, `FIXED_PORTS`, checked free before anything starts). All processes
are stopped by PID (`processes.Supervisor`); their logs stay in the run's
folder, which a failing test names, with the logs' last lines.

Binaries come from `.tools/bin` (`make e2e-tools`), kube-apiserver,
kube-controller-manager and kube-scheduler of another version from that
version's folder (`kube_versions`); a missing one is an error naming the fix,
never a skip.
"""

from __future__ import annotations

import base64
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from modelplane_devtools import registry
from modelplane_devtools.processes import Supervisor, free_port, listening

from modelplane_e2e import (
    crossplane_versions,
    install_steps,
    kube_versions,
    kwok,
    lws,
    pki,
    provider,
)
from modelplane_e2e.agent import Agent
from modelplane_e2e.binaries import binary, module_dir
from modelplane_e2e.cluster import ApiServer, Cluster
from modelplane_e2e.kube import Kube, KubectlFailed, eventually

CROSSPLANE_NAMESPACE = "crossplane-system"
CROSSPLANE_SERVICE_ACCOUNT = "crossplane"  # the Helm chart's name for it
CA_SECRET = "crossplane-root-ca"
SERVER_SECRET = "crossplane-tls-server"
CLIENT_SECRET = "crossplane-tls-client"
# The ports a process of the harness binds whatever it is told, on all interfaces, and
# what for: provider-kubernetes v1.2.1 sets no metrics address, so controller-runtime
# serves its metrics on its default :8080 (its health probe takes a free port from
# HEALTH_PROBE_BIND_ADDRESS; Crossplane core, LWS, kwok and the functions are all given
# free ports). A port another process holds is refused at once, naming it.
FIXED_PORTS = {
    provider.WEBHOOK_PORT: "provider-kubernetes's webhooks",
    8080: "provider-kubernetes's metrics",
}


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(path: Path, name: str, server: str, ca: Path, client: pki.KeyPair) -> Path:
    """A kubeconfig with every certificate embedded, usable from a Secret too."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": name, "cluster": {"server": server, "certificate-authority-data": _b64(ca)}}
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": _b64(client.cert),
                    "client-key-data": _b64(client.key),
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "admin"}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


# What every Kubernetes cluster runs; `start` and `start_workload` check them first.
CLUSTER_BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
)


@dataclass(frozen=True)
class Role:
    """What a cluster runs beyond etcd, kube-apiserver and kube-controller-manager."""

    scheduler: bool
    feature_gates: tuple[str, ...] = ()  # on in every component
    runtime_config: tuple[str, ...] = ()  # kube-apiserver's --runtime-config
    kube: kube_versions.KubeVersion = kube_versions.DEFAULT  # whose commands run

    def gate_flags(self) -> list[str]:
        if not self.feature_gates:
            return []
        return ["--feature-gates=" + ",".join(f"{gate}=true" for gate in self.feature_gates)]

    def runtime_config_flags(self) -> list[str]:
        return [f"--runtime-config={','.join(self.runtime_config)}"] if self.runtime_config else []


def workload_role(kube: kube_versions.KubeVersion) -> Role:
    """A workload cluster on Kubernetes `kube`, with its DRA gates and API versions."""
    return Role(
        scheduler=True,
        feature_gates=kube.feature_gates,
        runtime_config=kube.runtime_config,
        kube=kube,
    )


CONTROL_PLANE = Role(scheduler=False)
WORKLOAD = workload_role(kube_versions.DEFAULT)


@dataclass
class Installed:
    """What the install ended with: function endpoints and the provider's arguments."""

    configuration: str
    provider: str
    provider_args: list[str]
    functions: dict[str, str] = field(default_factory=dict)


@dataclass
class Stack:
    workdir: Path
    supervisor: Supervisor
    control_plane: Cluster | None = None
    workload: Cluster | None = None
    registry: str = ""
    root_ca: Path | None = None
    agent: Agent | None = None
    installed: Installed | None = None
    # provider-kubernetes' client on the workload cluster: the least-privilege
    # user deploy/workload-cluster binds, never system:masters.
    provider: Kube | None = None
    timings: dict[str, float] = field(default_factory=dict)
    # The Crossplane core and provider-kubernetes releases this run uses.
    versions: crossplane_versions.Versions = field(default_factory=crossplane_versions.selected)

    @property
    def logs(self) -> Path:
        return self.supervisor.logs


def start_cluster(
    supervisor: Supervisor,
    workdir: Path,
    name: str,
    credentials: pki.ClusterCredentials,
    role: Role,
    *,
    node_lifecycle: bool = False,
) -> Cluster:
    """Start cluster `name` in workdir/name; ready once its default ServiceAccount exists.
    `node_lifecycle`: run the node lifecycle controller, for a cluster whose nodes
    heartbeat (kwok's); without heartbeats it would taint every node unreachable."""
    home = workdir / name
    home.mkdir(parents=True, exist_ok=True)
    etcd = _start_etcd(supervisor, home, name)
    serving = pki.sign(
        credentials.ca, home / "pki", "apiserver",
        pki.Subject("kube-apiserver", ips=("127.0.0.1",), dns=("localhost",)),
    )  # fmt: skip
    port = free_port()
    server = f"https://127.0.0.1:{port}"
    kubeconfig = write_kubeconfig(
        home / "kubeconfig", name, server, credentials.ca.cert, credentials.admin
    )
    kube = Kube(name, binary("kubectl"), kubeconfig)
    command = _apiserver_command(etcd, port, serving, credentials, role)
    apiserver = ApiServer(supervisor, f"{name}-kube-apiserver", command, kube)
    apiserver.start()
    _start_controllers(supervisor, name, kubeconfig, credentials, role, node_lifecycle)
    # The service account controller runs: pods can be admitted from here on.
    eventually(
        lambda: kube.get("serviceaccount", "default", "default"),
        f"{name}: the default service account",
        timeout=60,
    )
    return Cluster(
        name, kube, server, kubeconfig, home, credentials.ca.cert, serving, supervisor, apiserver
    )


def start_workload(
    workdir: Path,
    name: str = "workload",
    kube: kube_versions.KubeVersion = kube_versions.DEFAULT,
) -> Cluster:
    """A workload cluster on Kubernetes `kube` alone, with its own CA and Supervisor (logs
    in workdir/logs); the caller stops it with `cluster.supervisor.stop()`."""
    for tool in CLUSTER_BINARIES:
        binary(tool, kube)
    supervisor = Supervisor(workdir / "logs")
    try:
        credentials = pki.cluster_credentials(workdir / "pki", f"{name}-ca")
        return start_cluster(supervisor, workdir, name, credentials, workload_role(kube))
    except BaseException:
        supervisor.stop()
        raise


def user_client(stack: Stack, user: str, group: str) -> Kube:
    """A kubectl client on the control plane authenticated by a certificate from the
    session's CA naming `user` in `group`, as an identity provider names a team's member."""
    assert stack.control_plane is not None
    home = stack.workdir / "users" / user
    ca = pki.KeyPair(stack.workdir / "pki" / "e2e-ca.crt", stack.workdir / "pki" / "e2e-ca.key")
    keys = pki.sign(ca, home, user, pki.Subject(user, organization=group))
    config = write_kubeconfig(
        home / "kubeconfig", user, stack.control_plane.server, stack.control_plane.ca, keys
    )
    return Kube(user, binary("kubectl"), config)


# The user deploy/workload-cluster's ClusterRoleBinding names.
PROVIDER_USER = "modelplane:provider-kubernetes"


def provider_identity(cluster: Cluster, credentials: pki.ClusterCredentials) -> Kube:
    """provider-kubernetes' client on `cluster`: a certificate for PROVIDER_USER (in no
    group) and the ClusterRole and binding of deploy/workload-cluster, applied as the
    platform applies them. Its kubeconfig is what the InferenceCluster's Secret holds."""
    install_steps.run(cluster.kube, install_steps.PROVIDER_ROLE)
    client = pki.sign(
        credentials.ca, cluster.workdir / "pki", "provider-kubernetes", pki.Subject(PROVIDER_USER)
    )
    kubeconfig = write_kubeconfig(
        cluster.workdir / "provider-kubeconfig", cluster.name, cluster.server, cluster.ca, client
    )
    return Kube(f"{cluster.name}-provider", binary("kubectl"), kubeconfig)


def _start_etcd(supervisor: Supervisor, home: Path, name: str) -> str:
    """etcd for one cluster; returns its client URL once it listens."""
    client_port, peer_port = free_port(), free_port()
    etcd = supervisor.start(
        f"{name}-etcd",
        [
            binary("etcd"),
            f"--name={name}",
            f"--data-dir={home / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{client_port}",
            f"--advertise-client-urls=http://127.0.0.1:{client_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster={name}=http://127.0.0.1:{peer_port}",
            # Test data: durability is not worth the fsync cost on a shared disk.
            "--unsafe-no-fsync",
        ],
    )
    supervisor.wait_until(etcd, lambda: listening(client_port), "listening")
    return f"http://127.0.0.1:{client_port}"


def _apiserver_command(
    etcd: str, port: int, serving: pki.KeyPair, credentials: pki.ClusterCredentials, role: Role
) -> tuple[str, ...]:
    return (
        str(binary("kube-apiserver", role.kube)),
        f"--etcd-servers={etcd}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={serving.cert}",
        f"--tls-private-key-file={serving.key}",
        f"--client-ca-file={credentials.ca.cert}",
        f"--service-account-key-file={credentials.service_accounts.cert}",
        f"--service-account-signing-key-file={credentials.service_accounts.key}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--authorization-mode=RBAC",
        # As every real cluster runs (kubelets need it for their own system pods):
        # without it the API server itself refuses a privileged container with
        # "disallowed by cluster policy", before Pod Security ever sees the pod.
        "--allow-privileged=true",
        # No Service endpoints for the API server itself: its address is loopback.
        "--endpoint-reconciler-type=none",
        "--enable-priority-and-fairness=false",
        *role.gate_flags(),
        *role.runtime_config_flags(),
    )


def _start_controllers(
    supervisor: Supervisor,
    name: str,
    kubeconfig: Path,
    credentials: pki.ClusterCredentials,
    role: Role,
    node_lifecycle: bool,
) -> None:
    common = [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        "--leader-elect=false",
        *role.gate_flags(),
    ]
    supervisor.start(
        f"{name}-kube-controller-manager",
        [
            binary("kube-controller-manager", role.kube),
            *common,
            f"--secure-port={free_port()}",
            f"--service-account-private-key-file={credentials.service_accounts.key}",
            f"--root-ca-file={credentials.ca.cert}",
            "--controllers=*" if node_lifecycle else "--controllers=*,-node-lifecycle-controller",
        ],
    )
    if role.scheduler:
        supervisor.start(
            f"{name}-kube-scheduler",
            [binary("kube-scheduler", role.kube), *common, f"--secure-port={free_port()}"],
        )


def _secret_files(kube: Kube, name: str, namespace: str, into: Path) -> Path:
    secret = kube.get("secret", name, namespace)
    assert secret, f"Secret {namespace}/{name} missing"
    into.mkdir(parents=True, exist_ok=True)
    for key, value in secret["data"].items():
        (into / key).write_bytes(base64.b64decode(value))
    return into


def crossplane_kubeconfig(stack: Stack, cluster: Cluster) -> Path:
    """A kubeconfig for Crossplane's own identity: its Helm chart's service account.

    Crossplane runs as `system:serviceaccount:crossplane-system:crossplane`
    here as in a Helm install, so deploy/control-plane's admission policy
    (only Crossplane writes ModelReplicas) sees the identity it names. The
    chart's aggregated `crossplane` ClusterRole is stood in for by
    cluster-admin: what it may do is RBAC's business, who it is matters here.
    """
    kube = cluster.kube
    kube.kubectl("create", "serviceaccount", CROSSPLANE_SERVICE_ACCOUNT, "-n", CROSSPLANE_NAMESPACE)
    kube.kubectl(
        "create", "clusterrolebinding", "e2e-crossplane", "--clusterrole=cluster-admin",
        f"--serviceaccount={CROSSPLANE_NAMESPACE}:{CROSSPLANE_SERVICE_ACCOUNT}",
    )  # fmt: skip
    token = kube.kubectl(
        "create", "token", CROSSPLANE_SERVICE_ACCOUNT, "-n", CROSSPLANE_NAMESPACE,
        "--duration=48h",
    ).strip()  # fmt: skip
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster.name,
                "cluster": {
                    "server": cluster.server,
                    "certificate-authority-data": _b64(cluster.ca),
                },
            }
        ],
        "users": [{"name": "crossplane", "user": {"token": token}}],
        "contexts": [
            {"name": cluster.name, "context": {"cluster": cluster.name, "user": "crossplane"}}
        ],
        "current-context": cluster.name,
    }
    path = stack.workdir / "crossplane" / "kubeconfig"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def start_crossplane(stack: Stack, cluster: Cluster, poll_interval: str = "5s") -> Path:
    """Crossplane core: `core init` (retried), then `core start` with the External runtime,
    both as Crossplane's service account (`crossplane_kubeconfig`).

    Returns the folder holding Crossplane's root CA (tls.crt, tls.key), which
    issues the functions' server certificates.
    """
    kube = cluster.kube
    kube.kubectl("create", "namespace", CROSSPLANE_NAMESPACE)
    kubeconfig = crossplane_kubeconfig(stack, cluster)
    release = stack.versions.crossplane
    core = binary(release.binary)
    # The CRDs of the same release as the binary.
    crds = module_dir(release.tools_module, release.module) / "cluster" / "crds"
    no_webhooks = stack.workdir / "crossplane" / "webhookconfigurations"
    no_webhooks.mkdir(parents=True, exist_ok=True)
    env = {
        "KUBECONFIG": str(kubeconfig),
        "POD_NAMESPACE": CROSSPLANE_NAMESPACE,
        "ENABLE_WEBHOOKS": "false",
        "TLS_CA_SECRET_NAME": CA_SECRET,
        "TLS_SERVER_SECRET_NAME": SERVER_SECRET,
        "TLS_CLIENT_SECRET_NAME": CLIENT_SECRET,
    }
    log = stack.logs / "crossplane-init.log"
    # The first init on a fresh API server can fail once with `no matches for
    # kind "Lock"`: the Lock CRD it just created is not served yet.
    for attempt in range(5):
        with log.open("a") as out:
            done = subprocess.run(
                [
                    core,
                    "core",
                    "init",
                    f"--cr-ds-path={crds}",
                    f"--webhook-configurations-path={no_webhooks}",
                    # The Helm chart's default (provider.defaultActivations):
                    # every ManagedResourceDefinition of a SafeStart provider,
                    # provider-kubernetes' included, is activated.
                    "--activation=*",
                ],
                env={**os.environ, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=180,
                check=False,
            )
        if done.returncode == 0:
            break
        time.sleep(2 * (attempt + 1))
    else:
        raise RuntimeError(f"crossplane core init failed 5 times; log {log}")

    client_certs = _secret_files(
        kube, CLIENT_SECRET, CROSSPLANE_NAMESPACE, stack.workdir / "crossplane" / "tls-client"
    )
    root_ca = _secret_files(
        kube, CA_SECRET, CROSSPLANE_NAMESPACE, stack.workdir / "crossplane" / "root-ca"
    )
    cache = stack.workdir / "crossplane" / "xpkg-cache"
    cache.mkdir(parents=True, exist_ok=True)
    process = stack.supervisor.start(
        "crossplane",
        [
            core,
            "core",
            "start",
            "--package-runtime=External",
            f"--poll-interval={poll_interval}",
            "--debug",
        ],
        env={
            **env,
            "TLS_CLIENT_CERTS_DIR": str(client_certs),
            "XPKG_CACHE_DIR": str(cache),
            "METRICS_PORT": str(free_port()),
            "HEALTH_PROBE_PORT": str(free_port()),
        },
    )
    stack.supervisor.wait_until(
        process,
        lambda: (
            kube.kubectl("api-resources", "--api-group=pkg.crossplane.io", check=False).count("\n")
            > 3
        ),
        "serving package APIs",
        120,
    )
    return root_ca


def check_ports_free() -> None:
    """Refuse to start when a port the harness cannot choose is taken, naming each one."""
    taken = [f"{port} ({what})" for port, what in sorted(FIXED_PORTS.items()) if listening(port)]
    if taken:
        raise RuntimeError(
            f"port(s) {', '.join(taken)} taken: the stack binds them and cannot choose others "
            "(another run, or another program on this host?)"
        )


def start(workdir: Path) -> Stack:
    """Start both clusters, Crossplane and the registry (`install` installs the rest)."""
    check_ports_free()
    stack = Stack(workdir, Supervisor(workdir / "logs"))
    chosen = stack.versions
    for name in (*CLUSTER_BINARIES, "crossplane", chosen.crossplane.binary,
                 chosen.provider.binary, "registry", "kwok", "lws"):  # fmt: skip
        binary(name)
    # What a run's record says it ran, beside its logs.
    (workdir / "versions.txt").write_text(
        f"{chosen.name}: crossplane v{chosen.crossplane.version()}, "
        f"provider-kubernetes v{chosen.provider.version()}\n"
    )
    began = time.monotonic()
    try:
        credentials = pki.cluster_credentials(workdir / "pki", "e2e-ca")
        stack.control_plane = start_cluster(
            stack.supervisor, workdir, "control-plane", credentials, CONTROL_PLANE
        )
        stack.workload = start_cluster(
            stack.supervisor, workdir, "workload", credentials, WORKLOAD, node_lifecycle=True
        )
        kwok.start(
            stack.supervisor,
            stack.workload.kubeconfig,
            workdir,
            binary=binary("kwok"),
            source=module_dir("workloads", kwok.MODULE),
        )
        stack.timings["kwok"] = time.monotonic() - began
        lws.start(
            stack.workload,
            workdir,
            credentials.ca,
            binary=binary("lws"),
            source=module_dir("workloads", lws.MODULE),
        )
        stack.timings["lws"] = time.monotonic() - began
        stack.provider = provider_identity(stack.workload, credentials)
        stack.timings["clusters"] = time.monotonic() - began
        stack.registry = registry.start(stack.supervisor)
        stack.root_ca = start_crossplane(stack, stack.control_plane)
        stack.timings["stack"] = time.monotonic() - began
    except BaseException:
        stack.supervisor.stop()
        raise
    return stack


def dump(kube: Kube, kinds: list[str], into: Path) -> None:
    """Write every object of the given kinds to into/<kind>.yaml, for a failure's record."""
    into.mkdir(parents=True, exist_ok=True)
    for kind in kinds:
        try:
            text = kube.kubectl("get", kind, "--all-namespaces", "-o", "yaml")
        except KubectlFailed as error:
            text = str(error)
        (into / f"{kind.replace('/', '_')}.yaml").write_text(text)
