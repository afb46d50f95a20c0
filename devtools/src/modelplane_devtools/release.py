"""The release: every artifact of a build pushed under its one name, pulled back and checked.

One path for the real release and its rehearsal. `publish` takes the build
`make packages` wrote (dist/: scripts/build-packages.sh) and a registry
prefix, and for a tag `v<version>`:

1. checks the tag is the workspace's version (`modelplane_devtools.version`,
   what `make version` prints) and that dist/ is this commit's build, whole
   (its build-info.txt names HEAD, every file matches SHA256SUMS): a tag
   publishes what its own commit builds, nothing older;
2. pushes each artifact of `modelplane_devtools.artifacts` to
   `<prefix>/<name>:<tag>` with the tool the build already uses: the three
   Function packages, amd64 and arm64 under one tag (an image index), and
   the Configuration with `crossplane xpkg push`; the agent's image index
   from dist/oci with `skopeo copy --all --preserve-digests`; the
   Configuration last, once the functions it depends on are there;
3. pulls each back whole (`skopeo copy --all`, which checks every blob's
   digest) and checks it is what was built: a Function package and the agent
   an index of exactly linux/amd64 and linux/arm64, each platform's layers
   and config those of its dist/ file; the agent's index the very index of
   dist/oci; the Configuration one manifest with its package's config and layer;
4. writes an SPDX SBOM of each platform image (syft, reading the pushed
   image from the registry), and checks it lists the image's own Python
   distribution;
5. records what it published in `<out>/released.json` (name, repository,
   index digest, each platform's manifest digest and SBOM) and, for
   `publish` under GitHub Actions, as the step's `released` output: signing and the
   attestations (.github/workflows/release.yaml) sign these digests, never
   a tag.

`dry-run` (`make release-dry-run`) runs all of it against the e2e's OCI
registry on 127.0.0.1 (`registry.start`, `.tools/bin/registry`),
with the registry host in front of the public names as the e2e installs
them (`registry.mirrored`); the registry is stopped by its PID and its
log stays in the run's folder, out/release/<time>/. Only signing and the push
to the public registry are the workflow's alone.

A missing tool is an error naming the fix, never a skip.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from modelplane_devtools import artifacts, oci_index, registry, version
from modelplane_devtools.oci_index import INDEX_MEDIA_TYPE, Layout
from modelplane_devtools.packages import ARCHITECTURES, PackageMissing, need, suffix
from modelplane_devtools.paths import ROOT, ToolMissing, binary
from modelplane_devtools.processes import Supervisor

DIST = ROOT / "dist"
INDEX_MEDIA_TYPES = {INDEX_MEDIA_TYPE, "application/vnd.docker.distribution.manifest.list.v2+json"}


class ReleaseFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class Artifact:
    """One published name and the dist/ files it is made of, one per platform."""

    name: str
    files: Mapping[str, Path]  # architecture (or "" for no platform) -> dist file
    oci: bool = False  # an image index in dist/oci (the agent), not xpkg files

    @property
    def architectures(self) -> tuple[str, ...]:
        return tuple(arch for arch in self.files if arch)


def planned(dist: Path) -> list[Artifact]:
    """What a release publishes, from a build's dist/, in the order it is pushed: the
    Configuration last, so that it never names a function not published yet."""
    configuration = Artifact(
        artifacts.CONFIGURATION, {"": dist / "xpkg" / f"{artifacts.CONFIGURATION}.xpkg"}
    )
    functions = [
        Artifact(fn, {a: dist / "xpkg" / f"{fn}{suffix(a)}.xpkg" for a in ARCHITECTURES})
        for fn in artifacts.FUNCTIONS
    ]
    agent = Artifact(artifacts.AGENT, {a: dist / "oci" for a in ARCHITECTURES}, oci=True)
    return [*functions, agent, configuration]


def check_tag(tag: str, workspace_version: str) -> None:
    if tag != f"v{workspace_version}":
        raise ReleaseFailed(
            f"tag {tag!r} is not the workspace's version v{workspace_version} "
            "(`make version`; `make version SET=X.Y.Z` changes it)"
        )


def check_dist(dist: Path, commit: str) -> None:
    """dist/ is the whole build of `commit`: build-info.txt names it, SHA256SUMS holds."""
    info = dist / "build-info.txt"
    if not info.is_file():
        raise ReleaseFailed(f"{info} is missing: run `make packages`")
    built = dict(line.split("=", 1) for line in info.read_text().splitlines() if "=" in line)
    if built.get("commit") != commit:
        raise ReleaseFailed(
            f"{dist} was built from commit {built.get('commit')}, not {commit}: run `make packages`"
        )
    sums = subprocess.run(
        ["sha256sum", "--quiet", "--check", "SHA256SUMS"],
        cwd=dist,
        capture_output=True,
        text=True,
        check=False,
    )
    if sums.returncode != 0:
        raise ReleaseFailed(f"{dist}/SHA256SUMS does not hold: {sums.stdout.strip()}")


def run(command: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    done = subprocess.run(
        list(command),
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if done.returncode != 0:
        raise ReleaseFailed(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr.strip()}"
        )
    return done.stdout


def plain_http(reference: str) -> bool:
    """The e2e's registry on 127.0.0.1 serves plain HTTP (Go's registry libraries assume so)."""
    return reference.startswith(("127.0.0.1:", "localhost:"))


def tls(reference: str, flag: str) -> list[str]:
    return [f"{flag}=false"] if plain_http(reference) else []


def push(artifact: Artifact, reference: str) -> None:
    if artifact.oci:
        layout = next(iter(artifact.files.values()))
        run(
            [
                need("skopeo"), "copy", "--quiet", "--all", "--preserve-digests",
                *tls(reference, "--dest-tls-verify"),
                f"oci:{layout}:{artifact.name}", f"docker://{reference}",
            ]
        )  # fmt: skip
        return
    files = ",".join(str(path) for path in artifact.files.values())
    run([str(binary("crossplane")), "xpkg", "push", f"--package-files={files}", reference])


# ---- what was built ---------------------------------------------------------------
# An image is compared by its config, parsed (`crossplane xpkg push` writes the
# config it read anew: same content, other bytes, so another digest), and its
# layers' digests, exact (the compressed blobs travel unchanged).


@dataclass(frozen=True)
class Image:
    """One platform's image: its config, parsed, and its layers' digests."""

    config: dict
    layers: tuple[str, ...]


def xpkg_image(path: Path) -> Image:
    """The image of an xpkg, a docker-archive tarball `crossplane xpkg build` writes."""
    if not path.is_file():
        raise ReleaseFailed(f"{path} is missing: run `make packages`")
    (entry,) = json.loads(run(["tar", "-xOf", str(path), "manifest.json"]))
    config = json.loads(run(["tar", "-xOf", str(path), entry["Config"]]))
    # Each layer is stored under its compressed digest: <hex>.tar.gz.
    return Image(config, tuple(f"sha256:{layer.split('.', 1)[0]}" for layer in entry["Layers"]))


def layout_image(layout: Layout, manifest_digest: str) -> Image:
    manifest = json.loads(layout.blob(manifest_digest))
    config = json.loads(layout.blob(manifest["config"]["digest"]))
    return Image(config, tuple(layer["digest"] for layer in manifest["layers"]))


def built_images(artifact: Artifact) -> dict[str, Image]:
    """What each platform of the artifact was built as: "linux/<arch>" (or "") -> image."""
    if artifact.oci:
        layout = Layout(next(iter(artifact.files.values())))
        tagged = {
            a: layout.tagged(f"{artifact.name}-{a}")["digest"] for a in artifact.architectures
        }
        return {f"linux/{a}": layout_image(layout, digest) for a, digest in tagged.items()}
    return {(f"linux/{a}" if a else ""): xpkg_image(path) for a, path in artifact.files.items()}


# ---- what the registry serves --------------------------------------------------


@dataclass
class Pulled:
    """An artifact as the registry serves it: its digest and, per platform, manifest and image."""

    digest: str
    platforms: dict[str, str] = field(default_factory=dict)  # "os/arch" -> manifest digest
    images: dict[str, Image] = field(default_factory=dict)  # "os/arch" or "" -> image


def inspect(repository: str, digest_or_tag: str, *config: str) -> bytes:
    """The raw manifest (or, with "--config", config) the registry serves."""
    separator = "@" if digest_or_tag.startswith("sha256:") else ":"
    done = subprocess.run(
        [need("skopeo"), "inspect", "--raw", *config, *tls(repository, "--tls-verify"),
         f"docker://{repository}{separator}{digest_or_tag}"],
        capture_output=True,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise ReleaseFailed(f"cannot read {repository}{separator}{digest_or_tag}: {done.stderr!r}")
    return done.stdout


def served_image(repository: str, manifest_digest: str) -> Image:
    raw = inspect(repository, manifest_digest)
    if oci_index.digest(raw) != manifest_digest:
        raise ReleaseFailed(f"{repository}@{manifest_digest} serves a manifest of another digest")
    layers = tuple(layer["digest"] for layer in json.loads(raw)["layers"])
    return Image(json.loads(inspect(repository, manifest_digest, "--config")), layers)


def pull(repository: str, tag: str, into: Path) -> Pulled:
    """The artifact the tag names, read from the registry and copied whole into an OCI
    layout (skopeo checks every blob against its digest; it may convert the manifests
    there, so what is compared is read from the registry)."""
    raw = inspect(repository, tag)
    pulled = Pulled(oci_index.digest(raw))
    run(
        [
            need("skopeo"), "copy", "--quiet", "--all", *tls(repository, "--src-tls-verify"),
            f"docker://{repository}@{pulled.digest}", f"oci:{into}:pulled",
        ]
    )  # fmt: skip
    document = json.loads(raw)
    if document.get("mediaType") not in INDEX_MEDIA_TYPES:
        pulled.images[""] = served_image(repository, pulled.digest)
        return pulled
    for entry in document["manifests"]:
        platform = f"{entry['platform']['os']}/{entry['platform']['architecture']}"
        if platform in pulled.platforms:
            raise ReleaseFailed(f"{repository}:{tag} lists {platform} twice")
        pulled.platforms[platform] = entry["digest"]
        pulled.images[platform] = served_image(repository, entry["digest"])
    return pulled


def check_pulled(artifact: Artifact, reference: str, pulled: Pulled) -> None:
    """The registry serves exactly what dist/ holds, every platform of it."""
    built = built_images(artifact)
    if set(pulled.images) != set(built):
        raise ReleaseFailed(
            f"{reference} serves platforms {sorted(pulled.images)}, built {sorted(built)}"
        )
    for platform, image in built.items():
        served = pulled.images[platform]
        if served.layers != image.layers:
            raise ReleaseFailed(
                f"{reference} {platform or 'manifest'}: layers {list(served.layers)} "
                f"are not the built {list(image.layers)}"
            )
        if served.config != image.config:
            raise ReleaseFailed(f"{reference} {platform or 'manifest'}: another config than built")
    if artifact.oci:
        local = Layout(next(iter(artifact.files.values()))).tagged(artifact.name)["digest"]
        if pulled.digest != local:
            raise ReleaseFailed(f"{reference} is {pulled.digest}, dist/oci's index is {local}")


# ---- SBOMs ------------------------------------------------------------------------


def sbom(repository: str, digest: str, platform: str, out: Path, expect: str) -> Path:
    """syft's SPDX SBOM of one platform image, read from the registry; it must list `expect`."""
    env = {"SYFT_CHECK_FOR_APP_UPDATE": "false"}
    if plain_http(repository):
        env["SYFT_REGISTRY_INSECURE_USE_HTTP"] = "true"
    out.parent.mkdir(parents=True, exist_ok=True)
    run(
        [str(binary("syft")), "scan", f"registry:{repository}@{digest}", "--platform", platform,
         "--quiet", "--output", f"spdx-json={out}"],
        env=env,
    )  # fmt: skip
    names = {package.get("name") for package in json.loads(out.read_text()).get("packages", [])}
    if expect not in names:
        raise ReleaseFailed(f"the SBOM of {repository}@{digest} ({out}) does not list {expect}")
    return out


