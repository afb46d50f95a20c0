"""The install the session did, as the README's install section does it, checked.

The session (`conftest.py`, `modelplane_e2e.install`) pushed the
packages under their public names to the local registry, put an ImageConfig
in front, applied `deploy/control-plane` and waited for the Configuration.
These tests hold what that must have produced: the package manager installed
the functions and the provider as the Configuration's dependencies, from the
local registry; provider-kubernetes runs with exactly its
DeploymentRuntimeConfig's arguments; its CRDs are the package manager's and
their conversion webhook answers through the service reference the package
manager wrote.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from modelplane_devtools import registry
from modelplane_devtools.paths import ROOT
from modelplane_e2e import install
from modelplane_e2e.binaries import binary
from modelplane_e2e.kube import condition

pytestmark = pytest.mark.e2e


def _manifest(kind: str) -> dict:
    """The one object of a kind in deploy/control-plane, as the file states it."""
    return install.the(kind, install.control_plane_manifests())


def test_the_configuration_is_healthy_and_its_dependencies_are_in_its_lock(planes, e2e_stack):
    control, _ = planes
    configuration = control.get(
        "configurations.pkg.crossplane.io", e2e_stack.installed.configuration
    )
    assert condition(configuration, "Healthy")["status"] == "True"
    assert configuration["spec"]["package"] == _manifest("Configuration")["spec"]["package"]
    # Pulled through the ImageConfig: the public name, resolved to the local registry.
    resolved = configuration["status"]["resolvedPackage"]
    assert resolved.startswith(e2e_stack.registry + "/"), resolved
    lock = control.get("locks.pkg.crossplane.io", "lock")
    wanted = {
        d["package"]
        for d in yaml.safe_load((ROOT / "apis" / "crossplane.yaml").read_text())["spec"][
            "dependsOn"
        ]
    }
    (entry,) = [p for p in lock["packages"] if p["kind"] == "Configuration"]
    assert {d["package"] for d in entry["dependencies"]} == wanted
    # ...each installed: a package in the Lock from that source.
    assert wanted <= {p["source"] for p in lock["packages"]}


def test_provider_kubernetes_runs_with_exactly_the_runtime_configs_arguments(e2e_stack):
    wanted = _manifest("Provider")["spec"]["runtimeConfigRef"]["name"]
    (config,) = [
        d
        for d in install.control_plane_manifests()
        if d["kind"] == "DeploymentRuntimeConfig" and d["metadata"]["name"] == wanted
    ]
    (container,) = config["spec"]["deploymentTemplate"]["spec"]["template"]["spec"]["containers"]
    (process,) = [
        p for p in e2e_stack.supervisor.processes if p.name == e2e_stack.installed.provider
    ]
    argv = Path(f"/proc/{process.pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    assert argv[1:] == container["args"]
    assert "--enable-watches" in argv


def _argv(stack, name: str) -> list[str]:
    (process,) = [p for p in stack.supervisor.processes if p.name == name]
    return Path(f"/proc/{process.pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def test_the_core_and_the_provider_that_run_are_the_releases_the_run_selected(planes, e2e_stack):
    """MODELPLANE_E2E_VERSIONS picks each end of the supported range (`crossplane_versions`): the
    processes are those releases' binaries, and the package manager pulled the provider's
    package of that release, through the ImageConfig when the manifest names another."""
    control, _ = planes
    chosen = e2e_stack.versions
    core = _argv(e2e_stack, "crossplane")[0]
    assert core == str(binary(chosen.crossplane.binary))
    stamped = subprocess.run([core, "--version"], capture_output=True, text=True, check=True)
    assert stamped.stdout.strip() == f"v{chosen.crossplane.version()}"
    assert _argv(e2e_stack, e2e_stack.installed.provider)[0] == str(binary(chosen.provider.binary))
    provider = control.get("providers.pkg.crossplane.io", e2e_stack.installed.provider)
    named = _manifest("Provider")["spec"]["package"]
    pulled = install.with_tag(named, f"v{chosen.provider.version()}")
    assert provider["status"]["resolvedPackage"] == registry.mirrored(pulled, e2e_stack.registry)


def test_the_providers_crds_are_the_package_managers(planes, e2e_stack):
    control, _ = planes
    for name in ("objects.kubernetes.m.crossplane.io", "objects.kubernetes.crossplane.io"):
        crd = control.get("crd", name)
        assert crd, f"CRD {name} missing"
        owners = {o["kind"] for o in crd["metadata"].get("ownerReferences") or []}
        assert owners & {"ManagedResourceDefinition", "ProviderRevision"}, (name, owners)


def test_the_conversion_webhook_answers_through_the_package_managers_service(planes, e2e_stack):
    """An Object stored as v1alpha2, read as v1alpha1: the API server calls the webhook."""
    control, _ = planes
    crd = control.get("crd", "objects.kubernetes.crossplane.io")
    client = crd["spec"]["conversion"]["webhook"]["clientConfig"]
    assert client["service"]["name"] == e2e_stack.installed.provider
    assert client["service"]["port"] == 9443
    name = "e2e-conversion-probe"
    control.apply(
        {
            "apiVersion": "kubernetes.crossplane.io/v1alpha2",
            "kind": "Object",
            # Paused: the provider leaves it alone; only the API server reads it.
            "metadata": {"name": name, "annotations": {"crossplane.io/paused": "true"}},
            "spec": {
                "forProvider": {
                    "manifest": {"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": name, "namespace": "default"}}
                }
            },
        }
    )  # fmt: skip
    try:
        old = control.get("objects.v1alpha1.kubernetes.crossplane.io", name)
        assert old and old["apiVersion"] == "kubernetes.crossplane.io/v1alpha1", old
        manifest = old["spec"]["forProvider"]["manifest"]
        assert manifest["metadata"]["name"] == name
    finally:
        control.delete("objects.v1alpha2.kubernetes.crossplane.io", name)
