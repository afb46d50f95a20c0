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

import pytest
import yaml
from modelplane_devtools.e2e import install, runtime
from modelplane_devtools.render import ROOT

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
