"""Which control-plane namespaces may run pods on a workload cluster.

A replica's pods run in the workload cluster namespace named like the
replica's own control-plane namespace. Its ModelDeployment composes and
adopts that Namespace, one Object per (deployment, cluster) it has replicas
on (compose-model-deployment's namespaces.py, built by `namespace_object`
here): it sets its Pod Security labels, and the replicas put pods in it.
A tenant namespace whose name is a system namespace of the workload
cluster would therefore land beside system components, relabel their
namespace and run pods with their ServiceAccounts in reach. So some names
are reserved and refused, on every cluster:

    - `default`, and every name starting with `kube-` (`kube-system`,
      `kube-public`, `kube-node-lease`: Kubernetes' own);
    - `modelplane-system`, where the agent runs (deploy/agent);

plus, per cluster, the names its InferenceCluster lists in
`spec.tenancy.reservedNamespaces` (the GPU operator's, the DRA driver's,
LeaderWorkerSet's, whatever the platform runs there).

The mapping stays one to one (a name is either used as it is or refused),
so no install's running work moves: a prefix would rename every remote
namespace, and the replicas composed under the old name would have to be
re-created elsewhere. design/tenancy.md, "Workload namespaces".

The Namespace
    It carries the cluster's Pod Security Admission level
    (`spec.workloads.podSecurity`, `pod_security_of`) as its enforce and warn
    labels. It is shared by every replica of the namespace on the cluster,
    whatever deployment composed them, and none may delete it: its Object's
    management policies leave out Delete (`POLICIES`), so deleting a
    deployment, or a deployment leaving the cluster, only stops managing the
    Namespace and never deletes others' workloads. Its Object is named by
    `namespace_object_name`: four parts, so no replica Object (three or five
    parts, modelplane_common.remote_object) shares its name.
"""

from __future__ import annotations

from collections.abc import Mapping

from modelplane_common import remote_object
from modelplane_common.inputs import problem

RESERVED = ("default", "modelplane-system")
RESERVED_PREFIX = "kube-"


def reserved_by_default(namespace: str) -> bool:
    """Whether `namespace` is reserved on every workload cluster."""
    return namespace in RESERVED or namespace.startswith(RESERVED_PREFIX)


def reserved_problem(namespace: str, reserved_here: tuple[str, ...] = ()) -> str | None:
    """Why pods of `namespace` may not run on a cluster that also reserves `reserved_here`;
    None when they may."""
    if reserved_by_default(namespace):
        return problem(
            "metadata.namespace",
            f"is reserved on every workload cluster ({', '.join(RESERVED)} and "
            f"{RESERVED_PREFIX}*): a tenant's pods may not run in a system namespace",
            namespace,
        )
    if namespace in reserved_here:
        return problem(
            "metadata.namespace",
            "is reserved on this workload cluster (spec.tenancy.reservedNamespaces)",
            namespace,
        )
    return None


DEFAULT_POD_SECURITY = "baseline"  # the XRD's default for spec.workloads.podSecurity
POD_SECURITY = "pod-security.kubernetes.io/"
# Every action but Delete: the Namespace is shared by every replica of one namespace on
# the cluster, and deleting it would delete their workloads.
POLICIES = ("Observe", "Create", "Update", "LateInitialize")


def pod_security_of(spec: Mapping) -> str:
    """An InferenceCluster's spec.workloads.podSecurity; the schema check before this
    admits only its enum."""
    workloads = spec.get("workloads")
    level = workloads.get("podSecurity") if isinstance(workloads, Mapping) else None
    return level if isinstance(level, str) and level else DEFAULT_POD_SECURITY


def manifest(namespace: str, pod_security: str) -> dict:
    """The workload namespace, enforcing (and warning at) the cluster's Pod Security level."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace,
            "labels": {
                POD_SECURITY + "enforce": pod_security,
                POD_SECURITY + "enforce-version": "latest",
                POD_SECURITY + "warn": pod_security,
                POD_SECURITY + "warn-version": "latest",
            },
        },
    }


def namespace_object_name(deployment: str, cluster: str) -> str:
    """The name of the Object deployment `deployment` composes its Namespace on `cluster`
    with, in the deployment's own namespace."""
    return remote_object.bounded_name(deployment, cluster, "deployment", "namespace")


def namespace_object(
    *, deployment: str, namespace: str, cluster: str, provider_config: str, pod_security: str
) -> dict:
    """The Object composing `namespace` on `cluster`, never deleting it."""
    obj = remote_object.wrap(
        name=namespace_object_name(deployment, cluster),
        namespace=namespace,
        cluster=cluster,
        provider_config=provider_config,
        manifest=manifest(namespace, pod_security),
    )
    obj["spec"]["managementPolicies"] = list(POLICIES)
    return obj


def explain_unapplied(synced_message: str, namespace: str) -> str:
    """The provider's reason an Object cannot be applied, and, when the reason is that the
    workload namespace does not exist on the cluster (the API server's NotFound for it),
    who composes that namespace: a replica does not, its ModelDeployment does."""
    if f'namespaces "{namespace}" not found' not in synced_message:
        return synced_message
    return (
        f"{synced_message} (namespace {namespace} is composed on the cluster by the "
        "replica's ModelDeployment, once it places a replica there)"
    )
