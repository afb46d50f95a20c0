"""The third-party CRDs the validation tests read: all present, or an error that says so."""

from __future__ import annotations

import pytest
from modelplane_devtools import paths, render

ALL = sorted(render.THIRD_PARTY_KINDS)


def write_crds(folder, kinds):
    for group, kind in kinds:
        (folder / f"{group}_{kind.lower()}s.yaml").write_text(
            f"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
            f"spec:\n  group: {group}\n  names:\n    kind: {kind}\n"
        )


@pytest.mark.parametrize(
    ("present", "missing"),
    [
        pytest.param(ALL, [], id="every kind present gives every file"),
        pytest.param(
            [k for k in ALL if k[1] != "LeaderWorkerSet"],
            ["leaderworkerset.x-k8s.io/LeaderWorkerSet"],
            id="a missing LeaderWorkerSet CRD is an error naming it",
        ),
        pytest.param(
            [], [f"{g}/{k}" for g, k in ALL], id="an empty folder is an error naming every kind"
        ),
    ],
)
def test_third_party_crds(tmp_path, present, missing):
    write_crds(tmp_path, present)
    if not missing:
        assert len(render.third_party_crds(tmp_path)) == len(ALL)
        return
    with pytest.raises(paths.ToolMissing) as raised:
        render.third_party_crds(tmp_path)
    for name in missing:
        assert name in str(raised.value)
    assert "make setup" in str(raised.value)


def test_setup_copied_every_third_party_kind():
    assert len(render.third_party_crds()) >= len(ALL)
