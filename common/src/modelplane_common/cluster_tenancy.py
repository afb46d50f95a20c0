"""An InferenceCluster's `spec.tenancy`: what tenants may use on that cluster.

Two lists, read once at the edge into `ClusterTenancy` by `read`, for both
functions that judge them:

    priorityClassNames  the only PriorityClasses a member's pod template may
                        name there (`pod_template.priority_class_problem`);
                        none by default;
    reservedNamespaces  workload namespaces no replica may use there, beside
                        those reserved on every cluster
                        (`workload_namespace.reserved_problem`).

compose-model-replica refuses a replica its cluster refuses at admission
(`Admitted=False/WaitingForAdmission`, `WorkloadsComposed=False/
NamespaceReserved` or `PriorityClassNotApproved`); compose-model-deployment
never places a replica on such a cluster (its `usable.refusal`). Both call the
same two rules with the same lists, so the scheduler never places what
admission then refuses (design/tenancy.md, "The template rule" and
"Workload namespaces").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ClusterTenancy:
    """spec.tenancy of one InferenceCluster; empty lists when absent."""

    priority_class_names: tuple[str, ...] = ()
    reserved_namespaces: tuple[str, ...] = ()


OPEN = ClusterTenancy()


def read(spec: Mapping) -> ClusterTenancy:
    """spec.tenancy of a cluster spec that passed its schema check (which admits only lists
    of non-empty strings there); anything else in a list is skipped, never raised on."""
    tenancy = spec.get("tenancy")
    if not isinstance(tenancy, Mapping):
        return OPEN
    return ClusterTenancy(
        priority_class_names=_names(tenancy.get("priorityClassNames")),
        reserved_namespaces=_names(tenancy.get("reservedNamespaces")),
    )


def _names(raw: object) -> tuple[str, ...]:
    return tuple(n for n in raw if isinstance(n, str)) if isinstance(raw, list) else ()
