"""Why a replica could not be placed: one cause per pool, counted, formatted once.

Model
    An attempt to place a replica anywhere walks every selected cluster and,
    on a cluster that takes new replicas, every pool. Each pool it checked
    gets exactly one `Cause`: the first rule that rejected it for the engine
    that did not fit. A cluster that takes no new replicas (its access
    selector does not select the deployment's namespace, its spec.tenancy
    reserves that namespace or approves no priority class a template names,
    not Ready, or an untolerated NoSchedule/NoExecute taint) gives its cause
    to each of its pools, so the counts always add up to the pools checked.

    A `Diagnosis` is that attempt as data: the per-pool refusals, in the
    order they were checked. `summary()` is the one place it becomes text,
    the causes by count (most first, ties in `Cause` order), e.g.
    `240 pools checked, 180 too few free devices, 40 taint not tolerated,
    20 selector does not match`. A cluster whose access selector does not
    select the deployment's namespace also says how many clusters that is
    (`16 namespace not admitted (2 clusters)`), as do the two tenancy causes
    (`TENANCY_CAUSES`), and a quota shortfall adds the quota, the used and
    the requested (capacity/quota.py).

Invariants
    - `sum(counts) == checked`: every pool checked has one cause.
    - The text names no pool: a deployment over thousands of pools still
      reads as one line. The refusals keep the pools for logs and tests.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplane_common.capacity.quota import QuotaShortfall


class Cause(StrEnum):
    """What rejected a pool, in the order placement checks it."""

    # The cluster's spec.access.namespaceSelector does not select the deployment's namespace.
    NAMESPACE_NOT_ADMITTED = "namespace not admitted"
    # The cluster's spec.tenancy.reservedNamespaces names the deployment's namespace
    # (modelplane_common.workload_namespace): its replicas would never be admitted there.
    NAMESPACE_RESERVED = "namespace reserved"
    # A member's template names a priorityClassName the cluster's
    # spec.tenancy.priorityClassNames does not list (modelplane_common.pod_template).
    PRIORITY_CLASS_NOT_APPROVED = "priority class not approved"
    CLUSTER_NOT_READY = "cluster not Ready"
    TAINT_NOT_TOLERATED = "taint not tolerated"
    RECENTLY_FAILED = "failed recently"
    SELECTOR_MISMATCH = "selector does not match"
    # The devices the engine would claim from this pool would take the namespace
    # over its device quota (capacity/quota.py); checked before capacity, as a
    # quota is admission's first rule whatever the pools hold.
    QUOTA_EXCEEDED = "namespace quota exceeded"
    # The pool's free devices of some claimed kind, summed over all its nodes
    # (under DeviceCount: declared minus claimed), are fewer than the engine
    # claims in all.
    TOO_FEW_DEVICES = "too few free devices"
    # Enough devices in all, but not on enough nodes: a gang needs distinct
    # nodes, a pod needs one node holding all it claims, or whole-node
    # accounting rounds every claiming pod up to an empty node. Under
    # DeviceCount: a gang copy has more pods than the pool has nodes, or a
    # pod claims more than one node declares.
    TOO_FEW_NODES = "too few nodes with room"


_ORDER = {cause: i for i, cause in enumerate(Cause)}
# Causes a cluster gives to every pool for who the deployment is, not for its room: the
# summary also counts the clusters.
TENANCY_CAUSES = frozenset(
    {Cause.NAMESPACE_NOT_ADMITTED, Cause.NAMESPACE_RESERVED, Cause.PRIORITY_CLASS_NOT_APPROVED}
)


@dataclass(frozen=True, slots=True)
class PoolRefusal:
    cluster: str
    pool: str
    cause: Cause


@dataclass(frozen=True, slots=True)
class Diagnosis:
    refusals: tuple[PoolRefusal, ...]
    # The first quota shortfall met (a QUOTA_EXCEEDED refusal): the quota, the used, the requested.
    quota: QuotaShortfall | None = None

    def clusters_refusing(self, cause: Cause) -> int:
        """How many clusters gave `cause` to their pools."""
        return len({r.cluster for r in self.refusals if r.cause is cause})

    @property
    def checked(self) -> int:
        return len(self.refusals)

    def counts(self) -> list[tuple[Cause, int]]:
        """Causes by count, most first; ties in the order placement checks them."""
        counted = Counter(v.cause for v in self.refusals)
        return sorted(counted.items(), key=lambda item: (-item[1], _ORDER[item[0]]))

    def summary(self) -> str:
        if not self.refusals:
            return "no pool checked: no selected InferenceCluster has a pool"
        noun = "pool" if self.checked == 1 else "pools"
        parts = [f"{self.checked} {noun} checked"]
        parts.extend(self._part(cause, count) for cause, count in self.counts())
        text = ", ".join(parts)
        return f"{text}; {self.quota.message()}" if self.quota is not None else text

    def _part(self, cause: Cause, count: int) -> str:
        if cause in TENANCY_CAUSES:
            clusters = self.clusters_refusing(cause)
            return f"{count} {cause} ({clusters} cluster{'' if clusters == 1 else 's'})"
        return f"{count} {cause}"


NOTHING_CHECKED = Diagnosis(())
