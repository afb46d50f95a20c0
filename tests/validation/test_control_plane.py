"""deploy/control-plane installs each function the Configuration depends on, scaled out.

The package manager satisfies a dependency with an installed package of the
same source, so a Function declared in deploy/control-plane under the name
the package manager would give it (the name the Compositions' functionRef
use), at the Configuration's pinned version, IS that dependency, and runs
with the DeploymentRuntimeConfig it names. These hold that: one Function
per function dependency, named and pinned as the dependency, naming a
runtime configuration of the same folder that runs more than one pod (the
e2e proves Crossplane spreads calls over them, tests/e2e/test_function_spread.py).
"""

from __future__ import annotations

import re

import pytest
import yaml
from modelplane_devtools.paths import ROOT
from modelplane_e2e import install, runtime

DOCS = install.control_plane_manifests()
DEPENDENCIES = install.function_dependencies()


def _declared(kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in DOCS if d["kind"] == kind}


def _referenced_functions() -> set[str]:
    names = set()
    for path in sorted((ROOT / "apis").glob("*/composition.yaml")):
        for step in yaml.safe_load(path.read_text())["spec"]["pipeline"]:
            names.add(step["functionRef"]["name"])
    return names


@pytest.mark.parametrize(
    "dependency",
    [pytest.param(d, id=d["package"].rsplit("/", 1)[-1]) for d in DEPENDENCIES],
)
def test_each_function_dependency_is_declared_at_its_pin_with_a_scaled_runtime(dependency):
    functions = [
        f
        for f in _declared("Function").values()
        if install.repository(f["spec"]["package"]) == dependency["package"]
    ]
    assert len(functions) == 1, f"{dependency['package']}: declared {len(functions)} times"
    (function,) = functions
    assert function["spec"]["package"] == f"{dependency['package']}:{dependency['version']}"
    # The package manager's name for the dependency: its repository path as a DNS label.
    owner_and_name = install.repository(dependency["package"]).split("/", 1)[1]
    assert function["metadata"]["name"] == owner_and_name.replace("/", "-")
    reference = function["spec"]["runtimeConfigRef"]
    assert reference["kind"] == "DeploymentRuntimeConfig"
    config = _declared("DeploymentRuntimeConfig")[reference["name"]]
    assert runtime.pods(config) >= 2


def test_the_declared_functions_are_the_ones_the_compositions_run():
    assert set(_declared("Function")) == _referenced_functions()


# ---------------------------------------------------------------- the documented upgrade

GUIDE = ROOT / "docs" / "operating.md"


def _upgrade_applies() -> list[str]:
    """The files every `kubectl apply -f` of docs/operating.md's "Upgrading" applies."""
    text = GUIDE.read_text()
    section = text.split("\n## Upgrading\n", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"`(kubectl apply [^`]*)`", section)
    return [path for command in commands for path in re.findall(r"-f (\S+)", command)]


def _upgrade_manifests() -> list[dict]:
    return [
        d for path in _upgrade_applies() for d in yaml.safe_load_all((ROOT / path).read_text()) if d
    ]


def test_the_upgrade_applies_the_files_it_names():
    paths = _upgrade_applies()
    assert paths, "docs/operating.md's Upgrading names no `kubectl apply -f`"
    assert all((ROOT / p).is_file() for p in paths), paths


def test_the_upgrade_moves_every_installed_function_and_keeps_its_runtime_config():
    """An apply without runtimeConfigRef drops it; the CRD then defaults it to `default`."""
    upgraded = {
        d["metadata"]["name"]: d["spec"].get("runtimeConfigRef")
        for d in _upgrade_manifests()
        if d["kind"] == "Function"
    }
    installed = {name: f["spec"]["runtimeConfigRef"] for name, f in _declared("Function").items()}
    assert upgraded == installed
