"""A provider-kubernetes Object that applies one manifest on a workload cluster.

Both compose functions that run things on a workload cluster build their
Objects here: compose-model-replica its workloads, claim templates and
ReplicaObservation, compose-model-deployment the Namespace they run in
(modelplane_common.workload_namespace). An Object names the cluster's
ClusterProviderConfig, which compose-inference-cluster publishes in the
InferenceCluster's `status.providerConfigRef` (`provider_config_of` reads
it), and watches its remote object.

Names
    An Object's name, and a name on the workload cluster, carries a short
    digest of the parts it is made of (`bounded_name`), so that `a-b`/`c`
    and `a`/`b-c` never collide, and is bounded: 63 characters unless the
    caller asks for fewer. Two names made of different parts differ in
    their digest input (parts hold no NUL), so names made of a different
    NUMBER of parts never share it: compose-model-deployment's Namespace
    Object is named with four parts, an arity no replica Object has.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from modelplane_common import labels
from modelplane_common.labels import label_value

NAME_MAX = 63


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:6]


def bounded_name(*parts: str, limit: int = NAME_MAX) -> str:
    """`parts` joined by dashes, dots replaced, with a digest of the parts; at most `limit`."""
    suffix = "-" + _digest(*parts)
    base = "-".join(parts).replace(".", "-")[: limit - len(suffix)].rstrip("-")
    return base + suffix


def provider_config_of(cluster: Mapping) -> str:
    """An InferenceCluster's `status.providerConfigRef.name`; "" until it is published."""
    status = cluster.get("status")
    ref = status.get("providerConfigRef") if isinstance(status, Mapping) else None
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return name if isinstance(name, str) else ""


def wrap(
    *,
    name: str,
    namespace: str,
    cluster: str,
    provider_config: str,
    manifest: Mapping,
    ready_when: str | None = None,
) -> dict:
    """An Object in control-plane `namespace` applying `manifest` on `cluster`."""
    spec: dict = {
        "providerConfigRef": {"kind": "ClusterProviderConfig", "name": provider_config},
        "forProvider": {"manifest": manifest},
        # Relays remote status (agent reports, workload availability)
        # within seconds rather than at the provider's poll interval.
        "watch": True,
    }
    if ready_when:
        spec["readiness"] = {"policy": "DeriveFromCelQuery", "celQuery": ready_when}
    return {
        "apiVersion": labels.OBJECT_API_VERSION,
        "kind": "Object",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {labels.CLUSTER: label_value(cluster)},
        },
        "spec": spec,
    }
