"""observation.agent.install: deploy/agent's manifests composed on the workload cluster.

The composed manifests are compared with what `kubectl kustomize deploy/agent`
renders (the Helm chart is compared with the same render in
agent/tests/test_deploy.py), so the three ways to install cannot drift.
"""

from __future__ import annotations

import copy
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml
from compose_inference_cluster import agent_install, core
from compose_inference_cluster.fn import VERSION, FunctionRunner
from modelplane_common.composed import ObservedObject
from modelplane_devtools import render, version
from modelplane_testkit.wire import conditions, desired, request, run

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy" / "agent"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
IMAGE = "registry.example.com/modelplane-agent:v9.9.9"

SPEC = {
    "credentials": {"secretRef": {"namespace": "ops", "name": "east-kc", "key": "kubeconfig"}},
    "nodePools": [
        {
            "name": "h100",
            "nodeCount": 2,
            "devices": [
                {
                    "name": "gpu",
                    "claim": "DRA",
                    "driver": "gpu.nvidia.com",
                    "deviceClassName": "gpu.nvidia.com",
                    "count": 8,
                }
            ],
        }
    ],
    "observation": {"mode": "Observed", "maxAge": "5m", "agent": {"install": True}},
}


def spec(**agent) -> dict:
    body = copy.deepcopy(SPEC)
    body["observation"]["agent"] = agent
    return body


def decide(body: dict, observed: dict[str, ObservedObject] | None = None) -> core.Decision:
    return core.decide("east", body, observed or {}, {}, NOW, "0.1.0")


def manifests_of(decision: core.Decision) -> list[dict]:
    return [
        dict(d.body["spec"]["forProvider"]["manifest"])
        for name, d in decision.desired.items()
        if name.startswith(agent_install.PREFIX)
    ]


def by_kind_and_name(docs: list[dict]) -> list[dict]:
    return sorted(docs, key=lambda d: (d["kind"], d["metadata"]["name"]))


# ------------------------------------------------------------ one source, three installs


def test_the_default_install_is_exactly_what_the_kustomization_applies():
    rendered = render.kustomize(DEPLOY)
    composed = manifests_of(core.decide("east", spec(install=True), {}, {}, NOW, VERSION))
    assert by_kind_and_name(composed) == by_kind_and_name(rendered)


def test_an_image_changes_only_the_image_as_the_kustomizations_image_entry_does(tmp_path):
    shutil.copytree(DEPLOY, tmp_path / "agent")
    (tmp_path / "overlay").mkdir()
    name, _, tag = IMAGE.rpartition(":")
    (tmp_path / "overlay" / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": ["../agent"],
                "images": [{"name": agent_install.MANIFESTS.image, "newName": name, "newTag": tag}],
            }
        )
    )
    composed = manifests_of(decide(spec(install=True, image=IMAGE)))
    assert by_kind_and_name(composed) == by_kind_and_name(render.kustomize(tmp_path / "overlay"))


def test_the_function_knows_its_own_version_the_workspaces():
    assert version.version() == VERSION
    assert FunctionRunner().version == version.version()
    assert agent_install.default_image(VERSION) == (
        f"ghcr.io/modelplane-ai/modelplane-agent:{version.tag()}"
    )