# ---- the release --------------------------------------------------------------------


@dataclass
class Released:
    name: str
    repository: str
    digest: str
    platforms: dict[str, str]
    sboms: dict[str, str]  # "os/arch" -> SBOM file, relative to the run's `out`


def release_one(artifact: Artifact, prefix: str, tag: str, out: Path) -> Released:
    repository = f"{prefix}/{artifact.name}"
    reference = f"{repository}:{tag}"
    began = time.monotonic()
    push(artifact, reference)
    with tempfile.TemporaryDirectory(prefix="modelplane-release-") as scratch:
        pulled = pull(repository, tag, Path(scratch) / "layout")
    check_pulled(artifact, reference, pulled)
    # Paths relative to `out`, which the workflow hands to the signing job whole.
    sboms = {
        platform: f"sbom/{artifact.name}-{platform.split('/')[1]}.spdx.json"
        for platform in pulled.platforms
    }
    for platform, digest in pulled.platforms.items():
        sbom(repository, digest, platform, out / sboms[platform], artifact.name)
    print(
        f"release: {reference} {pulled.digest} "
        f"[{', '.join(pulled.platforms) or 'no platform'}] {time.monotonic() - began:.1f}s",
        flush=True,
    )
    return Released(artifact.name, repository, pulled.digest, pulled.platforms, sboms)


