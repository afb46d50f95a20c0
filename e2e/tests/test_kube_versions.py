"""The supported Kubernetes versions: chosen by name, each pinned in tools/ and built by
the target it names, a binary not built refused with that target, and the Makefile's
matrix the same list."""

from __future__ import annotations

import dataclasses
import re

import pytest
from modelplane_devtools import paths
from modelplane_e2e import binaries
from modelplane_e2e.kube_versions import MATRIX, V1_35, V1_36, V1_37, find
from modelplane_testkit.oracle_states import GATES_OFF, KNOWN_DISAGREEMENTS

ROOT = paths.ROOT


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", V1_35, id="nothing named is the oldest, v1.35.4"),
        pytest.param("v1.37.2", V1_37, id="a full version names it"),
        pytest.param("1.36.3", V1_36, id="the v is optional"),
        pytest.param("v1.37", V1_37, id="a minor names its patch release"),
        pytest.param(" 1.35 ", V1_35, id="surrounding spaces are ignored"),
    ],
)
def test_a_version_is_chosen_by_name(text, expected):
    assert find(text) is expected


@pytest.mark.parametrize("text", ["v1.34.0", "1.37.1", "latest"])
def test_an_unsupported_version_is_refused_naming_the_supported(text):
    with pytest.raises(ValueError, match=re.escape("supported: v1.35.4, v1.36.3, v1.37.2")):
        find(text)


@pytest.mark.parametrize("kube", MATRIX[1:], ids=lambda k: k.version)
def test_each_newer_minor_is_pinned_in_tools_and_built_by_its_target(kube):
    go_mod = (ROOT / "tools" / f"kubernetes-{kube.minor}" / "go.mod").read_text()
    assert re.search(rf"^\s*k8s\.io/kubernetes {re.escape(kube.version)}\b", go_mod, re.M)
    script = (ROOT / "scripts" / "e2e-tools.sh").read_text()
    target = kube.build.removeprefix("bash scripts/e2e-tools.sh ")
    assert f"{target})" in script or f"{target} |" in script
    assert kube.bin == ROOT / ".tools" / "kubernetes" / kube.version / "bin"


def test_a_command_not_built_fails_with_the_command_that_builds_it(tmp_path):
    unbuilt = dataclasses.replace(V1_36, bin=tmp_path)
    with pytest.raises(
        paths.ToolMissing,
        match=re.escape(
            "kube-scheduler is missing: run `bash scripts/e2e-tools.sh kubernetes-1.36`"
        ),
    ):
        binaries.binary("kube-scheduler", unbuilt)


def test_the_makefile_matrix_is_this_one_oldest_first():
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^KUBE_MATRIX := (.*)$", makefile, re.M)
    newest = re.search(r"^KUBE_NEWEST := (.*)$", makefile, re.M)
    assert listed and listed.group(1).split() == [k.version for k in MATRIX]
    assert newest and newest.group(1).strip() == MATRIX[-1].version


def test_every_version_states_its_known_oracle_disagreements():
    assert set(KNOWN_DISAGREEMENTS) == {k.version for k in MATRIX}


@pytest.mark.parametrize("kube", MATRIX, ids=lambda k: k.version)
def test_every_version_states_the_oracle_gates_it_has_off_none_it_turns_on(kube):
    assert not GATES_OFF[kube.version] & set(kube.feature_gates)
    assert set(GATES_OFF) == {k.version for k in MATRIX}
