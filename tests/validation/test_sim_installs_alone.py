"""The simulator, `modelplane-sim`, installs alone and runs.

A user who wants the simulator installs it without the rest of the workspace's
tooling: its closure is what uv resolves for the package without its dev group,
with the lock's versions. test_import_graph.py checks the declarations statically;
this installs that closure into an empty virtual environment and runs a short
simulation there, so a missing declaration or an import of the never-packaged test
kit fails here as it would for the user.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from modelplane_devtools.paths import ROOT


def uv() -> str:
    found = shutil.which("uv")
    if found is None:
        pytest.fail("uv is not on PATH (make setup installs it)")
    return found


def run(*command: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(part) for part in command], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{' '.join(map(str, command))}:\n{done.stdout}\n{done.stderr}"
    return done


def package_name(member: str) -> str:
    """The distribution a workspace member's folder builds."""
    project = tomllib.loads((ROOT / member / "pyproject.toml").read_text())
    return project["project"]["name"]


@pytest.fixture(scope="module")
def sim_alone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment holding modelplane-sim's closure and nothing else."""
    where = tmp_path_factory.mktemp("sim-alone")
    closure = run(
        uv(), "export", "--frozen", "--package", "modelplane-sim", "--no-dev", "--no-editable"
    ).stdout
    requirements = where / "requirements.txt"
    requirements.write_text(closure)
    venv = where / "venv"
    run(uv(), "venv", "--quiet", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    # uv caches a local source tree's build keyed by its pyproject, so the workspace's
    # own packages are rebuilt from their sources as they are now.
    local = [line.removeprefix("./") for line in closure.splitlines() if line.startswith("./")]
    refresh = [arg for path in local for arg in ("--refresh-package", package_name(path))]
    run(uv(), "pip", "install", "--quiet", "--python", python, *refresh, "-r", requirements)
    return venv


def test_the_closure_leaves_the_test_kit_and_the_tools_out(sim_alone: Path):
    installed = run(uv(), "pip", "list", "--python", sim_alone / "bin" / "python").stdout
    for tooling in ("modelplane-testkit", "modelplane-devtools", "modelplane-e2e"):
        assert tooling not in installed


def test_the_simulator_runs_alone(sim_alone: Path, tmp_path: Path):
    examples = ROOT / "examples" / "sim"
    done = run(
        sim_alone / "bin" / "modelplane-sim",
        "--fleet",
        examples / "fleet.yaml",
        "--arrivals",
        examples / "arrivals.yaml",
        "--duration",
        "30m",
        "--out",
        tmp_path / "report",
        cwd=tmp_path,
    )
    assert "node-level" in done.stdout
    assert (tmp_path / "report" / "report.html").is_file()
