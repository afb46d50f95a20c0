"""Certificates for the e2e stack, made with the openssl command line.

One test CA signs every serving and client certificate the stack needs
(API servers, provider-kubernetes' conversion webhook, the admin client);
`sign` also issues the functions' server certificates from Crossplane's own
CA, which `crossplane core init` generates and keeps in a Secret. Keys are
EC P-256: fast to make, accepted by Go, gRPC and etcd alike.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


class OpensslMissing(RuntimeError):
    pass


def _openssl(*args: str, cwd: Path) -> None:
    binary = shutil.which("openssl")
    if binary is None:
        raise OpensslMissing("openssl is missing: install it (Debian: apt-get install openssl)")
    subprocess.run([binary, *args], cwd=cwd, check=True, capture_output=True)


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


def new_key(path: Path) -> Path:
    _openssl(
        "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(path), cwd=path.parent
    )
    return path


def new_ca(directory: Path, name: str) -> KeyPair:
    directory.mkdir(parents=True, exist_ok=True)
    key = new_key(directory / f"{name}.key")
    cert = directory / f"{name}.crt"
    _openssl(
        "req", "-x509", "-new", "-key", str(key), "-out", str(cert), "-days", "2",
        "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        cwd=directory,
    )  # fmt: skip
    return KeyPair(cert, key)


@dataclass(frozen=True)
class Subject:
    """Who a certificate names: CN and O (a client's user and group to Kubernetes) and the
    subject alternative names a server answers to."""

    common_name: str
    organization: str | None = None
    ips: tuple[str, ...] = ()
    dns: tuple[str, ...] = ()


def sign(ca: KeyPair, directory: Path, name: str, subject: Subject) -> KeyPair:
    """A certificate for both server and client use, signed by ca, kept as directory/name.*.

    Subject alternative names are the given IPs and DNS names; a client
    certificate (no names) is identified by its CN and O, which Kubernetes
    reads as user and group.
    """
    directory.mkdir(parents=True, exist_ok=True)
    key = new_key(directory / f"{name}.key")
    csr = directory / f"{name}.csr"
    cert = directory / f"{name}.crt"
    organization = f"/O={subject.organization}" if subject.organization else ""
    distinguished = f"/CN={subject.common_name}{organization}"
    _openssl(
        "req", "-new", "-key", str(key), "-out", str(csr), "-subj", distinguished, cwd=directory
    )  # fmt: skip
    extensions = directory / f"{name}.ext"
    names = [f"IP:{ip}" for ip in subject.ips] + [f"DNS:{d}" for d in subject.dns]
    lines = [
        "basicConstraints=CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "extendedKeyUsage=serverAuth,clientAuth",
    ]
    if names:
        lines.append("subjectAltName=" + ",".join(names))
    extensions.write_text("\n".join(lines) + "\n")
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key),
        "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(extensions),
        cwd=directory,
    )  # fmt: skip
    return KeyPair(cert, key)


def service_account_keys(directory: Path) -> KeyPair:
    """The key pair API servers verify and controller managers sign tokens with."""
    directory.mkdir(parents=True, exist_ok=True)
    key = new_key(directory / "service-account.key")
    public = directory / "service-account.pub"
    _openssl("ec", "-in", str(key), "-pubout", "-out", str(public), cwd=directory)
    return KeyPair(public, key)


@dataclass(frozen=True)
class ClusterCredentials:
    """What the clusters of one run share: the CA every server and client
    certificate chains to, the admin client (group system:masters) and the
    service-account key pair."""

    ca: KeyPair
    admin: KeyPair
    service_accounts: KeyPair


def cluster_credentials(directory: Path, ca_name: str) -> ClusterCredentials:
    ca = new_ca(directory, ca_name)
    admin = sign(ca, directory, "admin", Subject("admin", organization="system:masters"))
    return ClusterCredentials(ca, admin, service_account_keys(directory))
