"""Whether a cluster takes a deployment's replicas for who the deployment is.

Three rules refuse a whole cluster to a deployment, each with one home, and
each gives its cause (modelplane_common.capacity.diagnosis) to every pool of
that cluster when a replica is placed:

    access      the cluster's spec.access.namespaceSelector does not select
                the deployment's Namespace (`Cluster.admits`):
                NAMESPACE_NOT_ADMITTED;
    namespace   the cluster reserves the deployment's namespace, in
                spec.tenancy.reservedNamespaces or everywhere
                (`workload_namespace.reserved_problem`): NAMESPACE_RESERVED;
    priority    a member's template names a priorityClassName the cluster's
                spec.tenancy.priorityClassNames does not list
                (`pod_template.priority_class_problem`):
                PRIORITY_CLASS_NOT_APPROVED.

The last two are the rules compose-model-replica applies at admission
(`tenancy_refusal`), called with the same lists (modelplane_common.cluster_tenancy),
so the scheduler never places a replica its cluster will not admit.

What a refusal does to replicas already there (placement.py; design/tenancy.md,
"A policy edit never deletes running work by surprise"):

    - an admitted replica keeps running: a policy edit alone never moves
      serving work. It takes no new devices there, is reported, and is the
      first removed on scale-down (`Plan.unadmitted`);
    - a replica its cluster has not admitted (WaitingForAdmission) that a
      tenancy rule refuses (`tenancy_refusal`, whatever access says) is moved
      like any replica that must leave: admission will never judge it there,
      and it runs and holds nothing there, so moving it restarts nothing;
      where nothing else fits it is stranded (not counted as scheduled) and
      tried again each pass. Access alone does not move a waiting replica:
      admission does not read access, so that replica is admitted in time and
      then is one more running replica kept where it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from modelplane_common import pod_template, workload_namespace
from modelplane_common.capacity.diagnosis import Cause
from modelplane_common.capacity.fleet import Cluster

from compose_model_deployment.model import DeploymentSpec


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a cluster takes none of a deployment's replicas: a cause and one line."""

    cause: Cause
    why: str

    @property
    def kept_on(self) -> str:
        """A replica kept on such a cluster, as ReplicasScheduled counts it."""
        return _KEPT_ON[self.cause]

    @property
    def runs_on(self) -> str:
        """What the cluster a replica runs on does, as its Warning event says it."""
        if self.cause is Cause.NAMESPACE_NOT_ADMITTED:
            return "whose spec.access.namespaceSelector no longer selects this namespace"
        return f"which refuses it ({self.why})"


_KEPT_ON = {
    Cause.NAMESPACE_NOT_ADMITTED: "on a cluster that no longer admits the namespace",
    Cause.NAMESPACE_RESERVED: "on a cluster that reserves the namespace",
    Cause.PRIORITY_CLASS_NOT_APPROVED: "on a cluster that does not approve its priority class",
}


def refusals(
    clusters: Iterable[Cluster], spec: DeploymentSpec, namespace_labels: Mapping[str, str] | None
) -> dict[str, Refusal]:
    """Each cluster that takes none of the deployment's replicas, by name, with the first
    rule that refuses it: access, then the namespace, then priority classes.
    `namespace_labels` None: the Namespace cannot be read."""
    found = {}
    for cluster in clusters:
        refused = _access_refusal(cluster, spec, namespace_labels) or tenancy_refusal(cluster, spec)
        if refused is not None:
            found[cluster.name] = refused
    return found


def _access_refusal(
    cluster: Cluster, spec: DeploymentSpec, namespace_labels: Mapping[str, str] | None
) -> Refusal | None:
    if cluster.admits(namespace_labels):
        return None
    return Refusal(
        Cause.NAMESPACE_NOT_ADMITTED,
        f"spec.access.namespaceSelector does not select namespace {spec.namespace}",
    )


def tenancy_refusal(cluster: Cluster, spec: DeploymentSpec) -> Refusal | None:
    """Why admission on `cluster` refuses the deployment's replicas (compose-model-replica's
    `tenancy_refusal`, by the same rules): its namespace, else a template's priority class;
    None when it judges them."""
    tenancy = cluster.tenancy
    reserved = workload_namespace.reserved_problem(spec.namespace, tenancy.reserved_namespaces)
    if reserved is not None:
        return Refusal(Cause.NAMESPACE_RESERVED, reserved)
    unapproved = [
        found
        for e, engine in enumerate(spec.engines)
        for m, member in enumerate(engine.members)
        if (
            found := pod_template.priority_class_problem(
                member.priority_class_name,
                f"spec.template.spec.engines[{e}].members[{m}].template",
                tenancy.priority_class_names,
            )
        )
        is not None
    ]
    if unapproved:
        return Refusal(Cause.PRIORITY_CLASS_NOT_APPROVED, "; ".join(unapproved))
    return None
