"""The workload Namespace: one Object per cluster the deployment's replicas run on.

A replica's pods run on its cluster in the namespace named like the
deployment's own (modelplane_common.workload_namespace). The deployment,
not each replica, composes that Namespace: one provider-kubernetes Object
per (deployment, cluster), however many replicas it has there, because
every composed Object costs the control plane writes on every reconcile and
provider poll (design/reconcile.md, "What it costs").

Which clusters
    Every cluster a replica this pass writes is on (`in_use`): placed, kept,
    moved to, reshaped, held or stranded there, draining or not. A cluster
    the deployment has no replica on any more gets none: Crossplane deletes
    the Object, and its management policies (no Delete) keep the remote
    namespace and everything in it, other deployments' and tenants' work
    included.

What each gets (`compose`), per cluster in use
    - the cluster read (its spec passed its schema), its provider config
      published and the namespace not reserved there: the Namespace Object,
      labelled with the cluster's Pod Security level;
    - the cluster read and the namespace reserved there (on every cluster,
      or in its spec.tenancy.reservedNamespaces): none. A reserved namespace
      is never composed: the tenant may not label a system namespace. A
      replica kept running there keeps its pods (usable.py);
    - otherwise (the cluster missing, unreadable, or with no provider config
      yet): the Object as observed, if any, unchanged: a missing input never
      changes what runs (`kept` does the same for a pass that plans nothing).

The result is a function of the clusters in use, the clusters as read and
the observed Objects, so the same view gives the same Objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from modelplane_common import cluster_tenancy, remote_object, workload_namespace
from modelplane_common.outcome import unchanged

# The composition resource names of the Namespace Objects: this prefix and the cluster.
PREFIX = "namespace/"


def resource_name(cluster: str) -> str:
    return PREFIX + cluster


@dataclass(frozen=True, slots=True)
class Site:
    """What the Namespace reads of one InferenceCluster whose spec passed its schema."""

    provider_config: str  # status.providerConfigRef.name; "" until published
    pod_security: str  # spec.workloads.podSecurity
    reserved: tuple[str, ...]  # spec.tenancy.reservedNamespaces


def read_sites(cluster_objects: Iterable[Mapping], readable: Iterable[str]) -> dict[str, Site]:
    """The clusters named in `readable` (those whose spec the scheduler could read, so it
    passed its schema), by name."""
    wanted = set(readable)
    sites = {}
    for obj in cluster_objects:
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        spec = obj.get("spec")
        if name in wanted and isinstance(spec, Mapping):
            sites[str(name)] = Site(
                provider_config=remote_object.provider_config_of(obj),
                pod_security=workload_namespace.pod_security_of(spec),
                reserved=cluster_tenancy.read(spec).reserved_namespaces,
            )
    return sites


def compose(
    *,
    deployment: str,
    namespace: str,
    in_use: Iterable[str],
    sites: Mapping[str, Site],
    observed: Mapping[str, Mapping],
) -> dict[str, dict]:
    """The Namespace Objects of a pass that planned, by composition resource name."""
    desired = {}
    for cluster in sorted(set(in_use)):
        key = resource_name(cluster)
        site = sites.get(cluster)
        if site is None or not site.provider_config:
            if key in observed:
                desired[key] = unchanged(observed[key])
            continue
        if workload_namespace.reserved_problem(namespace, site.reserved) is not None:
            continue
        desired[key] = workload_namespace.namespace_object(
            deployment=deployment,
            namespace=namespace,
            cluster=cluster,
            provider_config=site.provider_config,
            pod_security=site.pod_security,
        )
    return desired


def kept(observed: Mapping[str, Mapping]) -> dict[str, dict]:
    """Every observed Namespace Object as it is (a pass that planned nothing)."""
    return {key: unchanged(obj) for key, obj in sorted(observed.items())}
