"""provider-kubernetes: its package built from its module, its runtime run by the harness.

The package is the provider's own `package/` folder (crossplane.yaml and its
CRDs) in the Go module that pins the release the run uses (`crossplane_versions`: the
newest, or the floor in tools/provider-kubernetes), built with `crossplane
xpkg build` and no controller image: the package manager installs it, and
establishes its CRDs (as ManagedResourceDefinitions, the provider declaring
SafeStart, activated by Crossplane's default activation policy), from it.

The runtime is the binary `make e2e-tools` builds from the same module, run
the way Crossplane's Deployment runtime would run the package's image: with
exactly the container arguments of the DeploymentRuntimeConfig its Provider
names (deploy/control-plane, read back from the API server), serving its
conversion webhook with a certificate from Crossplane's root CA (`runtime`).
What a pod would get from its Deployment is passed as environment: the
kubeconfig, TLS_SERVER_CERTS_DIR, a health probe address on 127.0.0.1 (the
binary's default, :8081, is every interface), and debug logs for the
suite's record. Its webhook port, 9443, is fixed by the binary.
"""

from __future__ import annotations

import functools
from pathlib import Path

from modelplane_devtools.processes import Supervisor, free_port, listening

from modelplane_e2e import pki, runtime
from modelplane_e2e.binaries import binary, module_dir
from modelplane_e2e.crossplane_versions import Release
from modelplane_e2e.functions import build_package
from modelplane_e2e.kube import Kube, condition, eventually

# provider-kubernetes serves its conversion webhook here; the port is fixed
# by the binary (controller-runtime's default).
WEBHOOK_PORT = 9443

# The container Crossplane's Deployment runtime runs a package's image in.
RUNTIME_CONTAINER = "package-runtime"


def package(out: Path, release: Release) -> Path:
    """The release's package (no runtime image) from its module source."""
    source = module_dir(release.tools_module, release.module) / "package"
    return build_package(source, out / f"provider-kubernetes-v{release.version()}.xpkg")


def runtime_arguments(config: dict) -> list[str]:
    """The arguments a DeploymentRuntimeConfig gives the package's runtime container."""
    template = ((config.get("spec") or {}).get("deploymentTemplate") or {}).get("spec") or {}
    containers = ((template.get("template") or {}).get("spec") or {}).get("containers") or []
    for container in containers:
        if container.get("name") == RUNTIME_CONTAINER:
            return [str(a) for a in container.get("args") or []]
    name = (config.get("metadata") or {}).get("name")
    raise runtime.RuntimeConfigUnusable(
        f"DeploymentRuntimeConfig {name} has no {RUNTIME_CONTAINER}"
    )


DEFINITIONS = ("CustomResourceDefinition", "ManagedResourceDefinition")


def established_crds(kube: Kube, revision: str) -> list[str]:
    """The CRDs the revision established, once every one is Established; else AssertionError.

    A ManagedResourceDefinition becomes a CRD of the same name when it is
    activated, so both kinds of the revision's `status.objectRefs` name a CRD.
    """
    refs = ((kube.get("providerrevision", revision) or {}).get("status") or {}).get("objectRefs")
    names = [r["name"] for r in refs or [] if r.get("kind") in DEFINITIONS]
    assert names, f"ProviderRevision {revision} has established no CRD yet"
    for name in names:
        established = condition(kube.get("crd", name), "Established")
        assert established and established["status"] == "True", f"CRD {name}: {established}"
    return names


def serve(
    kube: Kube, supervisor: Supervisor, ca: pki.KeyPair, workdir: Path, name: str, release: Release
) -> list[str]:
    """Run the Provider `name` (as `kube`'s admin) with the binary of `release` once its
    revision exists; returns the arguments it runs with."""
    revision = runtime.wait_for_revision(kube, "providerrevisions", name)
    provider = kube.get("provider", name)
    assert provider, f"Provider {name} vanished"
    args = runtime_arguments(runtime.runtime_config(kube, provider))
    certs = runtime.issue(ca, workdir / "provider-kubernetes" / "tls", name)
    runtime.webhook_service(kube, name)
    runtime.hand_over_certificate(kube, "providerrevision", revision, certs)
    # Crossplane's runtime creates the provider's Deployment once the revision
    # is established; waiting for the CRDs themselves also keeps
    # provider-kubernetes v1.2.1's SafeStart gate from missing a CRD that
    # turned Established after it first saw it (it then never starts that
    # kind's controller: seen here with the namespaced Object).
    eventually(
        functools.partial(established_crds, kube, revision["metadata"]["name"]),
        f"the CRDs of {name}'s revision Established",
        timeout=180,
    )
    process = supervisor.start(
        name,
        [binary(release.binary), *args],
        env={
            "KUBECONFIG": str(kube.kubeconfig),
            "TLS_SERVER_CERTS_DIR": str(certs.directory),
            "HEALTH_PROBE_BIND_ADDRESS": f"127.0.0.1:{free_port()}",
            "PROVIDER_KUBERNETES_DEBUG": "true",
        },
    )
    supervisor.wait_until(process, lambda: listening(WEBHOOK_PORT), "serving webhooks")
    runtime.report_healthy(
        kube,
        "providerrevision",
        revision["metadata"]["name"],
        served_at=f"127.0.0.1:{WEBHOOK_PORT}",
    )
    return args
