"""What is inside the Configuration package, and what it depends on.

`make packages` builds dist/xpkg/modelplane-fleet.xpkg from apis/
(crossplane.yaml, the XRDs and the Compositions). These tests read it back
with the Crossplane CLI (`crossplane xpkg extract`): its metadata, its
objects (exactly apis/, field for field), and its dependencies, which
must be the versions this repository releases and runs: the three functions
at the workspace's version, provider-kubernetes and Crossplane floored at
the releases the e2e runs (the Go modules in tools/). That the package
manager names the dependencies as the Compositions reference them is
checked where the package manager runs: the e2e installs this package.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import tarfile

import pytest
import yaml
from modelplane_devtools import packages, render, version

ROOT = render.ROOT
CONFIGURATION = "modelplane-fleet"
SOURCES = sorted((ROOT / "apis").glob("*/*.yaml"))
PINS = {pin.tools_module: pin.version() for pin in version.PINS}


@pytest.fixture(scope="module")
def package_docs(tmp_path_factory) -> list[dict]:
    """The documents of the built Configuration's package layer, metadata first."""
    out = tmp_path_factory.mktemp("configuration") / "package.gz"
    done = subprocess.run(
        [str(render.crossplane()), "xpkg", "extract",
         "--from-xpkg", str(packages.xpkg(CONFIGURATION)), f"--output={out}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return render.load_all(gzip.decompress(out.read_bytes()).decode())


@pytest.fixture(scope="module")
def meta(package_docs) -> dict:
    return package_docs[0]


def _dependencies(meta: dict, kind: str) -> dict[str, str]:
    return {d["package"]: d["version"] for d in meta["spec"]["dependsOn"] if d["kind"] == kind}


def test_the_package_is_a_configuration_with_its_metadata(meta):
    assert (meta["apiVersion"], meta["kind"]) == ("meta.pkg.crossplane.io/v1", "Configuration")
    assert meta["metadata"]["name"] == CONFIGURATION
    annotations = meta["metadata"]["annotations"]
    for key in ("description", "source", "license", "maintainer", "readme"):
        assert annotations.get(f"meta.crossplane.io/{key}"), f"no meta.crossplane.io/{key}"


def test_it_carries_exactly_the_xrds_and_compositions_of_apis(package_docs):
    carried = {(d["kind"], d["metadata"]["name"]): d for d in package_docs[1:]}
    sources = {}
    for path in SOURCES:
        doc = yaml.safe_load(path.read_text())
        sources[(doc["kind"], doc["metadata"]["name"])] = doc
    assert sorted(carried) == sorted(sources)
    for key, doc in sources.items():
        # The CLI writes each object back with an empty status; the rest is the source.
        assert {k: v for k, v in carried[key].items() if k != "status"} == doc, key
    kinds = sorted(kind for kind, _ in carried)
    assert kinds == ["CompositeResourceDefinition"] * 3 + ["Composition"] * 3


def test_it_has_one_layer_and_no_runtime(tmp_path):
    with tarfile.open(packages.xpkg(CONFIGURATION)) as archive:
        listing = archive.extractfile("manifest.json")
        assert listing is not None
        (entry,) = json.load(listing)
    assert len(entry["Layers"]) == 1, "the package layer alone"
    config = packages.image_config(packages.xpkg(CONFIGURATION))["config"]
    assert not config.get("Entrypoint") and not config.get("Cmd")


def test_the_three_functions_are_pinned_to_the_workspace_version(meta):
    functions = _dependencies(meta, "Function")
    assert {render.program_of(p) for p in functions} == set(render.FUNCTIONS)
    assert set(functions.values()) == {version.tag()}


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        pytest.param(
            lambda m: _dependencies(m, "Provider")[
                "xpkg.crossplane.io/crossplane-contrib/provider-kubernetes"
            ],
            f">=v{PINS['provider-kubernetes']}, <v2.0.0",
            id="provider-kubernetes is floored at the release the e2e runs, below its next major",
        ),
        pytest.param(
            lambda m: m["spec"]["crossplane"]["version"],
            f">=v{PINS['crossplane-core']}-0",
            id="Crossplane is floored at the core the e2e runs, its vendor builds included",
        ),
    ],
)
def test_what_it_runs_on_is_floored_at_what_the_e2e_runs(meta, field, expected):
    assert field(meta) == expected


def test_the_functions_installed_by_hand_are_its_dependencies(meta):
    """examples/functions.yaml installs, without the Configuration, what it depends on."""
    listed = list(yaml.safe_load_all((ROOT / "examples" / "functions.yaml").read_text()))
    pinned = {f"{p}:{v}" for p, v in _dependencies(meta, "Function").items()}
    assert {fn["spec"]["package"] for fn in listed} == pinned


def test_every_composition_step_names_a_function_of_the_examples(package_docs):
    names = {
        fn["metadata"]["name"]
        for fn in yaml.safe_load_all((ROOT / "examples" / "functions.yaml").read_text())
    }
    steps = [
        step["functionRef"]["name"]
        for doc in package_docs[1:]
        if doc["kind"] == "Composition"
        for step in doc["spec"]["pipeline"]
    ]
    assert sorted(steps) == sorted(names)


def test_the_control_plane_installs_this_package_and_the_provider_it_depends_on(meta):
    docs = [
        d
        for path in sorted((ROOT / "deploy" / "control-plane").glob("*.yaml"))
        for d in yaml.safe_load_all(path.read_text())
    ]
    by_kind = {d["kind"]: d for d in docs}
    assert by_kind["Configuration"]["spec"]["package"] == (
        f"ghcr.io/modelplane-ai/{CONFIGURATION}:{version.tag()}"
    )
    (provider_package,) = _dependencies(meta, "Provider")
    assert by_kind["Provider"]["spec"]["package"] == (
        f"{provider_package}:v{PINS['provider-kubernetes']}"
    )
    runtime = by_kind["Provider"]["spec"]["runtimeConfigRef"]
    configs = {d["metadata"]["name"] for d in docs if d["kind"] == "DeploymentRuntimeConfig"}
    assert runtime["kind"] == "DeploymentRuntimeConfig"
    assert runtime["name"] in configs