def publish(prefix: str, tag: str, out: Path, dist: Path = DIST) -> list[Released]:
    """Push, pull back, check and describe every artifact; returns what was published."""
    check_tag(tag, version.version())
    check_dist(dist, run(["git", "-C", str(ROOT), "rev-parse", "HEAD"]).strip())
    out.mkdir(parents=True, exist_ok=True)
    released = [release_one(artifact, prefix, tag, out) for artifact in planned(dist)]
    record = json.dumps([asdict(r) for r in released], indent=2)
    (out / "released.json").write_text(record + "\n")
    return released


def github_output(released: list[Released]) -> None:
    """The step's `released` output under GitHub Actions: the signing job's matrix."""
    if path := os.environ.get("GITHUB_OUTPUT"):
        with open(path, "a") as output:
            output.write(f"released={json.dumps([asdict(r) for r in released])}\n")


def dry_run(workdir: Path, dist: Path = DIST) -> list[Released]:
    """`publish` against a registry on 127.0.0.1, stopped by its PID; logs under workdir."""
    supervisor = Supervisor(workdir / "logs")
    try:
        prefix = registry.mirrored(artifacts.REGISTRY, registry.start(supervisor))
        return publish(prefix, f"v{version.version()}", workdir, dist)
    except ReleaseFailed as failure:
        # The registry's side of a failed push or pull, for the report.
        raise ReleaseFailed(f"{failure}\n{supervisor.tails()}") from None
    finally:
        supervisor.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    real = commands.add_parser("publish", help="push, pull back and check, write SBOMs")
    real.add_argument("--registry", default=artifacts.REGISTRY, help="registry prefix")
    real.add_argument("--tag", required=True, help="the release tag, v<version>")
    real.add_argument("--out", type=Path, required=True, help="SBOMs and released.json")
    real.add_argument("--dist", type=Path, default=DIST)
    tag = commands.add_parser("check-tag", help="fail unless the tag is v<version>")
    tag.add_argument("--tag", required=True)
    rehearsal = commands.add_parser("dry-run", help="publish to a registry on 127.0.0.1")
    rehearsal.add_argument("--dist", type=Path, default=DIST)
    args = parser.parse_args(argv)
    try:
        if args.command == "publish":
            github_output(publish(args.registry, args.tag, args.out, args.dist))
        elif args.command == "check-tag":
            check_tag(args.tag, version.version())
        else:
            workdir = ROOT / "out" / "release" / time.strftime("%Y%m%d-%H%M%S")
            dry_run(workdir, args.dist)
            print(f"release: dry run passed; SBOMs, released.json and logs in {workdir}")
    except (ReleaseFailed, ToolMissing, PackageMissing) as failure:
        print(f"release: {failure}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
