"""The tenant's inputs: the deployment's Namespace and its ResourceQuotas.

Every requirement about WHO the deployment belongs to lives here, apart from
the fleet's (InferenceClusters, ModelReplicas), so a reconcile that reads
only its own replicas can drop or keep them as one block:

    namespace        the deployment's Namespace (v1, by name): its labels are
                     what InferenceCluster spec.access.namespaceSelector
                     selects (design/tenancy.md, "Access and quotas");
    resource-quotas  every ResourceQuota (v1) in that namespace: the device
                     quota, `<deviceclass>.deviceclass.resource.k8s.io/devices`
                     (modelplane_common.capacity.quota).

Reading them
    Not fetched yet (the first call): the pass waits (WaitingForInputs).
    The Namespace fetched and absent (an offline render, a namespace being
    deleted): its labels are unknown, so only clusters without an access
    selector admit the deployment, never one that restricts access; this is
    said as an input problem. No ResourceQuota, or none with a device key:
    no device is limited.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from modelplane_common.capacity.quota import read_device_quota
from modelplane_common.requirements import ResourceRequirement

from compose_model_deployment.model import Tenant

NAMESPACE = "namespace"
QUOTAS = "resource-quotas"


def requirements(namespace: str) -> tuple[ResourceRequirement, ...]:
    """The deployment's Namespace by name, and every ResourceQuota in it."""
    return (
        ResourceRequirement.by_name(NAMESPACE, "v1", "Namespace", namespace),
        ResourceRequirement.by_labels(QUOTAS, "v1", "ResourceQuota", {}, namespace=namespace),
    )


@dataclass(frozen=True, slots=True)
class TenantFetched:
    """The tenant's required resources as fetched; None for one not fetched yet."""

    namespaces: Sequence[Mapping] | None = None
    quotas: Sequence[Mapping] | None = None

    def unfetched(self) -> list[str]:
        return [
            n for n, items in ((NAMESPACE, self.namespaces), (QUOTAS, self.quotas)) if items is None
        ]


# Fetched, no Namespace object, no quota: the fetched-empty answer.
NOTHING_FETCHED = TenantFetched(namespaces=(), quotas=())


def _labels(namespace: str, found: Sequence[Mapping]) -> tuple[Mapping[str, str] | None, list[str]]:
    for obj in found:
        meta = obj.get("metadata") or {}
        if meta.get("name") == namespace:
            raw = meta.get("labels") or {}
            labels = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}
            return labels, []
    note = (
        f"Namespace {namespace} cannot be read: only InferenceClusters without "
        "spec.access.namespaceSelector admit this deployment"
    )
    return None, [note]


def read_tenant(namespace: str, fetched: TenantFetched) -> tuple[Tenant, list[str]]:
    """The tenant (what its other replicas claim is added once they are read) and what
    reading it noted. `fetched` must be fetched (unfetched() empty)."""
    labels, notes = _labels(namespace, fetched.namespaces or ())
    quota, quota_notes = read_device_quota(namespace, fetched.quotas or ())
    return Tenant(labels=labels, quota=quota), [*notes, *quota_notes]
