"""The images `make packages` builds, unpacked and run without Docker.

A package (`dist/xpkg/<function>.xpkg`, written by scripts/build-packages.sh)
is one OCI image in a docker-archive tarball: the runtime image's layers (a
Debian base, the function's /venv) plus Crossplane's package layer holding
`package.yaml`. The agent's image (`dist/images/modelplane-agent.tar`) is the
same base and the agent's /venv, with no package layer. `unpack` turns either
back into a root filesystem with skopeo and umoci, the tools that built it;
`Runtime.command` runs the image's entrypoint the way a container runtime
would: under bubblewrap, the root read-only, as the image's non-root user
(with no capabilities), its environment and nothing else. A missing tool,
package or image is an error, never a skip.

An image of another architecture (the arm64 ones, `<name>-arm64`) runs the
same way under qemu-user: the emulator is bound into the sandbox and started
with the entrypoint, and since no binfmt_misc handler starts the entrypoint's
`#!` interpreter here, `Runtime.command` reads the shebang from the image
and starts the interpreter itself, as the kernel would.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from modelplane_devtools.paths import ROOT

DIST = ROOT / "dist"
XPKG_DIR = DIST / "xpkg"
IMAGES_DIR = DIST / "images"

# Where a runtime finds mTLS files inside the sandbox (TLS_SERVER_CERTS_DIR).
# Crossplane mounts them at /tls/server; the read-only root has no such mount
# point, so the sandbox binds them under its private /tmp instead.
SANDBOX_TLS_DIR = "/tmp/tls/server"

# An image's `architecture` (OCI's name) for this machine's, and the qemu-user
# emulator (qemu-user-static, static so it runs inside any root) for the others.
HOST_ARCHITECTURE = {"x86_64": "amd64", "aarch64": "arm64"}.get(
    platform.machine(), platform.machine()
)
EMULATORS = {"amd64": "qemu-x86_64-static", "arm64": "qemu-aarch64-static"}
# Where the sandbox sees the emulator: its private /tmp, like every other bind.
SANDBOX_EMULATOR = "/tmp/qemu-user-static"
# The architectures scripts/build-packages.sh builds, and the suffix of their outputs.
ARCHITECTURES = ("amd64", "arm64")


def suffix(architecture: str) -> str:
    """The ending of an architecture's outputs: none for amd64, `-arm64` for arm64."""
    return "" if architecture == "amd64" else f"-{architecture}"


class PackageMissing(RuntimeError):
    pass


