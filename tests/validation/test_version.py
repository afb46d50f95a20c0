"""One version: every file that repeats the workspace's version states the same one."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from modelplane_devtools import version
from modelplane_devtools.paths import ROOT


@pytest.mark.parametrize("copy", version.COPIES, ids=[c.path for c in version.COPIES])
def test_every_copy_states_the_workspace_version(copy):
    found = copy.found()
    assert found, f"{copy.path} no longer holds the version where {copy.pattern!r} looks"
    assert set(found) == {version.version()}, f"{copy.path} says {found}"


def test_every_python_package_is_a_copy():
    tracked = subprocess.run(
        ["git", "ls-files", "*pyproject.toml"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert set(tracked) - {"pyproject.toml"} <= {c.path for c in version.COPIES}


def test_the_build_reads_the_same_version():
    """scripts/build-packages.sh tags images and packages from the same source."""
    script = (ROOT / "scripts" / "build-packages.sh").read_text()
    assert "VERSION=$(uv run --frozen --no-sync python -m modelplane_devtools.version)" in script
    assert "TAG=v$VERSION" in script


def test_setting_a_version_rewrites_the_source_and_every_copy(tmp_path, monkeypatch):
    tree = tmp_path / "repo"
    for path in ["pyproject.toml", *(c.path for c in version.COPIES)]:
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tree / path)
    monkeypatch.setattr(version, "ROOT", tree)
    monkeypatch.setattr(version, "SOURCE", tree / "pyproject.toml")
    version.set_version("1.2.3-rc.1")
    assert version.version() == "1.2.3-rc.1"
    for copy in version.COPIES:
        assert set(copy.found()) == {"1.2.3-rc.1"}, copy.path


def test_the_command_prints_the_tag():
    done = subprocess.run(
        [sys.executable, "-m", "modelplane_devtools.version", "--tag"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == f"v{version.version()}"


@pytest.mark.parametrize(
    ("pin", "copy"),
    [pytest.param(p, c, id=f"{p.tools_module}: {c.path}") for p in version.PINS for c in p.copies],
)
def test_every_copy_of_a_pinned_module_states_its_pin(pin, copy):
    found = copy.found()
    assert found, f"{copy.path} no longer holds {pin.module}'s version where {copy.pattern!r} looks"
    assert set(found) == {pin.version()}, f"{copy.path} says {found}, tools/ pins {pin.version()}"
