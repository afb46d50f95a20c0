"""Every file that names a published artifact names it by the one rule (`artifacts`)."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from modelplane_devtools import artifacts, render, version
from modelplane_devtools.paths import ROOT

TAG = version.tag()
AGENT = artifacts.repository(artifacts.AGENT)


def _docs(path: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((ROOT / path).read_text()) if d]


def _packages(path: str, kind: str) -> list[str]:
    return sorted(d["spec"]["package"] for d in _docs(path) if d["kind"] == kind)


def _agent_container(path: str) -> dict:
    (deployment,) = [d for d in _docs(path) if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


FUNCTIONS = sorted(artifacts.reference(f, TAG) for f in artifacts.FUNCTIONS)
NAMED = [
    pytest.param(
        lambda: _packages("deploy/control-plane/configuration.yaml", "Configuration"),
        [artifacts.reference(artifacts.CONFIGURATION, TAG)],
        id="the control plane installs the Configuration by its name",
    ),
    pytest.param(
        lambda: _packages("deploy/control-plane/functions.yaml", "Function"),
        FUNCTIONS,
        id="the control plane declares the Functions by their names",
    ),
    pytest.param(
        lambda: _packages("examples/functions.yaml", "Function"),
        FUNCTIONS,
        id="the example Functions are named so too",
    ),
    pytest.param(
        lambda: sorted(
            f"{d['package']}:{d['version']}"
            for d in yaml.safe_load((ROOT / "apis" / "crossplane.yaml").read_text())["spec"][
                "dependsOn"
            ]
            if d["kind"] == "Function"
        ),
        FUNCTIONS,
        id="the Configuration depends on the Functions by their names",
    ),
    pytest.param(
        lambda: [_agent_container("deploy/agent/deployment.yaml")["image"]],
        [artifacts.reference(artifacts.AGENT, TAG)],
        id="deploy/agent runs the agent's image fully qualified",
    ),
    pytest.param(
        lambda: [
            e["name"]
            for e in yaml.safe_load((ROOT / "deploy/agent/kustomization.yaml").read_text())[
                "images"
            ]
        ],
        [AGENT],
        id="the kustomization's image entry is the agent's repository",
    ),
    pytest.param(
        lambda: [
            yaml.safe_load((ROOT / "deploy/helm/modelplane-agent/values.yaml").read_text())[
                "image"
            ]["repository"]
        ],
        [AGENT],
        id="the chart's default image is the agent's repository",
    ),
    pytest.param(
        lambda: [
            json.loads(
                (
                    ROOT / "functions/compose-inference-cluster/src/compose_inference_cluster"
                    "/agent_manifests.json"
                ).read_text()
            )["image"]
        ],
        [AGENT],
        id="the install compose-inference-cluster composes defaults to the agent's repository",
    ),
]


@pytest.mark.parametrize(("named", "expected"), NAMED)
def test_each_file_names_the_artifact_by_the_rule(named, expected):
    assert named() == expected


def test_the_functions_are_the_ones_rendered_and_built():
    build = (ROOT / "scripts" / "build-packages.sh").read_text()
    (listed,) = re.findall(r"^FUNCTIONS=\((.*)\)$", build, re.M)
    assert tuple(listed.split()) == artifacts.FUNCTIONS == render.FUNCTIONS
    assert re.search(rf"^CONFIGURATION={artifacts.CONFIGURATION}$", build, re.M)
    assert re.search(rf"^AGENT={artifacts.AGENT}$", build, re.M)


def test_the_build_tags_each_image_with_the_rules_repository():
    build = (ROOT / "scripts" / "build-packages.sh").read_text()
    assert "python -m modelplane_devtools.artifacts" in build
    assert not re.search(r"[^-]modelplane/", build), "an image tagged outside the registry"


def test_no_file_names_the_agents_short_docker_hub_name():
    """`modelplane/agent` resolves to docker.io, where the project publishes nothing."""
    tracked = [
        p
        for folder in ("apis", "deploy", "docs", "design", "examples", "functions", "schemas")
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and p.suffix in {".yaml", ".json", ".md", ".py"}
    ] + [ROOT / "README.md", ROOT / "scripts" / "build-packages.sh"]
    naming = [str(p.relative_to(ROOT)) for p in tracked if "modelplane/agent" in p.read_text()]
    assert naming == []
