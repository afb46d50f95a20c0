"""observation.agent.install through the real `crossplane composition render`.

The example gpu-north asks modelplane to install its agent: Crossplane must
receive one Object per manifest of deploy/agent (the kustomization's, the
image tagged with the function's own version), each through the cluster's
provider config, none allowed to delete; AgentInstalled must say how the
install goes, and name the object it cannot apply.
"""

from __future__ import annotations

import subprocess

from modelplane_devtools import artifacts, render, version
from modelplane_testkit.rendered import by_kind, composite, condition

CASES = {c["name"]: c for c in render.example_cases()}


def install_objects(rendered: list[dict]) -> dict[str, dict]:
    return {
        o["metadata"]["name"]: o
        for o in by_kind(rendered, "Object")
        if o["metadata"]["name"].startswith("gpu-north-agent-")
        and o["metadata"]["name"] != "gpu-north-agent-crd"
    }


def kustomization() -> list[dict]:
    done = subprocess.run(
        [str(render.kubectl()), "kustomize", str(render.ROOT / "deploy" / "agent")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return render.load_all(done.stdout)


def key(doc: dict) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


def test_the_first_pass_composes_every_manifest_of_the_kustomization(functions):
    rendered = render.render_case(functions, CASES["cluster-agent-install"])
    objects = install_objects(rendered)
    manifests = sorted((o["spec"]["forProvider"]["manifest"] for o in objects.values()), key=key)
    # Through Crossplane's wire and back: the bodies are still deploy/agent's.
    assert manifests == sorted(kustomization(), key=key)
    for obj in objects.values():
        assert obj["spec"]["providerConfigRef"] == {
            "kind": "ClusterProviderConfig",
            "name": "gpu-north",
        }
        assert obj["spec"]["managementPolicies"] == [
            "Observe", "Create", "Update", "LateInitialize"
        ]  # fmt: skip
    deployment = objects["gpu-north-agent-deployment-modelplane-agent"]
    container = deployment["spec"]["forProvider"]["manifest"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert container["image"] == artifacts.reference(artifacts.AGENT, version.tag())
    xr = composite(rendered)
    installed = condition(xr, "AgentInstalled")
    assert (installed["status"], installed["reason"]) == ("False", "Installing")
    assert "Deployment modelplane-system/modelplane-agent" in installed["message"]
    # The agent not installed yet leaves the cluster Ready for fallback placement.
    assert condition(xr, "Ready")["status"] == "True"


def test_an_object_the_provider_cannot_apply_is_named_in_agent_installed(functions):
    rendered = render.render_case(functions, CASES["cluster-agent-install-failed"])
    installed = condition(composite(rendered), "AgentInstalled")
    assert (installed["status"], installed["reason"]) == ("False", "InstallFailed")
    assert installed["message"].startswith(
        "Deployment modelplane-system/modelplane-agent: cannot create object: "
        'deployments.apps is forbidden: User "gpu-north-admin"'
    ), installed["message"]
    assert len(install_objects(rendered)) == 7
