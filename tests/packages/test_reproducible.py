"""A second build of the same commit gives the same bytes, for both architectures.

`make test` has just built dist/ with `make packages`; this builds again into
a temporary directory and compares dist/SHA256SUMS, which covers the three
packages, their runtime images and the agent's image for amd64 and arm64,
the OCI layout's index.json (which names every manifest by digest) and the
lists of Debian packages. The second build takes its Debian packages from
the first one's dist/debian (PACKAGES_DEBIAN) instead of the mirror: the
archive moves, and a point release between the two builds would otherwise
make them differ with nothing wrong in the build. The lists must then match,
which also checks that a build from those .debs alone picks exactly them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from modelplane_devtools import packages, render

IMAGES = [*render.FUNCTIONS, "modelplane-agent"]


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
    for architecture in packages.ARCHITECTURES:
        end = packages.suffix(architecture)
        assert {f"xpkg/{name}{end}.xpkg" for name in render.FUNCTIONS} <= set(first)
        assert {f"images/{name}{end}.tar" for name in IMAGES} <= set(first)
        assert f"debian-packages{end}.txt" in first
    assert "oci/index.json" in first
    assert "xpkg/modelplane-fleet.xpkg" in first
    second_dist = Path(tempfile.mkdtemp(prefix="modelplane-rebuild-"))
    try:
        done = subprocess.run(
            ["bash", str(render.ROOT / "scripts" / "build-packages.sh")],
            env={
                **os.environ,
                "PACKAGES_DIST": str(second_dist),
                "PACKAGES_DEBIAN": str(packages.DIST / "debian"),
            },
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        for architecture in packages.ARCHITECTURES:
            listed = f"debian-packages{packages.suffix(architecture)}.txt"
            assert (second_dist / listed).read_text() == (packages.DIST / listed).read_text()
        assert sums(second_dist) == first
    finally:
        shutil.rmtree(second_dist)