def world_readable_tempdir(prefix: str) -> Path:
    """A temporary directory the sandboxed (non-root) image user can enter."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


def need(tool: str) -> str:
    """The path of a host tool; raises with the fix when it is missing."""
    path = shutil.which(tool)
    if path is None:
        raise PackageMissing(f"{tool} is missing: run `make setup`")
    return path


def xpkg(function: str, directory: Path = XPKG_DIR, architecture: str = "amd64") -> Path:
    """The built package of a function; raises with the fix when it is missing."""
    path = directory / f"{function}{suffix(architecture)}.xpkg"
    if not path.is_file():
        raise PackageMissing(f"{path} is missing: run `make packages`")
    return path


def image(name: str, directory: Path = IMAGES_DIR, architecture: str = "amd64") -> Path:
    """A built image's docker-archive (a function's or `modelplane-agent`); raises when missing."""
    path = directory / f"{name}{suffix(architecture)}.tar"
    if not path.is_file():
        raise PackageMissing(f"{path} is missing: run `make packages`")
    return path


def _run(command: Sequence[str]) -> str:
    done = subprocess.run(list(command), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def image_config(package: Path) -> dict:
    """The OCI image configuration of a package (or of any docker-archive image)."""
    return json.loads(_run([need("skopeo"), "inspect", "--config", f"docker-archive:{package}"]))


def image_manifest(package: Path) -> dict:
    return json.loads(_run([need("skopeo"), "inspect", "--raw", f"docker-archive:{package}"]))


def image_tags(archive: Path) -> list[str]:
    """The names a docker-archive tags its image with (`RepoTags` of its manifest.json)."""
    with tarfile.open(archive) as members:
        listing = members.extractfile("manifest.json")
        if listing is None:
            raise RuntimeError(f"{archive} has no manifest.json")
        (entry,) = json.load(listing)
    return list(entry.get("RepoTags") or [])


@dataclass(frozen=True)
class Runtime:
    """An unpacked image: its root filesystem and what its configuration says to run."""

    rootfs: Path
    entrypoint: tuple[str, ...]
    uid: int
    gid: int
    env: Mapping[str, str] = field(default_factory=dict)
    emulator: Path | None = None  # the host's qemu-user binary for a foreign architecture

    def program(self, args: Sequence[str] = ()) -> list[str]:
        """What runs inside the sandbox: the entrypoint, or the emulator starting it."""
        if self.emulator is None:
            return [*self.entrypoint, *args]
        return [
            SANDBOX_EMULATOR,
            *shebang(self.rootfs, self.entrypoint[0]),
            *self.entrypoint,
            *args,
        ]

    def command(
        self,
        args: Sequence[str] = (),
        *,
        tls_dir: Path | None = None,
        files: Mapping[str, Path] | None = None,
        env: Mapping[str, str] | None = None,
        status_fd: int | None = None,
    ) -> list[str]:
        """The host command that runs the entrypoint with args in a sandbox.

        setpriv drops to the image's user before bubblewrap starts, so the
        function runs as that uid on the host too (an unprivileged user
        namespace, no capabilities); the root is read-only and only /tmp is
        writable. The network is the host's, so a server on 127.0.0.1 is
        reachable. The entrypoint runs as PID 1 of its PID namespace, as in a
        container: SIGTERM reaches it directly (see `child_pid`). `files` maps
        sandbox paths under /tmp (the read-only root has no other mount
        points) to host files bound read-only there, as a kubelet mounts a
        Secret.
        """
        sandbox_env = {**self.env, **(env or {})}
        command = [
            need("setpriv"),
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            need("bwrap"),
            "--ro-bind",
            str(self.rootfs),
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--unshare-all",
            "--share-net",
            "--die-with-parent",
            "--as-pid-1",
            "--clearenv",
        ]
        if self.emulator is not None:
            command += ["--ro-bind", str(self.emulator), SANDBOX_EMULATOR]
        if tls_dir is not None:
            command += ["--ro-bind", str(tls_dir), SANDBOX_TLS_DIR]
            sandbox_env["TLS_SERVER_CERTS_DIR"] = SANDBOX_TLS_DIR
        for inside, host in sorted((files or {}).items()):
            if not inside.startswith("/tmp/"):
                raise ValueError(f"sandbox path {inside!r} is not under /tmp")
            command += ["--ro-bind", str(host), inside]
        if status_fd is not None:
            command += ["--json-status-fd", str(status_fd)]
        for name, value in sorted(sandbox_env.items()):
            command += ["--setenv", name, value]
        return [*command, "--", *self.program(args)]


def shebang(rootfs: Path, program: str) -> list[str]:
    """The interpreter (and its one argument) a `#!` script names; [] for a binary.

    Read as the kernel reads it: the first line, at most 256 bytes.
    """
    with (rootfs / program.lstrip("/")).open("rb") as file:
        first = file.readline(256)
    if not first.startswith(b"#!"):
        return []
    return first[2:].decode().split(maxsplit=1)


def _user(spec: str) -> tuple[int, int]:
    """uid and gid of an image's numeric `User` ("65534" or "65534:65534")."""
    uid, _, gid = spec.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        raise ValueError(f"image user {spec!r} is not numeric uid[:gid]")
    return int(uid), int(gid or uid)


def emulator(architecture: str) -> Path | None:
    """The qemu-user binary that runs an image of architecture here; None for the host's own."""
    if architecture == HOST_ARCHITECTURE:
        return None
    if architecture not in EMULATORS:
        raise ValueError(f"image architecture {architecture!r} has no emulator here")
    return Path(need(EMULATORS[architecture]))


