"""What Crossplane's Deployment runtime does for a package revision, done by the harness.

Crossplane core runs with `--package-runtime=External`: the package manager
pulls, unpacks and establishes each Function and Provider package, but
leaves running it to someone else. Its Deployment runtime would, per active
revision, start the package's image, issue it a server certificate from
Crossplane's root CA and keep it in a Secret, and point a Service at it; the
package manager then reads three things from the revision:

- `status.tlsServerSecretName`: the Secret holding that certificate. The
  establisher refuses to go on without it (`waiting for package runtime
  controller to set revision's webhook TLS secret`), and for a provider it
  writes the Secret's `tls.crt` as the `caBundle` of every conversion
  webhook, whose service it sets to the parent package's name in Crossplane's
  namespace, port 9443.
- the `RuntimeHealthy` condition, without which the package never turns
  Healthy (`Package runtime health is "Unknown"`).
- for a function, `status.endpoint`: where composition dials it.

This module does those three for a runtime the harness started on 127.0.0.1
(`functions` and `provider` start them), and, for a provider, the Service:
an ExternalName Service named after the package that resolves to 127.0.0.1,
so the API server's webhook client (which resolves a service reference to
`<externalName>:<port>` and checks the certificate against
`<service>.<namespace>.svc`) reaches the process. Certificates carry that DNS
name and the IP 127.0.0.1.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from modelplane_e2e import pki
from modelplane_e2e.kube import Kube, condition, eventually

CROSSPLANE_NAMESPACE = "crossplane-system"
PARENT_PACKAGE_LABEL = "pkg.crossplane.io/package"
# Where the package manager points a provider's webhooks (revision.ServicePort).
WEBHOOK_SERVICE_PORT = 9443


@dataclass(frozen=True)
class Certificates:
    """A runtime's server certificate: tls.crt (its CA after it), tls.key and ca.crt in a folder."""

    directory: Path

    @property
    def files(self) -> dict[str, Path]:
        return {name: self.directory / name for name in ("tls.crt", "tls.key", "ca.crt")}


def issue(ca: pki.KeyPair, directory: Path, name: str) -> Certificates:
    """A server certificate for the package `name`, as Crossplane's runtime issues one.

    Valid for 127.0.0.1 (a function's endpoint is dialled by address) and for
    `<name>.<namespace>.svc` (the name a webhook client checks). tls.crt holds
    the certificate and then the CA, so the `caBundle` the package manager
    copies from it trusts the CA too. Every file is world-readable: a
    packaged runtime runs as its image's unprivileged user.
    """
    serving = pki.sign(
        ca,
        directory.with_name(f"{directory.name}-issued"),
        "server",
        pki.Subject(name, ips=("127.0.0.1",), dns=(f"{name}.{CROSSPLANE_NAMESPACE}.svc",)),
    )
    directory.mkdir(parents=True, exist_ok=True)
    certs = Certificates(directory)
    files = certs.files
    files["tls.crt"].write_bytes(serving.cert.read_bytes() + ca.cert.read_bytes())
    files["tls.key"].write_bytes(serving.key.read_bytes())
    files["ca.crt"].write_bytes(ca.cert.read_bytes())
    directory.chmod(0o755)
    for path in files.values():
        path.chmod(0o644)
    return certs


def active_revision(kube: Kube, kind: str, package: str) -> dict | None:
    """The active revision (`functionrevision`, `providerrevision`) of a package, or None."""
    for revision in kube.list(kind, selector=f"{PARENT_PACKAGE_LABEL}={package}"):
        if revision["spec"].get("desiredState") == "Active":
            return revision
    return None


def wait_for_revision(kube: Kube, kind: str, package: str) -> dict:
    return eventually(
        functools.partial(active_revision, kube, kind, package),
        f"an active {kind} of {package}",
        timeout=180,
    )


def hand_over_certificate(kube: Kube, kind: str, revision: dict, certs: Certificates) -> None:
    """The runtime's Secret, named in the revision's `status.tlsServerSecretName`.

    What the Deployment runtime does before the package's pod starts: from
    here on the package manager can establish the revision's objects (a
    provider's CRDs, their webhooks trusting this certificate).
    """
    package = revision["metadata"]["labels"][PARENT_PACKAGE_LABEL]
    secret = f"{package}-tls-server"
    kube.kubectl(
        "create", "secret", "generic", secret, "-n", CROSSPLANE_NAMESPACE,
        *(f"--from-file={key}={path}" for key, path in certs.files.items()),
    )  # fmt: skip
    name = revision["metadata"]["name"]
    kube.patch(kind, name, {"status": {"tlsServerSecretName": secret}}, subresource="status")


def report_healthy(
    kube: Kube, kind: str, name: str, *, served_at: str, endpoint: str | None = None
) -> None:
    """The revision's `RuntimeHealthy` condition (and a function's `status.endpoint`)."""
    revision = kube.get(kind, name) or {}
    # A merge patch replaces the whole list: the other conditions are carried over.
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
            "message": f"served by the e2e harness at {served_at}",
            "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    )
    status: dict[str, object] = {"conditions": conditions}
    if endpoint is not None:
        status["endpoint"] = endpoint
    kube.patch(kind, name, {"status": status}, subresource="status")


def webhook_service(kube: Kube, package: str) -> None:
    """The Service the package manager names in a provider's webhooks, resolving to 127.0.0.1."""
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": package, "namespace": CROSSPLANE_NAMESPACE},
            "spec": {
                "type": "ExternalName",
                "externalName": "127.0.0.1",
                "ports": [{"name": "webhook", "port": WEBHOOK_SERVICE_PORT}],
            },
        }
    )


class RuntimeConfigUnusable(RuntimeError):
    pass


def runtime_config(kube: Kube, package: dict) -> dict:
    """The DeploymentRuntimeConfig a Provider or Function names (`default` when it names none)."""
    reference = (package.get("spec") or {}).get("runtimeConfigRef") or {}
    name = reference.get("name", "default")
    config = kube.get("deploymentruntimeconfig", name)
    if config is None:
        kind = package.get("kind", "package")
        raise RuntimeConfigUnusable(f"{kind} names DeploymentRuntimeConfig {name}: not found")
    return config


def pods(config: dict) -> int:
    """How many pods the runtime config's Deployment runs (`spec.replicas`, 1 when unset)."""
    template = ((config.get("spec") or {}).get("deploymentTemplate") or {}).get("spec") or {}
    replicas = template.get("replicas", 1)
    if not isinstance(replicas, int) or replicas < 1:
        name = (config.get("metadata") or {}).get("name")
        raise RuntimeConfigUnusable(f"DeploymentRuntimeConfig {name} replicas {replicas!r}")
    return replicas


def healthy(kube: Kube, kind: str, name: str) -> bool:
    """The package (`function`, `provider`, `configuration`) is Installed and Healthy."""
    package = kube.get(kind, name)
    for kind_ in ("Installed", "Healthy"):
        c = condition(package, kind_)
        assert c and c["status"] == "True", f"{kind} {name} {kind_}: {c}"
    return True


def wait_healthy(kube: Kube, kind: str, name: str, timeout: float = 180) -> None:
    eventually(
        functools.partial(healthy, kube, kind, name),
        f"{kind} {name} Installed and Healthy",
        timeout=timeout,
    )
