"""Our packages (the Configuration and the three Function packages) and the functions' runtimes.

Where they come from is one choice. `PackagedSource`
(MODELPLANE_E2E_PACKAGES=<folder of .xpkg files>, what `make e2e` sets) takes
the packages `make packages` builds and runs each function from its own
runtime image, sandboxed; `PackageSource`, the default (quicker to iterate:
no image build), builds each package with the same `crossplane xpkg build`
but without a runtime image and serves the function's console script from
this workspace's virtualenv. Everything else is the same: `install` pushes
either to the registry, the package manager installs them, and `serve` runs
each function the package manager installed on the loopback, serving mTLS
with a certificate from Crossplane's own root CA (the one that also issued
Crossplane's client certificate, so each side verifies the other), reported
on its FunctionRevision (`runtime`).

A function runs as many processes as its DeploymentRuntimeConfig asks pods
(`spec.deploymentTemplate.spec.replicas`, deploy/control-plane/functions.yaml),
each on its own loopback address (127.0.0.1, 127.0.0.2, ...) and one port,
behind a name that a DNS server of the harness (`dns`) answers with all of
them, as cluster DNS answers a headless Service with its pods: the
revision's endpoint is `dns://<that server>/<name>.crossplane-system.svc:<port>`,
so Crossplane's gRPC client resolves and round-robins exactly as it does
against Crossplane's own Deployment runtime. Each process logs at debug
level: one line per RunFunction call, which is how a test sees the spread.

Metrics follow the same runtime config: where it sets METRICS_ADDRESS on
Crossplane's runtime container (deploy/control-plane/functions.yaml asks
`:8080`), each process serves its Prometheus metrics on its own loopback
address and one free port per function (`--metrics-address`), as each pod
would on its own IP; port 8080 itself is provider-kubernetes' on every
interface. `metrics_addresses` says where, from the processes' command lines.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from modelplane_devtools import packages
from modelplane_devtools.paths import ROOT
from modelplane_devtools.processes import Process, Supervisor, free_port, listening
from modelplane_devtools.render import program_of

from modelplane_e2e import dns, pki, runtime
from modelplane_e2e.binaries import binary
from modelplane_e2e.kube import Kube

# The Configuration package: apis/ (its crossplane.yaml, XRDs and Compositions).
CONFIGURATION = "modelplane-fleet"
# Crossplane's runtime container in a DeploymentRuntimeConfig's template, and the
# variable that has a function serve its metrics (modelplane_common.server).
RUNTIME_CONTAINER = "package-runtime"
METRICS_ENV = "METRICS_ADDRESS"
METRICS_FLAG = "--metrics-address"


@dataclass(frozen=True)
class PackageSource:
    """Where each function's package and runtime come from."""

    def package(self, name: str, out: Path) -> Path:
        """A .xpkg of the function's package metadata (no runtime image embedded)."""
        return build_package(ROOT / "functions" / name / "package", out / f"{name}.xpkg")

    def configuration(self, out: Path) -> Path:
        """The Configuration package, built from apis/ as scripts/build-packages.sh builds it."""
        return build_package(ROOT / "apis", out / f"{CONFIGURATION}.xpkg")

    def serve(self, name: str, address: str, certs: Path, metrics: str | None = None) -> list[str]:
        """The command that serves the function on address with mTLS from certs, and its
        metrics on `metrics` (host:port) when given."""
        return [
            str(Path(sys.executable).parent / name),
            f"--address={address}",
            f"--tls-certs-dir={certs}",
            "--debug",
            *metrics_argument(metrics),
        ]


@dataclass(frozen=True)
class PackagedSource(PackageSource):
    """The packages `make packages` builds (dist/xpkg), each run from its own runtime image.

    Uses `modelplane_devtools.packages` (unpack with skopeo and umoci, run
    under bubblewrap); the runtime finds its certificates through
    TLS_SERVER_CERTS_DIR inside the sandbox, as in a Crossplane Deployment.
    """

    directory: Path = ROOT / "dist" / "xpkg"

    def package(self, name: str, out: Path) -> Path:
        return packages.xpkg(name, self.directory)

    def configuration(self, out: Path) -> Path:
        return packages.xpkg(CONFIGURATION, self.directory)

    def serve(self, name: str, address: str, certs: Path, metrics: str | None = None) -> list[str]:
        # The image's unprivileged user must reach its root filesystem and its
        # certificates whatever the modes of the folders the repository was
        # cloned into (a 0700 temporary folder, say): both are staged in a
        # world-readable temporary directory, removed when the session ends.
        staged = packages.world_readable_tempdir(f"modelplane-e2e-{name}-")
        atexit.register(shutil.rmtree, staged, ignore_errors=True)
        tls = staged / "tls"
        shutil.copytree(certs, tls)
        tls.chmod(0o755)
        image = unpacked(name, self.directory)
        args = [f"--address={address}", "--debug", *metrics_argument(metrics)]
        return image.command(args, tls_dir=tls)


def metrics_argument(metrics: str | None) -> list[str]:
    return [f"{METRICS_FLAG}={metrics}"] if metrics else []


@functools.cache
def unpacked(name: str, directory: Path) -> packages.Runtime:
    """The function's image unpacked once per session, shared by all its processes
    (its root filesystem is read-only to them), in a world-readable temporary directory."""
    staged = packages.world_readable_tempdir(f"modelplane-e2e-{name}-image-")
    atexit.register(shutil.rmtree, staged, ignore_errors=True)
    return packages.unpack(packages.xpkg(name, directory), staged / "image")


def source_from_environment() -> PackageSource:
    """PackagedSource when MODELPLANE_E2E_PACKAGES names the .xpkg folder, else the dev source."""
    directory = os.environ.get("MODELPLANE_E2E_PACKAGES")
    return PackagedSource(Path(directory)) if directory else PackageSource()