def test_the_composed_deployment_carries_the_kustomizations_arguments():
    (deployment,) = [
        m for m in manifests_of(decide(spec(install=True))) if m["kind"] == "Deployment"
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    written = yaml.safe_load((DEPLOY / "deployment.yaml").read_text())
    (expected,) = written["spec"]["template"]["spec"]["containers"]
    assert container["args"] == expected["args"]
    assert not [a for a in container["args"] if a.startswith("--max-age")]


# ------------------------------------------------------------ the Objects


def test_install_objects_use_the_clusters_provider_config_and_never_delete():
    decision = decide(spec(install=True))
    installs = {n: d.body for n, d in decision.desired.items() if n.startswith("agent-install-")}
    assert sorted(installs) == [
        "agent-install-clusterrole-modelplane-agent",
        "agent-install-clusterrolebinding-modelplane-agent",
        "agent-install-customresourcedefinition-poolobservations",
        "agent-install-customresourcedefinition-replicaobservations",
        "agent-install-deployment-modelplane-agent",
        "agent-install-namespace-modelplane-system",
        "agent-install-serviceaccount-modelplane-agent",
    ]
    for body in installs.values():
        assert body["metadata"]["namespace"] == "ops"
        assert body["spec"]["providerConfigRef"] == {
            "kind": "ClusterProviderConfig",
            "name": "east",
        }
        assert "Delete" not in body["spec"]["managementPolicies"]
        assert "*" not in body["spec"]["managementPolicies"]
    assert installs["agent-install-deployment-modelplane-agent"]["metadata"]["name"] == (
        "east-agent-deployment-modelplane-agent"
    )


def applied(ready: bool = True, synced: bool | None = True, message: str = "") -> ObservedObject:
    return ObservedObject(body={}, ready=ready, synced=synced, synced_message=message)


ALL = sorted(agent_install.objects("east", "ops", IMAGE))
DEPLOYMENT = "agent-install-deployment-modelplane-agent"
NAMESPACE = "agent-install-namespace-modelplane-system"


class Case(NamedTuple):
    spec: dict
    observed: dict[str, ObservedObject]
    condition: tuple[str, str, str]  # AgentInstalled (status, reason, message)


CASES = [
    pytest.param(
        spec(),
        {},
        (
            "False",
            "NotRequested",
            "spec.observation.agent.install is false: the agent is installed by hand "
            "(kubectl apply -k deploy/agent, or the Helm chart)",
        ),
        id="no agent section: nothing to install, said so",
    ),
    pytest.param(
        spec(install=True, image=IMAGE),
        {n: applied() for n in ALL},
        ("True", "Installed", f"image {IMAGE}"),
        id="every Object Ready: Installed, naming the image",
    ),
    pytest.param(
        spec(install=True, image=IMAGE),
        {n: applied() for n in ALL if n != DEPLOYMENT},
        ("False", "Installing", "not applied yet: Deployment modelplane-system/modelplane-agent"),
        id="an Object not observed yet: Installing, naming its object",
    ),
    pytest.param(
        spec(install=True, image=IMAGE),
        {**{n: applied() for n in ALL}, NAMESPACE: applied(ready=False, synced=None)},
        ("False", "Installing", "not applied yet: Namespace modelplane-system"),
        id="an Object without conditions yet: Installing, a cluster-scoped object by name",
    ),
    pytest.param(
        spec(install=True, image=IMAGE),
        {
            **{n: applied() for n in ALL},
            DEPLOYMENT: applied(False, False, 'namespaces "modelplane-system" not found'),
        },
        (
            "False",
            "InstallFailed",
            'Deployment modelplane-system/modelplane-agent: namespaces "modelplane-system" '
            "not found",
        ),
        id="an Object the provider cannot apply: InstallFailed with the object and its reason",
    ),
    pytest.param(
        spec(install=True, image=IMAGE),
        {**{n: applied() for n in ALL}, DEPLOYMENT: applied(False, False)},
        (
            "False",
            "InstallFailed",
            "Deployment modelplane-system/modelplane-agent: the provider reports no reason",
        ),
        id="a failure without a message still names the object",
    ),
]


@pytest.mark.parametrize(("body", "observed", "expected"), CASES)
def test_agent_installed_says_how_the_install_goes(body, observed, expected):
    assert _condition(decide(body, observed)) == expected


def _condition(decision: core.Decision) -> tuple[str, str, str]:
    (found,) = [c for c in decision.conditions if c.type == "AgentInstalled"]
    return (found.status, found.reason, found.message)


def test_the_install_is_composed_in_declared_mode_too():
    body = spec(install=True)
    body["observation"]["mode"] = "Declared"
    assert len(manifests_of(decide(body))) == len(ALL)


def test_each_install_object_is_ready_as_the_provider_reports_it():
    observed = {**{n: applied() for n in ALL}, DEPLOYMENT: applied(ready=False)}
    ready = {n: d.ready for n, d in decide(spec(install=True), observed).desired.items()}
    assert {n for n in ALL if ready[n]} == set(ALL) - {DEPLOYMENT}


PREVIOUS = {n: ObservedObject(body=b, ready=True, synced=True) for n, b in
            agent_install.objects("east", "ops", IMAGE).items()}  # fmt: skip


class Removal(NamedTuple):
    spec: dict
    kept: bool


REMOVALS = [
    pytest.param(spec(), False, id="install turned off: the Objects go, their objects stay"),
    pytest.param(
        {**spec(install=True), "nodePools": []},
        True,
        id="an invalid spec keeps every install Object unchanged",
    ),
]


@pytest.mark.parametrize(("body", "kept"), REMOVALS)
def test_install_objects_leave_only_when_a_valid_spec_turns_install_off(body, kept):
    decision = decide(body, PREVIOUS)
    still = {n for n in decision.desired if n.startswith(agent_install.PREFIX)}
    assert still == (set(PREVIOUS) if kept else set())
    if kept:
        assert set(decision.kept) >= set(PREVIOUS)
        assert decision.desired[DEPLOYMENT].body == PREVIOUS[DEPLOYMENT].body


class Readiness(NamedTuple):
    observed: dict[str, ObservedObject]
    ready: bool


READINESS = [
    pytest.param({}, True, id="an install not applied yet leaves the cluster Ready"),
    pytest.param(
        {n: applied(False, False, "forbidden") for n in ALL},
        True,
        id="a failing install leaves the cluster Ready: counted by fallbacks",
    ),
]


@pytest.mark.parametrize(("observed", "ready"), READINESS)
def test_the_install_never_decides_the_clusters_ready(observed, ready):
    body = spec(install=True)
    body["observation"]["mode"] = "Declared"
    assert decide(body, observed).ready is ready


# ------------------------------------------------------------ through RunFunction


def test_run_function_composes_the_install_with_the_functions_version():
    xr = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "east"},
        "spec": spec(install=True),
    }
    rsp = run(FunctionRunner(clock=lambda: NOW, version="7.7.7"), request(xr, {}))
    deployment = desired(rsp)[DEPLOYMENT]["spec"]["forProvider"]["manifest"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "ghcr.io/modelplane-ai/modelplane-agent:v7.7.7"
    )
    assert conditions(rsp)["AgentInstalled"][:2] == ("False", "Installing")
