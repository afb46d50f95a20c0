"""The typed inputs of compose-model-replica's core, read once from the request.

readers.py builds them from the wire; core.py decides on them and never
sees a Struct, a raw wire dict it has to interpret, or the clock. One value
per input:

    ReplicaInput    the ModelReplica XR: its identity, its parsed spec
                    (spec.py), what its previous status says (PodsScheduled
                    and the admission record) and its placement, and itself
                    as its fellow replicas read it (a `Queued`);
    ClusterInput    the required InferenceCluster: not fetched yet, fetched
                    and absent, invalid against its XRD, or found (`Found`,
                    its facts read through `capacity.readers.read_cluster`);
    fellows         the cluster's ModelReplicas as admission queues them, or
                    None while Crossplane has not fetched them; all of them, or
                    (pending_fellows) only those whose charge label is pending;
    deployment      the replica's ModelDeployment, required while a member names
                    its template by digest: not fetched yet, fetched and absent,
                    or its members' templates (`DeploymentTemplates`, raw: the
                    digest decides which of them may be used, templates.py);
    observed        the composed Objects as the control plane last saw them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from modelplane_common.capacity.admission import Queued, Record
from modelplane_common.capacity.fleet import Cluster, PlacedEngine
from modelplane_common.capacity.quota import DeviceQuota
from modelplane_common.cluster_tenancy import OPEN, ClusterTenancy
from modelplane_common.composed import ObservedObject

from compose_model_replica.pods_scheduled import Previous
from compose_model_replica.spec import ParsedSpec


@dataclass(frozen=True, slots=True)
class ReplicaInput:
    """The ModelReplica XR as the core reads it."""

    name: str
    namespace: str
    spec: ParsedSpec
    previous_pods: Previous  # what status said about PodsScheduled last time
    previous_missing_since: datetime | None  # status.pods.missingSince (pods_created.py)
    previous_admission: Record | None  # status.admission, when readable
    placement: str  # the raw modelplane.ai/placed-at annotation, "" when none
    placement_problem: str | None  # why that annotation cannot be read
    placement_replaced: str | None  # why it is queued at its creationTimestamp instead
    cluster_label_problem: str | None  # its cluster label is not spec.clusterName
    queued: Queued  # this replica, as its fellow replicas read it
    # Its spec's engines as capacity and quota count them (what a verdict charges).
    shape: tuple[PlacedEngine, ...] = ()
    dropping_events: bool = False  # Crossplane may be dropping its events (requeue.dropping_events)
    # Its ModelDeployment's name, from its labels, when they name one in its own
    # namespace ("" otherwise), and why they do not, when a template is named by digest.
    deployment: str = ""
    deployment_problem: str | None = None
    # Composed from a ModelDeployment that no longer owns it (modelplane_common.orphans).
    orphaned: bool = False

    @property
    def verdict_recorded(self) -> bool:
        """Whether status.admission holds the verdict for the current placement and a
        shape that covers the spec's (sticky)."""
        previous = self.previous_admission
        return previous is not None and previous.binds(self.placement, self.shape)


@dataclass(frozen=True, slots=True)
class NotFetched:
    """Crossplane has not fetched the required InferenceCluster (or ModelDeployment) yet."""


@dataclass(frozen=True, slots=True)
class Absent:
    """Fetched: no InferenceCluster (or ModelDeployment) has that name."""


@dataclass(frozen=True, slots=True)
class Invalid:
    """Fetched, but its spec breaks the XRD's schema (an unknown observation.mode too)."""

    defects: str  # one `field.path: reason (got value)` per defect, joined by "; "


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What the replica reads of a found InferenceCluster whose spec is valid."""

    fleet: Cluster | None  # its pools as admission counts them; None: it has no name
    pools: frozenset[str]  # spec.nodePools[].name
    mode: str  # spec.observation.mode
    max_age: timedelta  # spec.observation.maxAge, or the default
    max_age_problem: str | None  # why the default replaced a malformed maxAge
    provider_config: str  # status.providerConfigRef.name; "" until published
    agent_present: bool  # status.agent.present
    # Until when the cluster vouches that every replica report on it is current
    # (modelplane_common.currency.replicas_current_until); None: it does not.
    replicas_current_until: datetime | None = None
    # spec.tenancy: the PriorityClasses templates may name, the namespaces no replica may use.
    tenancy: ClusterTenancy = OPEN


@dataclass(frozen=True, slots=True)
class Found:
    facts: ClusterFacts


ClusterInput = NotFetched | Absent | Invalid | Found


@dataclass(frozen=True, slots=True)
class DeploymentTemplates:
    """The fetched ModelDeployment's member templates by (engine name, member position),
    as the tenant last wrote them: each is used only when its digest is the replica's."""

    templates: Mapping[tuple[str, int], Mapping]


DeploymentInput = NotFetched | Absent | DeploymentTemplates


@dataclass(frozen=True, slots=True)
class Inputs:
    """Everything one pass decides on."""

    replica: ReplicaInput
    cluster: ClusterInput
    fellows: tuple[Queued, ...] | None  # the cluster's ModelReplicas; None: not fetched
    observed: Mapping[str, ObservedObject]
    now: datetime
    # The namespace's device quota (quota_gate.py); None: its ResourceQuotas are not fetched.
    quota: DeviceQuota | None = None
    # The namespace's ModelReplicas, fleet-wide; None: not fetched (needed only under a quota).
    namespace_replicas: tuple[Queued, ...] | None = None
    # The cluster's ModelReplicas whose charge is pending (capacity/charge_label.py), the
    # set admission reads while every pool is freshly observed; None: not fetched.
    pending_fellows: tuple[Queued, ...] | None = None
    # The replica's ModelDeployment (its templates); not fetched while not required.
    deployment: DeploymentInput = NotFetched()
