"""Every package's `spec.crossplane.version` admits the cores it is meant to run on.

Crossplane's package manager refuses a package whose constraint its own
version is not in: the revision reconciler asks crossplane-runtime's
`version.Versioner.InConstraints` (Masterminds/semver), with the version
stamped into the core at build time. Masterminds excludes every version with
a pre-release suffix from a constraint that has none, so `>=v2.3.4` refuses a
vendor build such as `v2.3.4-up.1`; `>=v2.3.4-0` admits it and everything
after v2.3.4, and still refuses anything older.

The judge is that code itself, at the versions the core pins
(tools/crossplane-core/go.sum): `tools/crossplane-core/inconstraints`,
stamped with `-ldflags -X` on the variable scripts/setup.sh stamps on the
core, run with `go run` (a few seconds once the module cache holds it, as
`make setup` leaves it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache

import pytest
import yaml
from modelplane_devtools import version
from modelplane_devtools.paths import ROOT, ToolMissing

CORE_MODULE = ROOT / "tools" / "crossplane-core"
# The variable crossplane-runtime's Versioner reads the core's version from.
VERSION_VARIABLE = "github.com/crossplane/crossplane-runtime/v2/pkg/version.version"
PACKAGES = [
    ROOT / "apis" / "crossplane.yaml",
    *sorted((ROOT / "functions").glob("*/package/crossplane.yaml")),
]
(CORE,) = [pin.version() for pin in version.PINS if pin.tools_module == "crossplane-core"]


def _constraint(path) -> str:
    return yaml.safe_load(path.read_text())["spec"]["crossplane"]["version"]


@cache
def judged(core_version: str) -> dict[str, bool]:
    """Whether a core stamped `core_version` admits each package, by the package's path."""
    go = shutil.which("go")
    if go is None:
        raise ToolMissing("go is missing: run `make setup`")
    constraints = [_constraint(p) for p in PACKAGES]
    done = subprocess.run(
        [go, "run", f"-ldflags=-X={VERSION_VARIABLE}={core_version}", "./inconstraints",
         *constraints],
        cwd=CORE_MODULE, capture_output=True, text=True, check=False,
        env={**os.environ, "GOFLAGS": "-buildvcs=false"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answers = done.stdout.split()
    assert len(answers) == len(PACKAGES), done.stdout
    return {str(p.relative_to(ROOT)): a == "true" for p, a in zip(PACKAGES, answers, strict=True)}


def test_the_judge_is_stamped_as_setup_stamps_the_core():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert re.search(rf"{re.escape(VERSION_VARIABLE)}=v{re.escape(CORE)}\b", setup)


CONFIGURATION = "apis/crossplane.yaml"
CASES = [
    pytest.param(f"v{CORE}", True, id="the pinned core is admitted"),
    pytest.param(f"v{CORE}-up.1", True, id="a vendor build of the pinned core is admitted"),
    pytest.param(f"v{CORE}-rc.1", True, id="a release candidate of the pinned core is admitted"),
    pytest.param("v2.4.0", True, id="a later minor release is admitted"),
    pytest.param("v2.4.0-up.2", True, id="a vendor build of a later release is admitted"),
    pytest.param("v2.3.3", False, id="the release before the pinned core is refused"),
    pytest.param("v2.3.3-up.1", False, id="a vendor build before the pinned core is refused"),
    pytest.param("v1.20.0", False, id="Crossplane v1 is refused"),
]


@pytest.mark.parametrize(("core_version", "admitted"), CASES)
def test_the_configuration_admits_cores_from_the_pinned_one_vendor_builds_included(
    core_version, admitted
):
    assert judged(core_version)[CONFIGURATION] is admitted


@pytest.mark.parametrize(("core_version", "admitted"), [c for c in CASES if c.values[1]])
def test_every_function_admits_each_core_the_configuration_admits(core_version, admitted):
    assert all(judged(core_version).values()), judged(core_version)
