"""Manifests the e2e suites apply: tenants' ModelDeployments, namespaces, and other
work that claims GPUs.

Each builder returns the plain dict the API server receives, keys in the order a
manifest reads; what differs between suites is a keyword-only parameter, and a
part left out (a namespace's labels, a deployment's cluster selector or healing,
a member's devices) is absent from the manifest, not empty. The InferenceCluster
and its kubeconfig Secret are `modelplane_e2e.fleet`'s, next to the pools
they declare.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

API_VERSION = "modelplane.ai/v1alpha1"


def namespace(name: str, *, labels: Mapping[str, str] | None = None) -> dict:
    metadata: dict = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def model_deployment(
    name: str,
    *,
    namespace: str,
    engines: Sequence[dict],
    replicas: int = 1,
    cluster_labels: Mapping[str, str] | None = None,
    healing: Mapping[str, str] | None = None,
) -> dict:
    """A ModelDeployment of `engines`; without `cluster_labels` it may go to any cluster."""
    template: dict = {}
    if cluster_labels is not None:
        template["clusterSelector"] = {"matchLabels": dict(cluster_labels)}
    template["engines"] = list(engines)
    spec: dict = {"replicas": replicas}
    if healing is not None:
        spec["healing"] = dict(healing)
    spec["template"] = {"spec": template}
    return {
        "apiVersion": API_VERSION,
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def standalone_engine(*, container: dict, gpus: int | None = None, name: str = "serve") -> dict:
    """One engine of one Standalone member running `container`, asking `gpus` devices
    named `gpu` (no device request without it)."""
    member: dict = {"role": "Standalone"}
    if gpus is not None:
        member["nodeSelector"] = {"devices": [{"name": "gpu", "count": gpus}]}
    member["template"] = {"spec": {"containers": [container]}}
    return {"name": name, "members": [member]}


def gpu_claim_template(name: str, *, namespace: str, device_class: str, count: int) -> dict:
    """A ResourceClaimTemplate whose claim asks exactly `count` devices of `device_class`,
    as request `gpu`."""
    request = {
        "name": "gpu",
        "exactly": {
            "deviceClassName": device_class,
            "allocationMode": "ExactCount",
            "count": count,
        },
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def claiming_pod_spec(
    *, node_selector: Mapping[str, str], claim_template: str, container: str, image: str
) -> dict:
    """A pod spec whose one container holds the claim made from `claim_template`
    (as claim `gpus`), on a node matching `node_selector`."""
    return {
        "nodeSelector": dict(node_selector),
        "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": claim_template}],
        "containers": [
            {"name": container, "image": image, "resources": {"claims": [{"name": "gpus"}]}}
        ],
    }
