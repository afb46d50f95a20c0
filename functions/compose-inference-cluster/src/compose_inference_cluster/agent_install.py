"""The agent installed by the function: deploy/agent's manifests as provider-kubernetes Objects.

With `spec.observation.agent.install: true`, compose-inference-cluster
composes on the workload cluster exactly what `kubectl apply -k
deploy/agent` applies and what the Helm chart renders for its defaults: the
agent's two CRDs, its Namespace, ServiceAccount, ClusterRole and binding,
and its Deployment with the kustomization's arguments. The manifests are
`agent_manifests.json`, which `schemas/generate.py` derives from the
kustomization (a test fails when it is stale, another when what is composed
differs from `kubectl kustomize` for the same image), so the three ways to
install cannot drift. Only the image is the function's: `image` when the
spec names one, else `ghcr.io/modelplane-ai/modelplane-agent:v<the function's own
version>` (the release's name for it, fully qualified), the
tag `make packages` gives the agent's image of the same build.

Invariants
    - The Objects create and update, never delete (no `Delete` in their
      management policies): deleting the CRDs would delete every
      PoolObservation and ReplicaObservation on the cluster, and an
      InferenceCluster deleted or re-created, or `install` turned off, must
      not take the agent away from a cluster that still runs replicas.
      Removing an Object only stops managing its object; uninstall is
      `kubectl delete -k deploy/agent` on the workload cluster.
    - The install says nothing about the cluster's `Ready`: a cluster whose
      agent is not (yet) installed is counted by its pools' fallbacks, as one
      without the agent always was. `AgentInstalled` says how the install goes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

from modelplane_common import labels
from modelplane_common.composed import ObservedObject
from modelplane_common.outcome import Condition, capped

PREFIX = "agent-install-"
CONDITION = "AgentInstalled"
# Every action but Delete (module docstring).
MANAGEMENT_POLICIES = ["Observe", "Create", "Update", "LateInitialize"]


@dataclass(frozen=True, slots=True)
class Manifests:
    image: str  # the image name the kustomization's `images` entry rewrites
    objects: tuple[Mapping, ...]  # in the kustomization's order

    @classmethod
    def load(cls) -> Manifests:
        text = resources.files(__package__).joinpath("agent_manifests.json").read_text()
        body = json.loads(text)
        return cls(body["image"], tuple(body["objects"]))


MANIFESTS = Manifests.load()


def default_image(version: str) -> str:
    """The agent's image of the same build as this function: `make packages` tags both."""
    return f"{MANIFESTS.image}:v{version}"


def _suffix(manifest: Mapping) -> str:
    """`<kind>-<first label of the name>`: unique among the manifests, readable in a listing."""
    return f"{manifest['kind'].lower()}-{manifest['metadata']['name'].split('.')[0]}"


def resource_name(manifest: Mapping) -> str:
    """The composition resource name of one install manifest's Object."""
    return PREFIX + _suffix(manifest)


def manifests(image: str) -> list[dict]:
    """deploy/agent's objects with the agent's container running `image`."""
    out = []
    for obj in MANIFESTS.objects:
        manifest = json.loads(json.dumps(obj))
        pod = manifest.get("spec", {}).get("template", {}).get("spec", {})
        for container in pod.get("containers", []):
            if container.get("image") == MANIFESTS.image:
                container["image"] = image
        out.append(manifest)
    return out


def objects(xr_name: str, namespace: str, image: str) -> dict[str, dict]:
    """The install Objects by composition resource name, applied through the cluster's
    ClusterProviderConfig (named after the cluster) from the credentials' namespace."""
    return {
        resource_name(manifest): {
            "apiVersion": labels.OBJECT_API_VERSION,
            "kind": "Object",
            "metadata": {"name": f"{xr_name}-agent-{_suffix(manifest)}", "namespace": namespace},
            "spec": {
                "managementPolicies": list(MANAGEMENT_POLICIES),
                "providerConfigRef": {"kind": "ClusterProviderConfig", "name": xr_name},
                "forProvider": {"manifest": manifest},
            },
        }
        for manifest in manifests(image)
    }


def _shown(obj: Mapping) -> str:
    """`<Kind> [<namespace>/]<name>` of the workload-cluster object an Object applies."""
    manifest = obj["spec"]["forProvider"]["manifest"]
    meta = manifest["metadata"]
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{manifest['kind']} {where}{meta['name']}"


def condition(
    requested: bool, composed: Mapping[str, Mapping], observed: Mapping[str, ObservedObject]
) -> Condition:
    """How the install goes: every Object applied, some failing (the provider's reason,
    each object named), or some not applied yet."""
    if not requested:
        return Condition(
            CONDITION,
            "False",
            "NotRequested",
            "spec.observation.agent.install is false: the agent is installed by hand "
            "(kubectl apply -k deploy/agent, or the Helm chart)",
        )
    states = [(name, observed.get(name)) for name in composed]
    failing = [(n, o) for n, o in states if o is not None and o.synced is False]
    if failing:
        return Condition(
            CONDITION,
            "False",
            "InstallFailed",
            capped(
                "; ".join(
                    f"{_shown(composed[n])}: {o.synced_message or 'the provider reports no reason'}"
                    for n, o in failing
                )
            ),
        )
    waiting = [n for n, o in states if o is None or not o.ready]
    if waiting:
        return Condition(
            CONDITION,
            "False",
            "Installing",
            "not applied yet: " + ", ".join(_shown(composed[n]) for n in waiting),
        )
    return Condition(CONDITION, "True", "Installed", f"image {image_of(composed)}")


def image_of(composed: Mapping[str, Mapping]) -> str:
    """The agent's image in the composed Deployment."""
    for obj in composed.values():
        manifest = obj["spec"]["forProvider"]["manifest"]
        if manifest["kind"] == "Deployment":
            containers: Sequence[Mapping] = manifest["spec"]["template"]["spec"]["containers"]
            return str(containers[0]["image"])
    return ""
