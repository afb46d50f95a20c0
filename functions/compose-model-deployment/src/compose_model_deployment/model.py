"""Domain types of the deployment scheduler: what a deployment asks for and remembers.

The fleet (pools, clusters, placed engines, charges) lives in
`modelplane_common.capacity.fleet`, shared with admission on the replica
side; this module holds what only the scheduler reads: the deployment's
shape (engines of members, each member's device requests as still
unresolved CEL selectors), its own replicas and its memories (failed
placements, missing clusters). The readers (readers.py) turn the wire into
these small frozen types; the pure core never sees a Struct, a dict from the
wire or the clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from modelplane_common import pods_created
from modelplane_common.capacity.fleet import PlacedEngine, PoolKey, Role, is_gang
from modelplane_common.capacity.quota import DeviceQuota
from modelplane_common.devices import DeviceRequest
from modelplane_common.timeutil import parse_duration
from modelplane_common.tolerations import Toleration
from modelplane_schemas.modeldeployment import ClusterSpreading, Healing


def healing_default(field: str) -> timedelta:
    """A `spec.healing` duration's default, as the generated model (from the XRD) has it."""
    return parse_duration(Healing.model_fields[field].default)


UNSCHEDULABLE_GRACE = healing_default("unschedulableGracePeriod")
AVOID_FOR = healing_default("avoidFor")
MISSING_CLUSTER_GRACE = healing_default("missingClusterGracePeriod")
MISSING_PODS_GRACE = healing_default("missingPodsGracePeriod")
# The maximum of each `spec.healing` duration (the XRD's rules say the same): the graces
# that keep a replica charged share the platform's cap; avoidFor holds nothing of
# others' (it only keeps this deployment off a pool), so its maximum only keeps the
# avoided-until times it writes readable.
LONGEST_HEALING = {
    "unschedulableGracePeriod": pods_created.LONGEST_GRACE,
    "missingClusterGracePeriod": pods_created.LONGEST_GRACE,
    "missingPodsGracePeriod": pods_created.LONGEST_GRACE,
    "avoidFor": timedelta(hours=24),
}


# --- what the deployment asks for -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberShape:
    role: Role
    requests: tuple[DeviceRequest, ...] = ()
    # Pods of this member in one copy: worker.nodes for a Worker, else 1.
    pods_per_copy: int = 1
    # The template's spec.priorityClassName as written (None: unset), judged per cluster
    # against its spec.tenancy.priorityClassNames (usable.py); any value, so not hashed.
    priority_class_name: object = field(default=None, hash=False)


@dataclass(frozen=True, slots=True)
class EngineShape:
    name: str
    copies: int
    members: tuple[MemberShape, ...]

    @property
    def is_gang(self) -> bool:
        return is_gang(m.role for m in self.members)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeploymentSpec:
    namespace: str
    name: str
    replicas: int
    engines: tuple[EngineShape, ...]
    tolerations: tuple[Toleration, ...] = ()
    unschedulable_grace: timedelta = UNSCHEDULABLE_GRACE
    avoid_for: timedelta = AVOID_FOR
    missing_cluster_grace: timedelta = MISSING_CLUSTER_GRACE
    missing_pods_grace: timedelta = MISSING_PODS_GRACE  # copied onto every replica
    # spec.clusterSpreading: whether rule "cluster order" spreads the replicas (placement.py).
    cluster_spreading: ClusterSpreading = ClusterSpreading.SPREAD

    def replica_name(self, index: int) -> str:
        return f"{self.name}-{index}"


# --- the tenant: who the deployment belongs to (design/tenancy.md, "Access and quotas") --------


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenant:
    """The deployment's namespace as access and quotas see it.

    `labels` are its Namespace's labels (InferenceCluster
    spec.access.namespaceSelector is matched against them; None when the
    Namespace cannot be read, and then only clusters that do not restrict
    access admit it); `quota` its device quota; `used` what the namespace's
    other replicas, fleet-wide and not Overcommitted, claim per DeviceClass.
    """

    labels: Mapping[str, str] | None = field(default_factory=dict)
    quota: DeviceQuota = field(default_factory=lambda: DeviceQuota(""))
    used: Counter[str] = field(default_factory=Counter)


# --- replicas that already exist ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaCondition:
    """One condition of a ModelReplica's status as read (Unknown when absent): its
    PodsScheduled, or its PodsCreated (modelplane_common.pods_created)."""

    status: str = "Unknown"
    reason: str = ""
    message: str = ""
    since: datetime | None = None  # lastTransitionTime


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnReplica:
    """One of this deployment's replicas, read from the observed composed resources."""

    index: int
    name: str
    cluster: str
    engines: tuple[PlacedEngine, ...]
    pods_scheduled: ReplicaCondition = ReplicaCondition()
    pods_created: ReplicaCondition = ReplicaCondition()
    scheduled_at: datetime | None = None
    ready: bool = False
    placed_at: datetime | None = None
    created_at: datetime | None = None  # metadata.creationTimestamp
    # Its admission for the current placement (modelplane_common.capacity.admission):
    # Admitted, Overcommitted, WaitingForAdmission, or None when nothing is said yet.
    admission: str | None = None
    admission_message: str = ""
    admission_at: datetime | None = None  # when the recorded verdict was reached

    @property
    def pools(self) -> tuple[str, ...]:
        return tuple(sorted({m.pool for e in self.engines for m in e.members}))


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedPlacement:
    cluster: str
    pool: str
    expires_at: datetime
    replica: str = ""
    reason: str = ""

    @property
    def key(self) -> PoolKey:
        return (self.cluster, self.pool)


@dataclass(frozen=True, slots=True)
class MissingCluster:
    """A cluster some replica runs on that is absent from the selected clusters, since when."""

    name: str
    since: datetime


# --- what the deployment asks for and last reported, as read -------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DeploymentInput:
    spec: DeploymentSpec
    cluster_labels: dict[str, str]
    template_labels: dict[str, str]
    # Raw engines and tolerations: every ModelReplica names each member's template by its
    # digest (writer.py) and carries the tolerations as they are.
    raw_engines: tuple[Mapping, ...]
    raw_tolerations: tuple[Mapping, ...]
    # Healing durations clamped to their maximum, one line each (LONGEST_HEALING).
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Reported:
    """What the deployment last reported about itself, read from its status."""

    was_ready: bool  # Crossplane last reported it Ready
    scheduled: object  # status.replicas.scheduled, any value: it is only compared
    memories: Mapping[str, list]  # readers.MEMORIES, as they are
    # Crossplane may be dropping its watch events (requeue.dropping_events).
    dropping_events: bool
