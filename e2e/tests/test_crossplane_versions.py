"""The e2e's choice of Crossplane core and provider-kubernetes: each end of the supported range."""

from __future__ import annotations

import re

import pytest
from modelplane_devtools.paths import ROOT
from modelplane_e2e import crossplane_versions, install

REGISTRY = "127.0.0.1:5000"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(None, crossplane_versions.NEWEST, id="unset runs the newest releases"),
        pytest.param("newest", crossplane_versions.NEWEST, id="newest runs the newest releases"),
        pytest.param(
            "floor", crossplane_versions.FLOOR, id="floor runs the oldest supported releases"
        ),
        pytest.param(" floor ", crossplane_versions.FLOOR, id="surrounding blanks are ignored"),
    ],
)
def test_the_environment_selects_the_versions(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv(crossplane_versions.ENVIRONMENT, raising=False)
    else:
        monkeypatch.setenv(crossplane_versions.ENVIRONMENT, value)
    assert crossplane_versions.selected() == expected


def test_an_unknown_choice_is_refused_naming_the_variable_and_the_choices(monkeypatch):
    monkeypatch.setenv(crossplane_versions.ENVIRONMENT, "latest")
    with pytest.raises(
        crossplane_versions.UnknownVersions, match=r"MODELPLANE_E2E_VERSIONS='latest'.*floor"
    ):
        crossplane_versions.selected()


def test_the_floor_is_what_the_configuration_admits_first_and_the_newest_core_is_later():
    def release(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split("."))

    assert release(crossplane_versions.FLOOR.crossplane.version()) < release(
        crossplane_versions.NEWEST.crossplane.version()
    )
    # Later provider releases cannot be built from the module proxy (PROVIDER_FLOOR says why).
    assert crossplane_versions.NEWEST.provider == crossplane_versions.FLOOR.provider
    constraint = (ROOT / "apis" / "crossplane.yaml").read_text()
    assert f'">=v{crossplane_versions.FLOOR.crossplane.version()}-0"' in constraint
    assert f'">=v{crossplane_versions.FLOOR.provider.version()}, <v2.0.0"' in constraint


@pytest.mark.parametrize(
    "choice",
    [crossplane_versions.NEWEST, crossplane_versions.FLOOR],
    ids=lambda v: f"{v.name} releases",
)
def test_each_binary_is_built_by_a_script_from_the_module_that_pins_its_release(choice):
    # `build <module dir> [<package>] <binary>[=<package>]`, continuation lines joined.
    text = "\n".join((ROOT / "scripts" / n).read_text() for n in ("setup.sh", "e2e-tools.sh"))
    scripts = " ".join(text.replace("\\\n", " ").split())
    for release in (choice.crossplane, choice.provider):
        assert (ROOT / "tools" / release.tools_module / "go.sum").is_file(), release
        built = rf"(?:^|\s)(?:tools/)?{re.escape(release.tools_module)} (?:\S+ )?"
        assert re.search(built + rf"{re.escape(release.binary)}[= ]", scripts), release


@pytest.mark.parametrize(
    ("pushed", "expected"),
    [
        pytest.param("xpkg.io/o/p:v1.2.1", None, id="the release the manifest names needs none"),
        pytest.param(
            "xpkg.io/o/p:v1.3.1",
            f"{REGISTRY}/o/p:v1.3.1",
            id="another release is served for the manifest's exact reference",
        ),
    ],
)
def test_a_provider_release_other_than_the_manifests_is_served_through_one_image_config(
    pushed, expected
):
    config = install.release_image_config("xpkg.io/o/p:v1.2.1", pushed, REGISTRY)
    if expected is None:
        assert config is None
    else:
        assert config is not None
        assert config["spec"]["matchImages"] == [{"type": "Prefix", "prefix": "xpkg.io/o/p:v1.2.1"}]
        assert config["spec"]["rewriteImage"]["prefix"] == expected


def test_the_floor_provider_is_the_release_the_manifest_names_and_needs_no_extra_image_config():
    todo = [install.Push(ROOT, r) for r in install.public_references()]
    owners = install.image_configs({install.owner_prefix(p.reference) for p in todo}, REGISTRY)
    assert install.mirror_configs(todo, REGISTRY, crossplane_versions.FLOOR.provider) == owners
