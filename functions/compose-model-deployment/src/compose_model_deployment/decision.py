"""What one pass decides, as a value: plan the replicas, or keep every one as it is.

`decide` reads the deployment, its observed replicas and the fetched
required resources, and returns exactly one outcome:

    Planned  the inputs could be trusted: `placement.plan` ran, and its plan,
             the input problems noted on the way and the clusters judged
             absent are what the shell writes.
    Kept     the inputs cannot be trusted, so nothing is planned and every
             observed ModelReplica is re-emitted unchanged. The reasons, in
             the order they are checked:
               InvalidDeployment  the deployment breaks its schema;
               WaitingForInputs   Crossplane has not fetched the clusters or
                                  the replicas yet;
               NoClusters         no InferenceCluster matches clusterSelector;
               InvalidReplica     one of the deployment's own replicas is
                                  unreadable;
               InvalidSelector    a CEL selector does not compile.

Bad or missing input never deletes running work: every path that cannot
trust its inputs ends in `Kept`. Both outcomes carry the labels the shell
must require InferenceClusters by (None when the deployment cannot be read,
so nothing is required).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from google.protobuf import struct_pb2
from modelplane_common import inputs, logs

from compose_model_deployment import absence, placement, readers
from compose_model_deployment.placement import Inputs, InvalidSelector, Matcher, Plan

# The names under which the shell requires InferenceClusters and ModelReplicas.
CLUSTERS = "inference-clusters"
REPLICAS = "model-replicas"
_MAX_MESSAGE = 1024


@dataclass(frozen=True, slots=True)
class Fetched:
    """The required resources as fetched; None for a kind Crossplane has not fetched yet.

    Clusters are few and read as dicts; replicas can number thousands and
    stay protobuf Structs (readers.ReplicaIndex reads them lazily).
    """

    clusters: Iterable[Mapping] | None
    replicas: Iterable[struct_pb2.Struct] | None
    # Whether the cluster list is empty, known without reading it.
    no_clusters: bool = False


@dataclass(frozen=True, slots=True)
class Kept:
    """Nothing planned: every observed replica is kept exactly as it is, and this is why."""

    desired: int | None  # spec.replicas when readable
    status: str  # ReplicasScheduled's status
    reason: str
    message: str
    warn: bool  # whether a person has to act (a Warning event)
    cluster_labels: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Planned:
    deployment: readers.DeploymentInput
    plan: Plan
    notes: tuple[str, ...]  # input problems, in reading order
    absences: absence.Absences

    @property
    def cluster_labels(self) -> Mapping[str, str]:
        return self.deployment.cluster_labels


Outcome = Kept | Planned


def _count(raw: object) -> int | None:
    """spec.replicas when it is a readable count (bool is an int to Python, not to us)."""
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else None


def decide(
    xr: Mapping,
    own_observed: Mapping[str, Mapping],
    fetched: Fetched,
    now: datetime,
    matcher: Matcher,
    laps: logs.Laps | None = None,
) -> Outcome:
    """One pass's decision. Raises InvalidInput only when the composite is not an object
    with metadata and spec (guard.py turns that into a Fatal result)."""
    laps = laps or logs.Laps()
    inputs.mapping(xr.get("metadata"), "metadata")
    raw_replicas = inputs.mapping(xr.get("spec"), "spec").get("replicas")
    try:
        deployment = readers.read_deployment(xr)
    except ValueError as err:
        return Kept(
            _count(raw_replicas), "False", "InvalidDeployment", str(err)[:_MAX_MESSAGE], True
        )
    spec = deployment.spec
    labels = deployment.cluster_labels

    if fetched.clusters is None or fetched.replicas is None:
        missing = [
            name
            for name, items in ((CLUSTERS, fetched.clusters), (REPLICAS, fetched.replicas))
            if items is None
        ]
        return Kept(
            spec.replicas,
            "Unknown",
            "WaitingForInputs",
            f"waiting for Crossplane to fetch {', '.join(missing)}",
            False,
            labels,
        )
    if fetched.no_clusters:
        return Kept(
            spec.replicas,
            "False",
            "NoClusters",
            f"no InferenceCluster matches clusterSelector {labels}; "
            "existing replicas are kept as they are",
            True,
            labels,
        )

    try:
        read = readers.read_inputs(xr, spec, fetched.clusters, own_observed, fetched.replicas)
    except readers.InvalidOwnReplica as err:
        return Kept(
            spec.replicas,
            "False",
            "InvalidReplica",
            f"{err}; every replica is kept as it is"[:_MAX_MESSAGE],
            True,
            labels,
        )
    absences = absence.judge(
        (r.cluster for r in read.own),
        (c.name for c in read.clusters),
        read.unreadable,
        read.remembered,
        now,
        spec.missing_cluster_grace,
    )
    laps.lap("read")

    try:
        plan = placement.plan(
            Inputs(spec, read.clusters, read.own, read.failed, now, absences.held),
            read.index.charges_for,
            matcher,
        )
    except InvalidSelector as err:
        return Kept(
            spec.replicas, "False", "InvalidSelector", str(err)[:_MAX_MESSAGE], True, labels
        )
    laps.lap("schedule")
    # The index notes what it read lazily, while placement asked for capacity.
    return Planned(deployment, plan, (*read.notes, *read.index.notes), absences)
