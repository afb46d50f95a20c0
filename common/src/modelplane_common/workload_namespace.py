"""Which control-plane namespaces may run pods on a workload cluster.

A replica's pods run in the workload cluster namespace named like the
replica's own control-plane namespace, and the replica composes and adopts
that Namespace (compose-model-replica's workloads.py): it sets its Pod
Security labels and puts pods in it. A tenant namespace whose name is a
system namespace of the workload cluster would therefore land beside
system components, relabel their namespace and run pods with their
ServiceAccounts in reach. So some names are reserved and refused, on every
cluster:

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
"""

from __future__ import annotations

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
