"""Modelplane installed on the e2e control plane the way the README installs it.

The README's steps, with the registry on 127.0.0.1 standing in for the
public ones:

1. The packages are pushed under their public names with the local
   registry in front: the Configuration (apis/), the three Function packages
   and provider-kubernetes' package. The names are read from the manifests
   that use them: the Configuration and the Provider from
   deploy/control-plane, the functions from the Configuration's `dependsOn`
   (pinned to one version each).
2. An ImageConfig per public registry prefix rewrites it to the local
   registry (`spec.rewriteImage`), as the README documents for a mirror or a
   private registry. Nothing else knows the packages are local. A run on a
   provider-kubernetes release other than the one deploy/control-plane names
   (`crossplane_versions`: the newest) pushes that release under its own tag and adds one
   ImageConfig on the manifest's exact reference, pointing it there
   (`release_image_config`): the package manager picks the longest matching
   prefix, so this one wins over the owner's.
3. `kubectl apply -f deploy/control-plane`, verbatim (`install_steps`, the
   README's own line): provider-kubernetes' Provider and
   DeploymentRuntimeConfig, and the Configuration.
4. The package manager installs the provider and, as the Configuration's
   dependencies, the three functions; with the External package runtime the
   harness runs each as its revision appears (`provider`, `functions`,
   `runtime`). The Configuration then establishes its XRDs and Compositions
   and turns Healthy, which the README's `kubectl wait` awaits.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from modelplane_devtools.paths import ROOT
from modelplane_devtools.registry import mirrored

from modelplane_e2e import functions, install_steps, pki, provider, runtime
from modelplane_e2e.binaries import binary
from modelplane_e2e.crossplane_versions import Release
from modelplane_e2e.kube import Kube, condition, eventually
from modelplane_e2e.stack import Installed, Stack

CONTROL_PLANE = ROOT / "deploy" / "control-plane"
CONFIGURATION_META = ROOT / "apis" / "crossplane.yaml"


def control_plane_manifests() -> list[dict]:
    docs = []
    for path in sorted(CONTROL_PLANE.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def the(kind: str, docs: list[dict]) -> dict:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def function_dependencies() -> list[dict]:
    """The Configuration's Function dependencies (apis/crossplane.yaml `spec.dependsOn`)."""
    meta = yaml.safe_load(CONFIGURATION_META.read_text())
    return [d for d in meta["spec"]["dependsOn"] if d.get("kind") == "Function"]


def repository(reference: str) -> str:
    """A package reference without its tag or digest."""
    without_digest = reference.split("@", 1)[0]
    host_and_path, _, last = without_digest.rpartition("/")
    return f"{host_and_path}/{last.split(':', 1)[0]}"


def _rewrite(name: str, prefix: str, to: str) -> dict:
    """An ImageConfig named e2e-<name> that pulls every image under `prefix` from `to`."""
    return {
        "apiVersion": "pkg.crossplane.io/v1beta1",
        "kind": "ImageConfig",
        "metadata": {"name": "e2e-" + re.sub(r"[^a-z0-9]+", "-", name).strip("-")},
        "spec": {
            "matchImages": [{"type": "Prefix", "prefix": prefix}],
            "rewriteImage": {"prefix": to},
        },
    }


def image_configs(prefixes: set[str], registry: str) -> list[dict]:
    """One ImageConfig per public prefix, rewriting it to the local registry."""
    return [_rewrite(prefix, prefix, mirrored(prefix, registry)) for prefix in sorted(prefixes)]


def with_tag(reference: str, tag: str) -> str:
    """The reference's repository at `tag`."""
    return f"{repository(reference)}:{tag}"


def release_image_config(reference: str, pushed: str, registry: str) -> dict | None:
    """The ImageConfig that serves `reference` (exactly as a manifest names it) from `pushed`
    in the local registry, or None when they are the same reference."""
    if pushed == reference:
        return None
    return _rewrite("release-" + pushed, reference, mirrored(pushed, registry))


def owner_prefix(reference: str) -> str:
    """`ghcr.io/modelplane-ai` of `ghcr.io/modelplane-ai/compose-model-replica:v0.1.0`."""
    return repository(reference).rsplit("/", 1)[0]


@dataclass(frozen=True)
class Push:
    """A package file and the public reference it is installed by."""

    package: Path
    reference: str


def public_references() -> list[str]:
    """What README step 2 pushes, named as the manifests install it: the Configuration,
    provider-kubernetes (deploy/control-plane), then each Function dependency."""
    docs = control_plane_manifests()
    return [
        the("Configuration", docs)["spec"]["package"],
        the("Provider", docs)["spec"]["package"],
        *(f"{d['package']}:{d['version']}" for d in function_dependencies()),
    ]


