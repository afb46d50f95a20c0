"""The three composition functions, installed through Crossplane's package manager.

Crossplane core runs with `--package-runtime=External`: the package manager
pulls each Function package from the local registry, unpacks and
establishes it, but leaves running it to someone else. That someone is this
module. Per function it

1. pushes the package (`crossplane xpkg push`) to the registry on 127.0.0.1,
2. applies a `Function` pointing at it,
3. starts the function's runtime serving mTLS with a server certificate for
   127.0.0.1 issued by Crossplane's own root CA (the one that also issued
   Crossplane's client certificate, so each side verifies the other), and
4. keeps that certificate in a Secret named by the active FunctionRevision's
   `status.tlsServerSecretName` (the package manager waits for it before it
   establishes the revision) and writes the runtime's address into
   `status.endpoint`, which is where composition dials, and reports the
   runtime healthy (`RuntimeHealthy`), as Crossplane's own runtime would.

Where a package and its runtime come from is one choice. `PackagedSource`
(MODELPLANE_E2E_PACKAGES=<folder of .xpkg files>) pushes the packages `make
packages` builds and runs each from its own runtime image, sandboxed;
`PackageSource`, the default while those packages are not part of the
build, builds each package from `functions/<name>/package` without a
runtime image and serves the function's console script from this
workspace's virtualenv. Everything else is the same.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from modelplane_devtools import version
from modelplane_devtools.e2e import pki
from modelplane_devtools.e2e.kube import Kube, condition, eventually
from modelplane_devtools.e2e.processes import Supervisor, free_port, listening
from modelplane_devtools.e2e.stack import CROSSPLANE_NAMESPACE, ROOT, binary

FUNCTIONS = ("compose-inference-cluster", "compose-model-replica", "compose-model-deployment")
VERSION = version.tag()
PARENT_PACKAGE_LABEL = "pkg.crossplane.io/package"


@dataclass(frozen=True)
class PackageSource:
    """Where each function's package and runtime come from."""

    def package(self, name: str, out: Path) -> Path:
        """A .xpkg of the function's package metadata (no runtime image embedded)."""
        target = out / f"{name}.xpkg"
        # The CLI reads ./examples as package examples unless told otherwise;
        # the repository's examples are render cases, not package examples.
        no_examples = out / "no-examples"
        no_examples.mkdir(exist_ok=True)
        _run(
            [
                binary("crossplane"),
                "xpkg",
                "build",
                f"--package-root={ROOT / 'functions' / name / 'package'}",
                f"--package-file={target}",
                f"--examples-root={no_examples}",
            ]
        )
        return target

    def serve(self, name: str, address: str, certs: Path) -> list[str]:
        """The command that serves the function on address with mTLS from certs."""
        return [
            str(Path(sys.executable).parent / name),
            f"--address={address}",
            f"--tls-certs-dir={certs}",
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
        from modelplane_devtools import packages  # the packages issue's module

        return packages.xpkg(name, self.directory)

    def serve(self, name: str, address: str, certs: Path) -> list[str]:
        from modelplane_devtools import packages

        # The image's unprivileged user must reach its root filesystem and its
        # certificates whatever the modes of the folders the repository was
        # cloned into (a 0700 temporary folder, say): both are staged in a
        # world-readable temporary directory, removed when the session ends.
        staged = packages.world_readable_tempdir(f"modelplane-e2e-{name}-")
        atexit.register(shutil.rmtree, staged, ignore_errors=True)
        tls = staged / "tls"
        shutil.copytree(certs, tls)
        tls.chmod(0o755)
        runtime = packages.unpack(packages.xpkg(name, self.directory), staged / "image")
        return runtime.command([f"--address={address}"], tls_dir=tls)


def source_from_environment() -> PackageSource:
    """PackagedSource when MODELPLANE_E2E_PACKAGES names the .xpkg folder, else the dev source."""
    directory = os.environ.get("MODELPLANE_E2E_PACKAGES")
    return PackagedSource(Path(directory)) if directory else PackageSource()


def _run(command: list) -> str:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed: {done.stderr}{done.stdout}")
    return done.stdout


@dataclass(frozen=True)
class Installed:
    name: str
    package: str
    endpoint: str


def install(
    kube: Kube,
    supervisor: Supervisor,
    registry: str,
    root_ca: Path,
    workdir: Path,
    source: PackageSource | None = None,
) -> list[Installed]:
    source = source or source_from_environment()
    out = workdir / "packages"
    out.mkdir(parents=True, exist_ok=True)
    crossplane_ca = pki.KeyPair(root_ca / "tls.crt", root_ca / "tls.key")
    installed = []
    for name in FUNCTIONS:
        reference = f"{registry}/modelplane/{name}:{VERSION}"
        _run(
            [
                binary("crossplane"),
                "xpkg",
                "push",
                f"--package-files={source.package(name, out)}",
                reference,
            ]
        )
        kube.apply(
            {
                "apiVersion": "pkg.crossplane.io/v1",
                "kind": "Function",
                "metadata": {"name": name},
                "spec": {"package": reference},
            }
        )
        installed.append(
            Installed(name, reference, _serve(supervisor, name, source, crossplane_ca, workdir))
        )
    for function in installed:
        revision = eventually(
            functools.partial(_active_revision, kube, function.name),
            f"an active FunctionRevision of {function.name}",
            timeout=180,
        )
        # What Crossplane's Deployment runtime would do: a Secret with the
        # runtime's server certificate (the establisher refuses to proceed
        # without `status.tlsServerSecretName`), and the endpoint to dial.
        secret = f"{function.name}-tls-server"
        certs = workdir / "functions" / function.name
        kube.kubectl(
            "create", "secret", "generic", secret, "-n", CROSSPLANE_NAMESPACE,
            f"--from-file=tls.crt={certs / 'tls.crt'}",
            f"--from-file=tls.key={certs / 'tls.key'}",
            f"--from-file=ca.crt={certs / 'ca.crt'}",
        )  # fmt: skip
        # ...and the runtime's health, which the package manager reads from
        # the revision's RuntimeHealthy condition (a merge patch replaces the
        # whole list, so the others are carried over).
        conditions = [
            c
            for c in (revision.get("status") or {}).get("conditions") or []
            if c.get("type") != "RuntimeHealthy"
        ]
        conditions.append(
            {
                "type": "RuntimeHealthy",
                "status": "True",
                "reason": "HealthyPackageRevision",
                "message": f"served by the e2e harness at {function.endpoint}",
                "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )
        kube.patch(
            "functionrevision",
            revision["metadata"]["name"],
            {
                "status": {
                    "endpoint": function.endpoint,
                    "tlsServerSecretName": secret,
                    "conditions": conditions,
                }
            },
            subresource="status",
        )
        eventually(
            functools.partial(_healthy, kube, function.name),
            f"Function {function.name} Installed and Healthy",
            timeout=180,
        )
    return installed


def _serve(
    supervisor: Supervisor, name: str, source: PackageSource, ca: pki.KeyPair, workdir: Path
) -> str:
    certs = workdir / "functions" / name
    serving = pki.sign(ca, certs, "server", pki.Subject(name, ips=("127.0.0.1",)))
    (certs / "tls.crt").write_bytes(serving.cert.read_bytes())
    (certs / "tls.key").write_bytes(serving.key.read_bytes())
    (certs / "ca.crt").write_bytes(ca.cert.read_bytes())
    # A packaged runtime runs as its image's unprivileged user: test
    # certificates are made readable to it.
    certs.chmod(0o755)
    for name_ in ("tls.crt", "tls.key", "ca.crt"):
        (certs / name_).chmod(0o644)
    port = free_port()
    process = supervisor.start(name, source.serve(name, f"127.0.0.1:{port}", certs))
    supervisor.wait_until(process, lambda: listening(port), "serving")
    return f"127.0.0.1:{port}"


def _active_revision(kube: Kube, name: str) -> dict | None:
    for revision in kube.list("functionrevisions", selector=f"{PARENT_PACKAGE_LABEL}={name}"):
        if revision["spec"].get("desiredState") == "Active":
            return revision
    return None


def _healthy(kube: Kube, name: str) -> bool:
    function = kube.get("function", name)
    for kind in ("Installed", "Healthy"):
        c = condition(function, kind)
        assert c and c["status"] == "True", f"{kind}: {c}"
    return True
