"""`make release-dry-run`, run whole: the release's own code against a registry on 127.0.0.1.

The build is dist/, as `make e2e` finds it after `make packages` (CI: `make
test`, then `make e2e`). The dry run pushes every artifact under its public
name with the registry host in front, pulls each back and checks it, and
writes an SBOM per image; these tests hold what it must have published. A
second registry serves a package under another's name, which the check must
refuse. A missing tool (the registry, syft, skopeo, the Crossplane CLI) fails
the test with the command that installs it.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from modelplane_devtools import artifacts, release, version
from modelplane_devtools.oci_index import Layout
from modelplane_devtools.paths import ROOT
from modelplane_devtools.processes import Supervisor
from modelplane_devtools.registry import mirrored, start

pytestmark = pytest.mark.e2e

BOTH = {"linux/amd64", "linux/arm64"}


@pytest.fixture(scope="module")
def dry_run() -> tuple[Path, list[release.Released]]:
    workdir = ROOT / "out" / "release" / time.strftime("%Y%m%d-%H%M%S")
    return workdir, release.dry_run(workdir)


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    supervisor = Supervisor(tmp_path / "logs")
    try:
        yield start(supervisor)
    finally:
        supervisor.stop()


def test_every_artifact_is_published_under_its_name_and_the_version_tag(dry_run):
    workdir, released = dry_run
    assert sorted(r.name for r in released) == sorted(artifacts.NAMES)
    assert released[-1].name == artifacts.CONFIGURATION  # after the functions it names
    for published in released:
        path = artifacts.reference(published.name, f"v{version.version()}").split("/", 1)[1]
        assert published.repository.split("/", 1)[1] == path.rsplit(":", 1)[0]
        assert published.repository.startswith("127.0.0.1:")
    record = json.loads((workdir / "released.json").read_text())
    assert [r["digest"] for r in record] == [r.digest for r in released]


def test_each_image_index_holds_amd64_and_arm64_and_the_configuration_no_platform(dry_run):
    _, released = dry_run
    platforms = {r.name: set(r.platforms) for r in released}
    assert platforms == {
        artifacts.CONFIGURATION: set(),
        **{fn: BOTH for fn in artifacts.FUNCTIONS},
        artifacts.AGENT: BOTH,
    }


def test_the_agent_is_published_as_the_very_index_the_build_made(dry_run):
    _, released = dry_run
    (agent,) = [r for r in released if r.name == artifacts.AGENT]
    assert agent.digest == Layout(release.DIST / "oci").tagged(artifacts.AGENT)["digest"]


def test_each_platform_image_has_an_spdx_sbom_listing_its_own_distribution(dry_run):
    workdir, released = dry_run
    for published in released:
        assert set(published.sboms) == set(published.platforms)
        for platform, file in published.sboms.items():
            document = json.loads((workdir / file).read_text())
            assert document["spdxVersion"].startswith("SPDX-"), (published.name, platform)
            names = {package["name"] for package in document["packages"]}
            assert published.name in names, (published.name, platform)


def test_a_registry_serving_another_package_under_a_name_is_refused(registry):
    planned = {a.name: a for a in release.planned(release.DIST)}
    served = planned["compose-model-replica"]
    claimed = planned["compose-model-deployment"]
    prefix = mirrored(artifacts.REGISTRY, registry)
    reference = f"{prefix}/{claimed.name}:v{version.version()}"
    release.push(served, reference)
    with tempfile.TemporaryDirectory() as scratch:
        pulled = release.pull(
            f"{prefix}/{claimed.name}", f"v{version.version()}", Path(scratch) / "layout"
        )
    with pytest.raises(release.ReleaseFailed, match=r"linux/amd64: layers .* are not the built"):
        release.check_pulled(claimed, reference, pulled)
