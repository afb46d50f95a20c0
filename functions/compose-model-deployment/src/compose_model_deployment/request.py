"""The request read once: every input of one pass as typed values.

`readers.read_request` builds a `Request` from the RunFunctionRequest: the
deployment, what its status remembers, its own composed replicas and
Namespace Objects, and whichever required resources Crossplane fetched in
this round (the fleet, or the footprint standing in for it: steady.py; the
tenant: tenancy.py). The phases of `decision.plan` read only these values.

One reading is lazy by design: the fleet's other replicas (`View.others`)
stay protobuf Structs until placement first looks a cluster up
(readers.OtherReplicas), since reading 8,000 of them whole would cost more
than the rest of the pass. They are read by the reader, never by a phase.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from modelplane_common.capacity.fleet import Cluster

from compose_model_deployment import fleet_reads
from compose_model_deployment.in_flight import Room
from compose_model_deployment.model import (
    DeploymentInput,
    FailedPlacement,
    MissingCluster,
    OwnReplica,
    Reported,
    Tenant,
)
from compose_model_deployment.namespaces import Site
from compose_model_deployment.placement import OthersOnCluster


@dataclass(frozen=True, slots=True)
class InvalidDeployment:
    """A deployment that breaks its schema: why, and spec.replicas when readable alone."""

    message: str
    replicas: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Own:
    """The deployment's own composed ModelReplicas."""

    observed: Mapping[str, dict]  # by composition resource name, as observed
    ready: int  # how many of them are Ready (readers.replica_ready)
    replicas: tuple[OwnReplica, ...] = ()  # read against the deployment's spec
    notes: tuple[str, ...] = ()
    invalid: str | None = None  # why one cannot be read: nothing may be planned


@dataclass(frozen=True, slots=True, kw_only=True)
class View:
    """The clusters and the fleet's other replicas one plan is made on: the fleet, or the
    footprint standing in for it (`reads_fleet` False: no other replica is read)."""

    clusters: tuple[Cluster, ...]  # the selected clusters whose spec could be read
    unreadable: Mapping[str, str]  # InferenceCluster name -> why it cannot be read
    notes: tuple[str, ...]  # what reading the clusters noted
    sites: Mapping[str, Site]  # the readable clusters, as the Namespace Objects read them
    no_clusters: bool  # no InferenceCluster is selected
    others: Mapping[str, OthersOnCluster] = field(default_factory=dict)
    claims: Counter[str] = field(default_factory=Counter)  # the namespace's other replicas'
    room: Room = field(default_factory=lambda: Room(None))  # in_flight.room
    whole: frozenset[str] = frozenset()  # clusters whose every replica was fetched
    namespace_fetched: bool = False  # every replica of the namespace was fetched
    reads_fleet: bool = True

    def unfetched(self, reads: fleet_reads.Reads) -> list[str]:
        """The requirement names `reads` needs that are not fetched yet."""
        missing = [fleet_reads.whole_requirement(c) for c in reads.whole if c not in self.whole]
        if reads.namespace is not None and not self.namespace_fetched:
            missing.append(fleet_reads.NAMESPACE_REPLICAS)
        return missing


@dataclass(frozen=True, slots=True, kw_only=True)
class Fleet:
    """What Crossplane fetched of the fleet: the view once the clusters and the pending
    replicas both are, else the names it still waits for."""

    unfetched: tuple[str, ...] = ()
    view: View | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Footprint:
    """The footprint's clusters required by name (steady.py) as fetched."""

    names: frozenset[str]  # the clusters fetched (an absent one fetched as no item)
    view: View | None  # None unless they are exactly the footprint's


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One pass's inputs. Only `reported`, `own.observed` and `namespaces` are read for an
    invalid deployment: nothing else can be read without its spec."""

    now: datetime
    reported: Reported
    deployment: DeploymentInput | InvalidDeployment
    own: Own
    namespaces: Mapping[str, dict] = field(default_factory=dict)  # namespaces.PREFIX
    failed: tuple[FailedPlacement, ...] = ()  # status.failedPlacements
    remembered: tuple[MissingCluster, ...] = ()  # status.missingClusters
    memory_notes: tuple[str, ...] = ()  # what reading the two memories noted
    tenant: Tenant | None = None  # None until its Namespace and quotas are fetched
    tenant_notes: tuple[str, ...] = ()
    tenant_unfetched: tuple[str, ...] = ()
    # The clusters the replicas run on, with the pools they use, when the deployment may be
    # steady (steady.footprint); the footprint's clusters are read with those pools only.
    footprint: Mapping[str, frozenset[str]] | None = None
    fleet: Fleet | None = None  # None: nothing of the fleet fetched
    fetched_footprint: Footprint | None = None  # None: no footprint cluster fetched
