"""What is inside each built package: Crossplane's package layer and the runtime image."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import subprocess
import tarfile
import tomllib

import pytest
import yaml
from modelplane_devtools import packages, render, version

FUNCTIONS = render.FUNCTIONS
ROOT = render.ROOT
WORKSPACE_VERSION = version.version()
PACKAGE_LABEL = re.compile(r"^io\.crossplane\.xpkg:(sha256:[0-9a-f]{64})$")


def _tar_members(path) -> dict[str, bytes]:
    with tarfile.open(path) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_crossplane_extracts_a_function_package_named_after_the_function(xpkgs, tmp_path, name):
    out = tmp_path / "package.gz"
    done = subprocess.run(
        [str(render.crossplane()), "xpkg", "extract", "--from-xpkg", str(xpkgs[name]),
         f"--output={out}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    docs = render.load_all(gzip.decompress(out.read_bytes()).decode())
    meta = docs[0]
    assert (meta["apiVersion"], meta["kind"]) == ("meta.pkg.crossplane.io/v1beta1", "Function")
    assert meta["metadata"]["name"] == name
    annotations = meta["metadata"]["annotations"]
    for key in ("description", "source", "license", "maintainer", "readme"):
        assert annotations.get(f"meta.crossplane.io/{key}"), f"no meta.crossplane.io/{key}"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_the_package_layer_is_labelled_and_holds_package_yaml(xpkgs, name):
    members = _tar_members(xpkgs[name])
    manifest = json.loads(members["manifest.json"])
    assert len(manifest) == 1, "one image per package"
    config = json.loads(members[manifest[0]["Config"]])
    labelled = {
        PACKAGE_LABEL.match(key).group(1): value
        for key, value in config["config"]["Labels"].items()
        if PACKAGE_LABEL.match(key)
    }
    assert list(labelled.values()) == ["base"], labelled
    # The label names the package layer by the digest of its compressed blob.
    (digest,) = labelled
    layers = manifest[0]["Layers"]
    assert len(layers) == 3, "Debian base, the function's venv, the package layer"
    package_blob = members[layers[-1]]
    assert f"sha256:{hashlib.sha256(package_blob).hexdigest()}" == digest
    with tarfile.open(fileobj=io.BytesIO(package_blob)) as layer:
        assert layer.getnames() == ["package.yaml"]
        package_yaml = layer.extractfile("package.yaml").read().decode()
    assert render.load_all(package_yaml)[0]["metadata"]["name"] == name


@pytest.mark.parametrize("name", FUNCTIONS)
def test_the_runtime_serves_as_a_non_root_user_on_9443(xpkgs, name):
    config = packages.image_config(xpkgs[name])["config"]
    assert config["Entrypoint"] == [f"/venv/bin/{name}"]
    assert not config.get("Cmd")
    uid, _, gid = config["User"].partition(":")
    assert uid.isdigit() and int(uid) != 0, config["User"]
    assert gid.isdigit() and int(gid) != 0, config["User"]
    assert list(config["ExposedPorts"]) == ["9443/tcp"]
    assert config["Labels"]["org.opencontainers.image.version"] == WORKSPACE_VERSION
    assert config["Labels"]["org.opencontainers.image.licenses"] == "Apache-2.0"


def test_every_version_is_the_workspace_version():
    """One version: the functions', the images' and the tags Function objects install."""
    for name in FUNCTIONS:
        project = tomllib.loads((ROOT / "functions" / name / "pyproject.toml").read_text())
        assert project["project"]["version"] == WORKSPACE_VERSION, name
    installed = yaml.safe_load_all((ROOT / "examples" / "functions.yaml").read_text())
    tags = {
        render.program_of(fn["spec"]["package"]): fn["spec"]["package"].rsplit(":", 1)[1]
        for fn in installed
    }
    assert tags == dict.fromkeys(FUNCTIONS, f"v{WORKSPACE_VERSION}")


@pytest.mark.parametrize("architecture", packages.ARCHITECTURES)
def test_the_build_records_the_debian_packages_of_the_base(architecture):
    listed_in = packages.DIST / f"debian-packages{packages.suffix(architecture)}.txt"
    listed = listed_in.read_text().split()
    kept = sorted(path.name for path in (packages.DIST / "debian" / architecture).glob("*.deb"))
    assert len(kept) == len(listed), "every listed package's .deb is kept in dist/debian"
    assert [name for name in kept if not name.endswith((f"_{architecture}.deb", "_all.deb"))] == []
    names = {line.split("=", 1)[0] for line in listed}
    assert {"python3.11-minimal", "libpython3.11-stdlib", "libstdc++6", "libc6"} <= names
    assert all(re.fullmatch(r"[a-z0-9.+-]+=[A-Za-z0-9.+~:-]+", line) for line in listed), listed
