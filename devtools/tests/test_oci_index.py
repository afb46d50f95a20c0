"""modelplane_devtools.oci_index on small OCI layouts made here (the built one: tests/packages)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from modelplane_devtools import oci_index

MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def _layout(root: Path, tagged: dict[str, str]) -> oci_index.Layout:
    """A layout whose manifests, one per tag, have configs declaring the given architecture."""
    (root / "blobs" / "sha256").mkdir(parents=True)
    layout = oci_index.Layout(root)
    manifests = []
    for tag, architecture in tagged.items():
        config = oci_index.canonical({"architecture": architecture, "os": "linux"})
        manifest = oci_index.canonical(
            {"schemaVersion": 2, "config": {"digest": layout.put(config), "size": len(config)}}
        )
        manifests.append(
            {
                "mediaType": MANIFEST,
                "digest": layout.put(manifest),
                "size": len(manifest),
                "annotations": {oci_index.REF_NAME: tag},
            }
        )
    (root / "index.json").write_bytes(
        oci_index.canonical({"schemaVersion": 2, "manifests": manifests})
    )
    return layout


def test_the_index_lists_each_architectures_manifest_with_its_declared_platform(tmp_path):
    layout = _layout(tmp_path, {"agent-amd64": "amd64", "agent-arm64": "arm64"})
    layout.add_index("agent", ["amd64", "arm64"])
    entry = layout.tagged("agent")
    assert entry["mediaType"] == oci_index.INDEX_MEDIA_TYPE
    index = json.loads(layout.blob(entry["digest"]))
    assert [m["platform"] for m in index["manifests"]] == [
        {"architecture": "amd64", "os": "linux"},
        {"architecture": "arm64", "os": "linux"},
    ]
    assert [m["digest"] for m in index["manifests"]] == [
        layout.tagged("agent-amd64")["digest"],
        layout.tagged("agent-arm64")["digest"],
    ]


def test_indexing_twice_gives_the_same_bytes_and_one_tag(tmp_path):
    layout = _layout(tmp_path, {"agent-amd64": "amd64", "agent-arm64": "arm64"})
    layout.add_index("agent", ["amd64", "arm64"])
    once = (tmp_path / "index.json").read_bytes()
    layout.add_index("agent", ["amd64", "arm64"])
    assert (tmp_path / "index.json").read_bytes() == once


@pytest.mark.parametrize(
    ("tagged", "message"),
    [
        pytest.param(
            {"agent-amd64": "amd64", "agent-arm64": "amd64"},
            "agent-arm64 is architecture 'amd64', not 'arm64'",
            id="a tag whose image declares another architecture is refused",
        ),
        pytest.param(
            {"agent-amd64": "amd64"},
            "has 0 manifests tagged 'agent-arm64'",
            id="a missing architecture is refused",
        ),
    ],
)
def test_refuses_an_index_the_images_do_not_support(tmp_path, tagged, message):
    layout = _layout(tmp_path, tagged)
    with pytest.raises(SystemExit, match=message):
        layout.add_index("agent", ["amd64", "arm64"])
    assert "agent" not in {
        m.get("annotations", {}).get(oci_index.REF_NAME) for m in layout.index()["manifests"]
    }
