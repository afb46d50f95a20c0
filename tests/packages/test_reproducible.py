"""A second build of the same commit gives the same bytes.

`make test` has just built dist/ with `make packages`; this builds again into
a temporary directory and compares dist/SHA256SUMS, which covers the three
packages, their runtime images, the agent's image and the list of Debian
packages. The Debian
archive moves, so when the lists differ the test says that first: the two
builds did not see the same packages, and nothing else can be compared.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from modelplane_devtools import packages, render


def sums(dist: Path) -> dict[str, str]:
    lines = (dist / "SHA256SUMS").read_text().splitlines()
    return {name: digest for digest, name in (line.split(maxsplit=1) for line in lines)}


def test_two_builds_in_a_row_give_the_same_sha256():
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=render.ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    built = (packages.DIST / "build-info.txt").read_text()
    assert f"commit={head}\n" in built, "dist/ was built from another commit: run `make packages`"
    first = sums(packages.DIST)
    assert {f"xpkg/{name}.xpkg" for name in [*render.FUNCTIONS, "modelplane-fleet"]} <= set(first)
    assert {f"images/{name}.tar" for name in [*render.FUNCTIONS, "modelplane-agent"]} <= set(first)
    second_dist = Path(tempfile.mkdtemp(prefix="modelplane-rebuild-"))
    try:
        done = subprocess.run(
            ["bash", str(render.ROOT / "scripts" / "build-packages.sh")],
            env={**os.environ, "PACKAGES_DIST": str(second_dist)},
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        debian_then = (packages.DIST / "debian-packages.txt").read_text()
        debian_now = (second_dist / "debian-packages.txt").read_text()
        assert debian_now == debian_then, "the Debian archive moved between the builds"
        assert sums(second_dist) == first
    finally:
        shutil.rmtree(second_dist)
