"""Fixtures for the package tests: the built packages, unpacked, and test-made mTLS files.

The packages are those `make packages` wrote to dist/xpkg (`make test` builds
them first). A missing package or tool is a failure, never a skip.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from modelplane_devtools import packages, render

FUNCTIONS = render.FUNCTIONS


@pytest.fixture(scope="session")
def xpkgs() -> dict[str, Path]:
    return {name: packages.xpkg(name) for name in FUNCTIONS}


@pytest.fixture(scope="session")
def runtimes(xpkgs) -> Iterator[dict[str, packages.Runtime]]:
    """Each package's image unpacked to a root filesystem, once per session."""
    root = packages.world_readable_tempdir("modelplane-xpkg-")
    try:
        yield {name: packages.unpack(path, root / name) for name, path in xpkgs.items()}
    finally:
        shutil.rmtree(root)


@dataclass(frozen=True)
class Certificates:
    """A test CA, a server certificate for 127.0.0.1 and a client certificate."""

    server_dir: Path  # tls.crt, tls.key, ca.crt: what the SDK reads
    ca: bytes
    client_cert: bytes
    client_key: bytes


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run([packages.need("openssl"), *args], cwd=cwd, check=True, capture_output=True)


def _sign(name: str, subject: str, extensions: str, cwd: Path) -> None:
    _openssl(
        "req",
        "-new",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
        "-subj",
        subject,
        cwd=cwd,
    )
    (cwd / f"{name}.ext").write_text(extensions)
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-out",
        f"{name}.crt",
        "-extfile",
        f"{name}.ext",
        cwd=cwd,
    )


@pytest.fixture(scope="session")
def certificates() -> Iterator[Certificates]:
    """Made with openssl for this session; the key is readable by the function's user."""
    root = packages.world_readable_tempdir("modelplane-tls-")
    try:
        _openssl(
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "1",
            "-subj",
            "/CN=modelplane test CA",
            cwd=root,
        )
        _sign(
            "server",
            "/CN=function",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
            root,
        )
        _sign("client", "/CN=crossplane", "extendedKeyUsage=clientAuth\n", root)
        server = root / "server"
        server.mkdir(mode=0o755)
        shutil.copy(root / "ca.crt", server / "ca.crt")
        shutil.copy(root / "server.crt", server / "tls.crt")
        shutil.copy(root / "server.key", server / "tls.key")
        for path in server.iterdir():
            path.chmod(0o644)
        yield Certificates(
            server_dir=server,
            ca=(root / "ca.crt").read_bytes(),
            client_cert=(root / "client.crt").read_bytes(),
            client_key=(root / "client.key").read_bytes(),
        )
    finally:
        shutil.rmtree(root)