def runtime_from_config(rootfs: Path, config: Mapping) -> Runtime:
    """The Runtime an image configuration describes for an unpacked rootfs."""
    settings = config.get("config") or {}
    uid, gid = _user(settings.get("User") or "0")
    env = dict(item.split("=", 1) for item in settings.get("Env") or [])
    entrypoint = tuple(settings.get("Entrypoint") or ()) + tuple(settings.get("Cmd") or ())
    return Runtime(
        rootfs=rootfs,
        entrypoint=entrypoint,
        uid=uid,
        gid=gid,
        env=env,
        emulator=emulator(config.get("architecture") or HOST_ARCHITECTURE),
    )


def unpack(package: Path, dest: Path) -> Runtime:
    """Unpack a package's image into dest/rootfs; every directory readable by its user.

    skopeo turns the docker-archive into an OCI layout, umoci applies its
    layers in order (as root, keeping owners and modes).
    """
    dest.mkdir(parents=True, exist_ok=True)
    layout, bundle = dest / "oci", dest / "bundle"
    shutil.rmtree(layout, ignore_errors=True)
    shutil.rmtree(bundle, ignore_errors=True)
    _run([need("skopeo"), "copy", "--quiet", f"docker-archive:{package}", f"oci:{layout}:image"])
    _run([need("umoci"), "unpack", "--image", f"{layout}:image", str(bundle)])
    shutil.rmtree(layout)
    # The sandbox starts as the image's user, who must reach the rootfs.
    for directory in (dest, bundle):
        directory.chmod(0o755)
    return runtime_from_config(bundle / "rootfs", image_config(package))


@dataclass(frozen=True)
class Confinement:
    """How a running process is confined, read from /proc: what the tests hold the sandbox to."""

    uids: tuple[int, ...]  # real, effective, saved, filesystem
    effective_capabilities: int
    root_options: tuple[str, ...]  # the per-mount options of /

    @classmethod
    def of(cls, pid: int) -> Confinement:
        proc = Path(f"/proc/{pid}")
        status = dict(line.split(":", 1) for line in (proc / "status").read_text().splitlines())
        # mountinfo: field 5 is the mount point, field 6 its per-mount options.
        mounts = {
            line.split()[4]: line.split()[5]
            for line in (proc / "mountinfo").read_text().splitlines()
        }
        return cls(
            uids=tuple(int(uid) for uid in status["Uid"].split()),
            effective_capabilities=int(status["CapEff"], 16),
            root_options=tuple(mounts["/"].split(",")),
        )


def child_pid(status_line: str) -> int:
    """The host PID of the sandboxed entrypoint, from bubblewrap's first JSON status line."""
    return int(json.loads(status_line)["child-pid"])


@dataclass
class Started:
    """A sandboxed runtime started by `start`; `status` is bubblewrap's JSON status pipe."""

    process: subprocess.Popen
    pid: int
    status: IO[str]

    def terminate(self, timeout: float = 20) -> int:
        """Send SIGTERM to the entrypoint (as a kubelet would) and return its exit code."""
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
        finally:
            self.status.close()


def start(runtime: Runtime, args: Sequence[str], *, log: Path, **kwargs) -> Started:
    """Start runtime.command(args, **kwargs) with its output in log.

    The status pipe stays open while the sandbox runs: bubblewrap writes the
    exit code to it last, and a closed pipe would kill it with SIGPIPE.
    """
    read_end, write_end = os.pipe()
    with open(log, "w") as out:
        process = subprocess.Popen(
            runtime.command(args, status_fd=write_end, **kwargs),
            stdout=out,
            stderr=subprocess.STDOUT,
            pass_fds=(write_end,),
        )
    os.close(write_end)
    status = os.fdopen(read_end)
    line = status.readline()
    if not line:
        process.wait()
        status.close()
        raise RuntimeError(f"sandbox failed to start ({process.returncode}): {log.read_text()}")
    return Started(process=process, pid=child_pid(line), status=status)


def packaged_command(runtimes: Mapping[str, Runtime]):
    """A `render.Functions` command: each function runs from its unpacked package."""

    def command(name: str, args: Sequence[str]) -> list[str]:
        return runtimes[name].command(args)

    return command


def unpack_all(directory: Path, dest: Path, functions: Sequence[str]) -> dict[str, Runtime]:
    """Unpack every function's package from directory into dest/<function>."""
    return {name: unpack(xpkg(name, directory), dest / name) for name in functions}
