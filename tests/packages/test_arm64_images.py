"""The arm64 images `make packages` builds beside the amd64 ones, checked and run under qemu-user.

Each function's arm64 package (dist/xpkg/<function>-arm64.xpkg) and the
agent's arm64 image (dist/images/modelplane-agent-arm64.tar) must be its amd64
twin for another machine: the same configuration and layers' roles, an arm64
Debian base, aarch64 code only, and the same entrypoint working. No arm64
machine is at hand, so the images run under qemu-aarch64-static bound into
the same sandbox the amd64 tests use (`packages.Runtime`): the entrypoint
starts as a container runtime would start it, and `image_smoke.py`, run by the
image's own Python, imports every extension module and checks that the
bytecode the build compiled on amd64 is what the arm64 interpreter compiles.
dist/oci holds one image index per image over both architectures, which
skopeo resolves to each architecture's image.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from modelplane_devtools import image_smoke, packages, render

AGENT = "modelplane-agent"
IMAGES = [*render.FUNCTIONS, AGENT]
EM_AARCH64 = 183  # the ELF e_machine of aarch64 code
# Emulated, an import-heavy start on a loaded 2-core machine takes tens of seconds.
EMULATED_SECONDS = 300
# Bytecode the build compiled with the amd64 interpreter, rechecked by the arm64 one:
# standard library modules (unchecked-hash) of several shapes.
STDLIB_SOURCES = [
    "/usr/lib/python3.11/os.py",
    "/usr/lib/python3.11/typing.py",
    "/usr/lib/python3.11/asyncio/base_events.py",
    "/usr/lib/python3.11/json/decoder.py",
    "/usr/lib/python3.11/ssl.py",
]
SITE = "venv/lib/python3.11/site-packages"


def archive(name: str, architecture: str) -> Path:
    """What ships for an image: a function's package, or the agent's image."""
    if name == AGENT:
        return packages.image(name, architecture=architecture)
    return packages.xpkg(name, architecture=architecture)


@pytest.fixture(scope="module")
def arm64_runtimes() -> Iterator[dict[str, packages.Runtime]]:
    root = packages.world_readable_tempdir("modelplane-arm64-")
    try:
        yield {name: packages.unpack(archive(name, "arm64"), root / name) for name in IMAGES}
    finally:
        shutil.rmtree(root)


def _layers(path: Path) -> list[str]:
    return [layer["digest"] for layer in packages.image_manifest(path)["layers"]]


# ---------------------------------------------------------------- the images


@pytest.mark.parametrize("name", IMAGES)
def test_the_arm64_image_is_configured_as_its_amd64_twin(name):
    amd64, arm64 = (packages.image_config(archive(name, a)) for a in ("amd64", "arm64"))
    assert (amd64["architecture"], amd64["os"]) == ("amd64", "linux")
    assert (arm64["architecture"], arm64["os"]) == ("arm64", "linux")
    assert arm64["config"] == amd64["config"]
    arm64_image = packages.image(name, architecture="arm64")
    assert packages.image_tags(arm64_image) == packages.image_tags(packages.image(name))


def test_the_arm64_images_share_one_arm64_base_layer_and_not_the_amd64_one():
    arm64 = {name: _layers(archive(name, "arm64")) for name in IMAGES}
    amd64 = {name: _layers(archive(name, "amd64")) for name in IMAGES}
    assert {layers[0] for layers in arm64.values()} == {arm64[AGENT][0]}
    assert arm64[AGENT][0] != amd64[AGENT][0]
    assert {name: len(layers) for name, layers in arm64.items()} == {
        name: len(layers) for name, layers in amd64.items()
    }


def _elf_machine(path: Path) -> int | None:
    with path.open("rb") as file:
        header = file.read(20)
    if header[:4] != b"\x7fELF":
        return None
    return int.from_bytes(header[18:20], "little")


@pytest.mark.parametrize("name", IMAGES)
def test_every_elf_file_in_the_arm64_image_is_aarch64_code(arm64_runtimes, name):
    rootfs = arm64_runtimes[name].rootfs
    machines = {}
    for path in rootfs.rglob("*"):
        if path.is_file() and not path.is_symlink():
            machine = _elf_machine(path)
            if machine is not None:
                machines[str(path.relative_to(rootfs))] = machine
    assert "usr/bin/python3.11" in machines
    assert any(path.startswith(SITE) for path in machines), "the venv holds native wheels"
    assert {path for path, machine in machines.items() if machine != EM_AARCH64} == set()


# ---------------------------------------------------------------- under qemu-user


def _emulated(runtime: packages.Runtime, args: list[str], **kwargs) -> subprocess.CompletedProcess:
    assert runtime.emulator is not None, "an arm64 image runs under qemu-user here"
    return subprocess.run(
        runtime.command(args, **kwargs),
        capture_output=True,
        text=True,
        timeout=EMULATED_SECONDS,
        check=False,
    )


@pytest.mark.parametrize("name", IMAGES)
def test_under_qemu_the_entrypoint_starts_and_prints_its_usage(arm64_runtimes, name):
    done = _emulated(arm64_runtimes[name], ["--help"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"Usage: {name} [OPTIONS]"), done.stdout


@pytest.mark.parametrize("name", IMAGES)
def test_under_qemu_every_extension_module_imports_and_the_bytecode_is_arm64s_own(
    arm64_runtimes, name
):
    runtime = arm64_runtimes[name]
    own = sorted(
        f"/{path.relative_to(runtime.rootfs)}"
        for path in (runtime.rootfs / SITE / "modelplane_common").glob("*.py")
    )
    smoke = dataclasses.replace(runtime, entrypoint=("/venv/bin/python", "/tmp/image_smoke.py"))
    # The sandbox runs as the image's unprivileged user, who may not reach into
    # the checkout (a clone in a 0700 folder): it gets a world-readable copy.
    scratch = packages.world_readable_tempdir("modelplane-smoke-")
    try:
        script = scratch / "image_smoke.py"
        shutil.copyfile(image_smoke.__file__, script)
        script.chmod(0o644)
        files = {"/tmp/image_smoke.py": script}
        done = _emulated(smoke, [name, *STDLIB_SOURCES, *own], files=files)
    finally:
        shutil.rmtree(scratch)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert (report["machine"], report["prefix"]) == ("aarch64", "/venv")
    assert report["failed"] == {}
    natives = [m for m in report["extension_modules"] if not m.startswith("_")]
    assert natives, "the venv's native wheels were found and imported"
    assert own, "modelplane_common's sources are in the venv"
    assert report["bytecode_identical"] == dict.fromkeys([*STDLIB_SOURCES, *own], True)


# ---------------------------------------------------------------- the image index


@pytest.mark.parametrize("name", IMAGES)
def test_the_oci_layout_indexes_both_architectures_under_the_image_name(name):
    reference = f"oci:{packages.DIST / 'oci'}:{name}"
    raw = subprocess.run(
        [packages.need("skopeo"), "inspect", "--raw", reference],
        capture_output=True,
        text=True,
        check=True,
    )
    index = json.loads(raw.stdout)
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    platforms = [(m["platform"]["os"], m["platform"]["architecture"]) for m in index["manifests"]]
    assert platforms == [("linux", architecture) for architecture in packages.ARCHITECTURES]
    for architecture in packages.ARCHITECTURES:
        resolved = subprocess.run(
            [packages.need("skopeo"), "inspect", "--config", "--override-os=linux",
             f"--override-arch={architecture}", reference],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        shipped = packages.image_config(packages.image(name, architecture=architecture))
        assert json.loads(resolved.stdout) == shipped