def run(command: list) -> str:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed: {done.stderr}{done.stdout}")
    return done.stdout


def build_package(root: Path, target: Path) -> Path:
    """`crossplane xpkg build` of a package root (crossplane.yaml and its objects) into target."""
    # The CLI reads ./examples as package examples unless told otherwise;
    # the repository's examples are render cases, not package examples.
    no_examples = target.parent / "no-examples"
    no_examples.mkdir(parents=True, exist_ok=True)
    run(
        [
            binary("crossplane"),
            "xpkg",
            "build",
            f"--package-root={root}",
            f"--package-file={target}",
            f"--examples-root={no_examples}",
        ]
    )
    return target


def pod_name(function: str, index: int) -> str:
    """The supervisor's (and the log file's) name of a function's index-th process."""
    return function if index == 0 else f"{function}-{index}"


def asks_for_metrics(config: dict) -> bool:
    """Whether the DeploymentRuntimeConfig has the function serve metrics: METRICS_ADDRESS
    set on its runtime container."""
    template = ((config.get("spec") or {}).get("deploymentTemplate") or {}).get("spec") or {}
    containers = ((template.get("template") or {}).get("spec") or {}).get("containers") or []
    return any(
        isinstance(e, dict) and e.get("name") == METRICS_ENV and e.get("value")
        for c in containers
        if isinstance(c, dict) and c.get("name") == RUNTIME_CONTAINER
        for e in c.get("env") or []
    )


def metrics_addresses(processes: list[Process], function: str) -> list[str]:
    """Where the Function `function`'s processes serve metrics (host:port), pod by pod, as
    `serve` started them; empty when its runtime config asks none."""
    pods = [pod_name(function, i) for i in range(len(processes))]
    by_name = {p.name: p.argument(METRICS_FLAG) for p in processes}
    return [address for pod in pods if (address := by_name.get(pod))]


def _other_free_port(taken: int) -> int:
    while (port := free_port()) == taken:
        pass
    return port


def serve(
    kube: Kube,
    supervisor: Supervisor,
    function: dict,
    ca: pki.KeyPair,
    workdir: Path,
    source: PackageSource,
) -> str:
    """Run the function the package manager installed as `function` (a Function object).

    The program is the one its package names (`render.program_of`), one
    process per pod its runtime config asks for; the DNS name of their
    addresses goes into the active FunctionRevision's `status.endpoint`.
    Returns that endpoint.
    """
    name = function["metadata"]["name"]
    revision = runtime.wait_for_revision(kube, "functionrevisions", name)
    certs = runtime.issue(ca, workdir / "functions" / name, name)
    runtime.hand_over_certificate(kube, "functionrevision", revision, certs)
    port = free_port()
    config = runtime.runtime_config(kube, function)
    hosts = [f"127.0.0.{i + 1}" for i in range(runtime.pods(config))]
    metrics_port = _other_free_port(port) if asks_for_metrics(config) else None
    program = program_of(function["spec"]["package"])
    for index, host in enumerate(hosts):
        metrics = f"{host}:{metrics_port}" if metrics_port else None
        command = source.serve(program, f"{host}:{port}", certs.directory, metrics)
        process = supervisor.start(pod_name(name, index), command)
        supervisor.wait_until(process, functools.partial(listening, port, host), "serving")
        if metrics_port:
            supervisor.wait_until(
                process, functools.partial(listening, metrics_port, host), "serving metrics"
            )
    service = f"{name}.{runtime.CROSSPLANE_NAMESPACE}.svc"
    dns_port = dns.free_udp_port()
    resolver = supervisor.start(
        f"{name}-dns",
        [sys.executable, "-m", "modelplane_e2e.dns", f"--port={dns_port}",
         f"--record={service}={','.join(hosts)}"],
    )  # fmt: skip
    supervisor.wait_until(
        resolver, lambda: dns.resolves(dns_port, service) == hosts, "answering for its Service"
    )
    endpoint = f"dns://127.0.0.1:{dns_port}/{service}:{port}"
    runtime.report_healthy(
        kube,
        "functionrevision",
        revision["metadata"]["name"],
        served_at=f"{', '.join(hosts)} port {port}",
        endpoint=endpoint,
    )
    return endpoint


def endpoint_port(endpoint: str) -> int:
    """The port of a function's `host:port` or `dns://.../<name>:<port>` endpoint."""
    return int(endpoint.rsplit(":", 1)[1])


def serve_instead(
    kube: Kube,
    supervisor: Supervisor,
    name: str,
    endpoint: str,
    workdir: Path,
    source: PackageSource,
) -> None:
    """Serve the Function `name` from `source` in place of the processes `serve` started:
    the same addresses and certificates, so Crossplane, which keeps the revision's
    endpoint, reconnects to the other code without noticing. For comparing two builds of
    a function on one stack; the package manager's view (the revision) does not change."""
    function = kube.get("functions.pkg.crossplane.io", name)
    assert function is not None, f"no Function {name}"
    port = endpoint_port(endpoint)
    certs = runtime.Certificates(workdir / "functions" / name)
    program = program_of(function["spec"]["package"])
    pods = runtime.pods(runtime.runtime_config(kube, function))
    for index in range(pods):
        host = f"127.0.0.{index + 1}"
        (running,) = [p for p in supervisor.processes if p.name == pod_name(name, index)]
        supervisor.stop_process(running)
        # No metrics: the other build may predate --metrics-address, and a comparison
        # reads Crossplane's and the processes' own costs, not the functions' counters.
        command = source.serve(program, f"{host}:{port}", certs.directory)
        process = supervisor.start(pod_name(name, index), command)
        supervisor.wait_until(process, functools.partial(listening, port, host), "serving")
