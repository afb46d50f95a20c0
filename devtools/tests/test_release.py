"""The release's refusals, on small inputs made here (the dry run: tests/e2e/test_release.py)."""

from __future__ import annotations

import json
import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

import pytest
from modelplane_devtools import release

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("tag", "workspace_version", "refused"),
    [
        pytest.param("v0.1.0", "0.1.0", False, id="v-prefixed-workspace-version-is-released"),
        pytest.param("0.1.0", "0.1.0", True, id="tag-without-v-is-refused"),
        pytest.param("v0.1.1", "0.1.0", True, id="tag-ahead-of-the-workspace-is-refused"),
        pytest.param("v0.1.0-rc.1", "0.1.0", True, id="pre-release-tag-of-a-release-is-refused"),
        pytest.param("v0.2.0-rc.1", "0.2.0-rc.1", False, id="pre-release-version-is-released"),
    ],
)
def test_only_the_workspace_version_is_released(tag, workspace_version, refused):
    if refused:
        with pytest.raises(release.ReleaseFailed, match=f"tag '{tag}' is not"):
            release.check_tag(tag, workspace_version)
    else:
        release.check_tag(tag, workspace_version)


def _dist(root: Path, commit: str) -> Path:
    (root / "xpkg").mkdir(parents=True)
    (root / "xpkg" / "a.xpkg").write_bytes(b"package")
    (root / "build-info.txt").write_text(f"version=0.1.0\ncommit={commit}\n")
    sums = subprocess.run(
        ["sha256sum", "build-info.txt", "xpkg/a.xpkg"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    (root / "SHA256SUMS").write_text(sums.stdout)
    return root


def test_a_dist_built_from_this_commit_and_whole_is_released(tmp_path):
    release.check_dist(_dist(tmp_path, COMMIT), COMMIT)


def test_a_dist_of_another_commit_is_refused(tmp_path):
    with pytest.raises(release.ReleaseFailed, match="built from commit 0123"):
        release.check_dist(_dist(tmp_path, COMMIT), "f" * 40)


def test_a_dist_whose_file_changed_after_the_build_is_refused(tmp_path):
    dist = _dist(tmp_path, COMMIT)
    (dist / "xpkg" / "a.xpkg").write_bytes(b"another package")
    with pytest.raises(release.ReleaseFailed, match="SHA256SUMS does not hold"):
        release.check_dist(dist, COMMIT)


def test_a_missing_build_is_refused_naming_the_fix(tmp_path):
    with pytest.raises(release.ReleaseFailed, match="run `make packages`"):
        release.check_dist(tmp_path, COMMIT)


def _member(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, BytesIO(data))


def _xpkg(path: Path, config: dict, layers: list[str]) -> Path:
    """A docker-archive tarball of manifest.json and the config, as crossplane writes one."""
    manifest = [{"Config": "sha256:c", "RepoTags": None, "Layers": [f"{h}.tar.gz" for h in layers]}]
    with tarfile.open(path, "w") as archive:
        _member(archive, "manifest.json", json.dumps(manifest).encode())
        _member(archive, "sha256:c", json.dumps(config).encode())
    return path


AMD64 = release.Image({"architecture": "amd64", "os": "linux"}, ("sha256:l1", "sha256:l2"))
ARM64 = release.Image({"architecture": "arm64", "os": "linux"}, ("sha256:l3", "sha256:l4"))
BUILT = {"linux/amd64": AMD64, "linux/arm64": ARM64}


def _function(tmp_path: Path) -> release.Artifact:
    return release.Artifact(
        "compose-model-replica",
        {
            "amd64": _xpkg(tmp_path / "amd64.xpkg", AMD64.config, ["l1", "l2"]),
            "arm64": _xpkg(tmp_path / "arm64.xpkg", ARM64.config, ["l3", "l4"]),
        },
    )


@pytest.mark.parametrize(
    ("served", "message"),
    [
        pytest.param(BUILT, None, id="both-platforms-as-built-pass"),
        pytest.param(
            {"linux/amd64": AMD64},
            r"serves platforms \['linux/amd64'\], built",
            id="an-index-missing-arm64-is-refused",
        ),
        pytest.param(
            {**BUILT, "linux/arm64": release.Image(ARM64.config, ("sha256:l3", "sha256:other"))},
            "linux/arm64: layers",
            id="a-platform-with-another-layer-is-refused",
        ),
        pytest.param(
            {**BUILT, "linux/arm64": release.Image(AMD64.config, ARM64.layers)},
            "linux/arm64: another config than built",
            id="a-platform-with-another-config-is-refused",
        ),
        pytest.param(
            {"": AMD64},
            r"serves platforms \[''\]",
            id="a-single-manifest-for-a-multi-platform-package-is-refused",
        ),
    ],
)
def test_the_registry_must_serve_what_was_built(tmp_path, served, message):
    pulled = release.Pulled("sha256:index", images=served)
    if message is None:
        release.check_pulled(_function(tmp_path), "r/compose-model-replica:v0.1.0", pulled)
    else:
        with pytest.raises(release.ReleaseFailed, match=message):
            release.check_pulled(_function(tmp_path), "r/compose-model-replica:v0.1.0", pulled)


def test_every_artifact_is_planned_once_with_its_platforms_the_configuration_last(tmp_path):
    planned = release.planned(tmp_path)
    assert sorted(a.name for a in planned) == sorted(release.artifacts.NAMES)
    assert planned[-1].name == release.artifacts.CONFIGURATION
    assert {a.name: a.architectures for a in planned} == {
        "modelplane-fleet": (),
        "compose-inference-cluster": ("amd64", "arm64"),
        "compose-model-replica": ("amd64", "arm64"),
        "compose-model-deployment": ("amd64", "arm64"),
        "modelplane-agent": ("amd64", "arm64"),
    }
    assert planned[0].files["arm64"] == tmp_path / "xpkg" / "compose-inference-cluster-arm64.xpkg"