def provider_push(out: Path, release: Release) -> Push:
    """provider-kubernetes' package at `release`, named as deploy/control-plane names it but
    tagged with its own version (`release_image_config` bridges the two when they differ)."""
    _, reference, *_ = public_references()
    return Push(provider.package(out, release), with_tag(reference, f"v{release.version()}"))


def pushes(source: functions.PackageSource, out: Path, release: Release) -> list[Push]:
    configuration, _, *function_references = public_references()
    todo = [Push(source.configuration(out), configuration), provider_push(out, release)]
    for reference in function_references:
        name = repository(reference).rsplit("/", 1)[-1]
        todo.append(Push(source.package(name, out), reference))
    return todo


def mirror_configs(todo: list[Push], registry: str, release: Release) -> list[dict]:
    """README step 2's ImageConfigs for what was pushed, and the one that serves the
    provider release deploy/control-plane names from `release`'s package when they differ."""
    named = the("Provider", control_plane_manifests())["spec"]["package"]
    served = release_image_config(named, with_tag(named, f"v{release.version()}"), registry)
    configs = image_configs({owner_prefix(p.reference) for p in todo}, registry)
    return configs + ([served] if served else [])


def push(todo: list[Push], registry: str) -> None:
    for item in todo:
        functions.run(
            [
                binary("crossplane"),
                "xpkg",
                "push",
                f"--package-files={item.package}",
                mirrored(item.reference, registry),
            ]
        )


def installed_function(kube: Kube, package: str) -> dict | None:
    """The Function the package manager created for a dependency's repository, or None."""
    for function in kube.list("functions.pkg.crossplane.io"):
        if repository(function["spec"]["package"]) == package:
            return function
    return None


def install(stack: Stack, source: functions.PackageSource | None = None) -> Installed:
    """Install Modelplane on the stack's control plane as README step 1 does, and serve
    what the package manager installed."""
    assert stack.control_plane is not None and stack.root_ca is not None, "start the stack first"
    kube = stack.control_plane.kube
    supervisor, registry, root_ca, workdir = (
        stack.supervisor, stack.registry, stack.root_ca, stack.workdir,
    )  # fmt: skip
    source = source or functions.source_from_environment()
    out = workdir / "packages"
    out.mkdir(parents=True, exist_ok=True)
    release = stack.versions.provider
    todo = pushes(source, out, release)
    push(todo, registry)
    kube.apply(mirror_configs(todo, registry, release))
    install_steps.run(kube, install_steps.CONTROL_PLANE_MANIFESTS)

    docs = control_plane_manifests()
    ca = pki.KeyPair(root_ca / "tls.crt", root_ca / "tls.key")
    provider_name = the("Provider", docs)["metadata"]["name"]
    args = provider.serve(kube, supervisor, ca, workdir, provider_name, release)
    done = Installed(the("Configuration", docs)["metadata"]["name"], provider_name, args)
    for dependency in function_dependencies():
        function = eventually(
            functools.partial(installed_function, kube, dependency["package"]),
            f"a Function installed for the dependency {dependency['package']}",
            timeout=180,
        )
        name = function["metadata"]["name"]
        done.functions[name] = functions.serve(kube, supervisor, function, ca, workdir, source)
    runtime.wait_healthy(kube, "providers.pkg.crossplane.io", provider_name)
    for name in done.functions:
        runtime.wait_healthy(kube, "functions.pkg.crossplane.io", name)
    install_steps.run(kube, install_steps.CONFIGURATION_HEALTHY)
    return done


def _owned_by_configuration(obj: dict | None) -> bool:
    owners = (obj or {}).get("metadata", {}).get("ownerReferences") or []
    return any(o.get("kind") == "ConfigurationRevision" for o in owners)


def apis_served_by_the_configuration(kube: Kube) -> list[str]:
    """Every XRD and Composition of apis/ is the Configuration's; every step's Function installed.

    Returns the function names the Compositions reference; raises
    AssertionError saying what is missing (for `eventually`).
    """
    referenced = []
    for path in sorted((ROOT / "apis").glob("*/*.yaml")):
        desired = yaml.safe_load(path.read_text())
        kind = {"CompositeResourceDefinition": "xrd", "Composition": "composition"}[desired["kind"]]
        name = desired["metadata"]["name"]
        live = kube.get(kind, name)
        assert _owned_by_configuration(live), f"{kind} {name} not from a ConfigurationRevision"
        if kind == "xrd":
            established = condition(live, "Established")
            assert established and established["status"] == "True", f"XRD {name}: {established}"
            continue
        for step in (live or {})["spec"]["pipeline"]:
            function = step["functionRef"]["name"]
            assert kube.get("functions.pkg.crossplane.io", function), (
                f"Composition {name} step {step['step']} names Function {function}: not installed"
            )
            referenced.append(function)
    return referenced
