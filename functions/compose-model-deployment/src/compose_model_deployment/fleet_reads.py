"""Which of the fleet's ModelReplicas a placing pass reads.

A pass that places (the fleet pass; steady.py says when) charges every
other replica its pools' histograms do not contain yet (rule 1 of
design/api.md section 6), and on a pool without a fresh observation every
replica pinned to it (rule 2). Every deployment labels its replicas with
whether that charge is still pending (`modelplane.ai/charge`,
modelplane_common.capacity.charge_label), so the pass requires:

    pending-replicas       the ModelReplicas labelled `charge=pending`, fleet-wide
                           (PENDING_REPLICAS): what the fresh pools must charge;
    replicas-on-<cluster>  every ModelReplica of a selected cluster that has a
                           pool without a fresh observation (label
                           modelplane.ai/cluster; `whole_clusters`), known once the
                           clusters are read: such a pool charges them all;
    namespace-replicas     every ModelReplica of the deployment's namespace while
                           its ResourceQuota limits a DeviceClass (NAMESPACE_REPLICAS),
                           known once the quotas are read: the quota counts every
                           device the namespace holds, counted or not.

A pass plans only once each of them it needs is fetched; until then it
plans nothing (WaitingForInputs) and requires what it knows it needs, so
Crossplane calls again. The readers take each cluster's replicas from its
whole set when it has one, else from the pending set, so a replica in both
is charged once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from google.protobuf import struct_pb2
from modelplane_common.capacity.charge_label import reads_pending_only
from modelplane_common.capacity.fleet import Cluster

# The names under which the shell requires the selected InferenceClusters and the pending
# ModelReplicas.
CLUSTERS = "inference-clusters"
PENDING_REPLICAS = "pending-replicas"
WHOLE_PREFIX = "replicas-on-"
NAMESPACE_REPLICAS = "namespace-replicas"


def whole_requirement(cluster: str) -> str:
    return WHOLE_PREFIX + cluster


def whole_clusters(clusters: Iterable[Cluster], now: datetime) -> tuple[str, ...]:
    """The clusters whose every replica must be read: a pool of them has no fresh
    observation, so it charges all the replicas pinned to it."""
    return tuple(sorted(c.name for c in clusters if not reads_pending_only(c, now)))


@dataclass(frozen=True, slots=True)
class Reads:
    """What a placing pass requires besides the clusters and the pending replicas."""

    whole: tuple[str, ...] = ()  # clusters read whole
    namespace: str | None = None  # the namespace whose replicas are read, under a quota


@dataclass(frozen=True, slots=True)
class Replicas:
    """The fleet's ModelReplicas as fetched, as protobuf Structs (read lazily)."""

    pending: Sequence[struct_pb2.Struct] = ()
    whole: Mapping[str, Sequence[struct_pb2.Struct]] = field(default_factory=dict)
    namespace: Sequence[struct_pb2.Struct] | None = None  # None: not fetched
