"""One OCI image index per image over its architectures, in an OCI layout.

scripts/build-packages.sh tags each architecture's image `<image>-<arch>` in
dist/oci (umoci writes single-platform manifests only). This adds, for every
image, an image index (`application/vnd.oci.image.index.v1+json`) listing
those manifests with the platform each one's configuration declares, and
tags it `<image>`: `skopeo copy --all oci:dist/oci:<image> docker://...`
then pushes the multi-platform image, and a plain `skopeo copy` picks the
host's architecture. The per-architecture tags stay.

The platform is read from each image's configuration, never from its tag: a
tag whose image says another architecture is an error, not an entry. Blobs
and index.json are written as compact JSON with sorted keys, so the same
layout gives the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
REF_NAME = "org.opencontainers.image.ref.name"


@dataclass(frozen=True)
class Platformed:
    """One architecture's manifest descriptor and the platform its configuration declares."""

    descriptor: Mapping
    architecture: str
    os: str


def canonical(document: Mapping) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def digest(blob: bytes) -> str:
    return f"sha256:{hashlib.sha256(blob).hexdigest()}"


def image_index(manifests: Sequence[Platformed]) -> bytes:
    """The image index over manifests, in the order given (the build's architecture order)."""
    entries = [
        {
            "mediaType": entry.descriptor["mediaType"],
            "digest": entry.descriptor["digest"],
            "size": entry.descriptor["size"],
            "platform": {"architecture": entry.architecture, "os": entry.os},
        }
        for entry in manifests
    ]
    return canonical({"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": entries})


@dataclass(frozen=True)
class Layout:
    """An OCI layout directory: its index.json and content-addressed blobs."""

    root: Path

    def index(self) -> dict:
        return json.loads((self.root / "index.json").read_text())

    def blob(self, blob_digest: str) -> bytes:
        algorithm, _, hex_digest = blob_digest.partition(":")
        return (self.root / "blobs" / algorithm / hex_digest).read_bytes()

    def put(self, blob: bytes) -> str:
        blob_digest = digest(blob)
        path = self.root / "blobs" / "sha256" / blob_digest.removeprefix("sha256:")
        path.write_bytes(blob)
        return blob_digest

    def tagged(self, tag: str) -> Mapping:
        """The one descriptor in index.json that carries tag."""
        found = [
            m for m in self.index()["manifests"] if m.get("annotations", {}).get(REF_NAME) == tag
        ]
        if len(found) != 1:
            raise SystemExit(f"oci_index: {self.root} has {len(found)} manifests tagged {tag!r}")
        return found[0]

    def platformed(self, tag: str, architecture: str) -> Platformed:
        descriptor = self.tagged(tag)
        manifest = json.loads(self.blob(descriptor["digest"]))
        config = json.loads(self.blob(manifest["config"]["digest"]))
        declared = config.get("architecture")
        if declared != architecture:
            raise SystemExit(f"oci_index: {tag} is architecture {declared!r}, not {architecture!r}")
        return Platformed(descriptor=descriptor, architecture=architecture, os=config["os"])

    def add_index(self, name: str, architectures: Sequence[str]) -> None:
        """Tag name with an index of `<name>-<arch>` for each architecture."""
        blob = image_index([self.platformed(f"{name}-{arch}", arch) for arch in architectures])
        entry = {
            "mediaType": INDEX_MEDIA_TYPE,
            "digest": self.put(blob),
            "size": len(blob),
            "annotations": {REF_NAME: name},
        }
        index = self.index()
        kept = [m for m in index["manifests"] if m.get("annotations", {}).get(REF_NAME) != name]
        index["manifests"] = [*kept, entry]
        (self.root / "index.json").write_bytes(canonical(index))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("layout", type=Path)
    parser.add_argument("--arch", action="append", required=True, dest="architectures")
    parser.add_argument("images", nargs="+")
    args = parser.parse_args(argv)
    layout = Layout(args.layout)
    for name in args.images:
        layout.add_index(name, args.architectures)


if __name__ == "__main__":
    main()
