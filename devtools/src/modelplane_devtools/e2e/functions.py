"""Our packages (the Configuration and the three Function packages) and the functions' runtimes.

Where they come from is one choice. `PackagedSource`
(MODELPLANE_E2E_PACKAGES=<folder of .xpkg files>, what `make e2e` sets) takes
the packages `make packages` builds and runs each function from its own
runtime image, sandboxed; `PackageSource`, the default (quicker to iterate:
no image build), builds each package with the same `crossplane xpkg build`
but without a runtime image and serves the function's console script from
this workspace's virtualenv. Everything else is the same: `install` pushes
either to the registry, the package manager installs them, and `serve` runs
each function the package manager installed on 127.0.0.1, serving mTLS with
a certificate from Crossplane's own root CA (the one that also issued
Crossplane's client certificate, so each side verifies the other), reported
on its FunctionRevision (`runtime`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from modelplane_devtools.e2e import pki, runtime
from modelplane_devtools.e2e.kube import Kube
from modelplane_devtools.e2e.processes import Supervisor, free_port, listening
from modelplane_devtools.e2e.stack import ROOT, binary
from modelplane_devtools.render import program_of

# The Configuration package: apis/ (its crossplane.yaml, XRDs and Compositions).
CONFIGURATION = "modelplane-fleet"


@dataclass(frozen=True)
class PackageSource:
    """Where each function's package and runtime come from."""

    def package(self, name: str, out: Path) -> Path:
        """A .xpkg of the function's package metadata (no runtime image embedded)."""
        return build_package(ROOT / "functions" / name / "package", out / f"{name}.xpkg")

    def configuration(self, out: Path) -> Path:
        """The Configuration package, built from apis/ as scripts/build-packages.sh builds it."""
        return build_package(ROOT / "apis", out / f"{CONFIGURATION}.xpkg")

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
        from modelplane_devtools import packages

        return packages.xpkg(name, self.directory)

    def configuration(self, out: Path) -> Path:
        from modelplane_devtools import packages

        return packages.xpkg(CONFIGURATION, self.directory)

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
        image = packages.unpack(packages.xpkg(name, self.directory), staged / "image")
        return image.command([f"--address={address}"], tls_dir=tls)


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


def serve(
    kube: Kube,
    supervisor: Supervisor,
    function: dict,
    ca: pki.KeyPair,
    workdir: Path,
    source: PackageSource,
) -> str:
    """Run the function the package manager installed as `function` (a Function object).

    The program is the one its package names (`render.program_of`); the
    runtime's address goes into the active FunctionRevision's
    `status.endpoint`. Returns that address.
    """
    name = function["metadata"]["name"]
    revision = runtime.wait_for_revision(kube, "functionrevisions", name)
    certs = runtime.issue(ca, workdir / "functions" / name, name)
    runtime.hand_over_certificate(kube, "functionrevision", revision, certs)
    port = free_port()
    address = f"127.0.0.1:{port}"
    program = program_of(function["spec"]["package"])
    process = supervisor.start(name, source.serve(program, address, certs.directory))
    supervisor.wait_until(process, lambda: listening(port), "serving")
    runtime.report_healthy(
        kube, "functionrevision", revision["metadata"]["name"], served_at=address, endpoint=address
    )
    return address
