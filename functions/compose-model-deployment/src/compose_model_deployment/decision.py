"""What one pass decides, as a value: plan the replicas, or keep every one as it is.

`decide` reads the deployment, its observed replicas and the fetched
required resources, and returns exactly one outcome. Each carries all the
shell writes (the desired composed resources, the deployment's status, the
report and the labels to require InferenceClusters by), so the shell only
translates it to the wire:

    Planned    the inputs could be trusted: `placement.plan` ran; the
               resources are its replicas and the workload Namespace on each
               cluster they run on (namespaces.py), the status its counts and
               memories, the report `report.of_plan`.
    Unplanned  the inputs cannot be trusted, so nothing is planned and every
               observed ModelReplica and Namespace Object is re-emitted
               unchanged, with the status
               the kept replicas imply and `report.kept_as_is`. The reasons,
               in the order they are checked:
                 InvalidDeployment  the deployment breaks its schema;
                 WaitingForInputs   Crossplane has not fetched the clusters,
                                    the replicas, the Namespace or its
                                    ResourceQuotas yet (or fetched only
                                    the footprint, and its plan does not
                                    settle: the fleet is required);
                 NoClusters         no InferenceCluster matches clusterSelector;
                 InvalidReplica     one of the deployment's own replicas is
                                    unreadable;
                 InvalidSelector    a CEL selector does not compile.

Bad or missing input never deletes running work: every path that cannot
trust its inputs ends in `Unplanned`. The labels to require
InferenceClusters by are None when the deployment cannot be read, so
nothing is required.

What a pass plans on follows from what Crossplane fetched (steady.py): the
fleet (every selected InferenceCluster and the ModelReplicas it must charge,
fleet_reads.py), or, for a
deployment that may be settled, its footprint (the clusters its replicas run
on, by name). A plan on the footprint is returned only when `steady.settles`
holds; otherwise the pass plans nothing (WaitingForInputs) and requires the
fleet, so Crossplane calls again with it. Outcomes carry `footprint` when
the footprint is what the shell requires next.

The tenant (tenancy.py: the Namespace and its ResourceQuotas) is read in one
place, `tenancy.read_tenant`, and required next to the fleet (`tenancy` on
both outcomes): its
labels decide which clusters admit the deployment, its quota how many
devices the namespace may claim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from google.protobuf import struct_pb2
from modelplane_common import inputs, logs, requeue
from modelplane_common.outcome import capped
from modelplane_common.requirements import ResourceRequirement

from compose_model_deployment import (
    absence,
    fleet_reads,
    in_flight,
    namespaces,
    placement,
    readers,
    report,
    steady,
    tenancy,
    writer,
)
from compose_model_deployment.model import DeploymentSpec, MissingCluster, OwnReplica, Tenant
from compose_model_deployment.placement import (
    Inputs,
    InvalidSelector,
    Matcher,
    Plan,
    failure_due,
)
from compose_model_deployment.readers import Observed, Reported

# The names under which the shell requires InferenceClusters and the pending ModelReplicas
# (fleet_reads.py names the rest).
CLUSTERS = "inference-clusters"
PENDING_REPLICAS = fleet_reads.PENDING_REPLICAS


@dataclass(frozen=True, slots=True)
class Fetched:
    """The required resources as fetched; None for a kind Crossplane has not fetched yet.

    Clusters are few and read as dicts; replicas can number thousands and
    stay protobuf Structs (readers.OtherReplicas reads them lazily).
    `replicas` is None until the pending ones are fetched (fleet_reads.py).
    """

    clusters: Iterable[Mapping] | None
    replicas: fleet_reads.Replicas | None
    # Whether the cluster list is empty, known without reading it.
    no_clusters: bool = False
    # The Namespace and its ResourceQuotas (tenancy.py).
    tenant: tenancy.TenantFetched = field(default_factory=tenancy.TenantFetched)
    # The footprint's clusters required by name (steady.py), by cluster name, as Structs
    # (steady.footprint_clusters reads them); an absent one fetched as no item. None when
    # no footprint cluster was fetched.
    footprint: Mapping[str, Sequence[struct_pb2.Struct]] | None = None

    @property
    def fleet(self) -> bool:
        """Whether Crossplane fetched (part of) the fleet: the pass plans on it."""
        return self.clusters is not None or self.replicas is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Unplanned:
    """Nothing planned: every observed replica is written back exactly as it is, and why."""

    resources: Mapping[str, dict]  # composition name -> desired resource
    status: dict
    said: report.Report
    why: report.NothingPlanned
    cluster_labels: Mapping[str, str] | None
    requeue_after: timedelta  # nothing moves while nothing is planned: SETTLED, unless
    # the deployment's watch circuit is open (modelplane_common.requeue)
    tenancy: tuple[ResourceRequirement, ...] = ()
    # The clusters to require by name instead of the fleet (steady.py); None: the fleet.
    footprint: tuple[str, ...] | None = None
    # With the fleet: which replicas to require besides the pending ones (fleet_reads.py).
    reads: fleet_reads.Reads = field(default_factory=fleet_reads.Reads)


@dataclass(frozen=True, slots=True, kw_only=True)
class Planned:
    """A plan, and everything the shell writes for it."""

    resources: Mapping[str, dict]  # composition name -> desired resource
    status: dict
    said: report.Report
    plan: Plan
    missing: tuple[MissingCluster, ...]  # the missing clusters remembered after it
    notes: tuple[str, ...]  # input problems, in reading order
    cluster_labels: Mapping[str, str]
    requeue_after: timedelta  # _requeue_after
    tenancy: tuple[ResourceRequirement, ...] = ()
    # The clusters to require by name instead of the fleet (steady.py); None: the fleet.
    footprint: tuple[str, ...] | None = None
    # With the fleet: which replicas to require besides the pending ones (fleet_reads.py).
    reads: fleet_reads.Reads = field(default_factory=fleet_reads.Reads)


Outcome = Unplanned | Planned


def _unplanned(
    why: report.NothingPlanned,
    own: Mapping[str, Observed],
    reported: Reported,
    observed_namespaces: Mapping[str, Mapping],
    cluster_labels: Mapping[str, str] | None = None,
    namespace: str | None = None,
) -> Unplanned:
    ready = sum(1 for observed in own.values() if readers.replica_ready(observed.obj))
    return Unplanned(
        resources={**writer.all_unchanged(own), **namespaces.kept(observed_namespaces)},
        status=writer.kept_status(reported.memories, why.desired, len(own), ready),
        said=report.kept_as_is(why, kept=len(own), kept_ready=ready, was_ready=reported.was_ready),
        why=why,
        cluster_labels=cluster_labels,
        # What it waits for (a cluster, a fetched input) shows only in required resources.
        requeue_after=requeue.after(dropping_events=reported.dropping_events, waiting=True),
        tenancy=tenancy.requirements(namespace) if namespace is not None else (),
    )


def _requeue_after(
    plan: Plan,
    missing: Iterable[MissingCluster],
    own: Iterable[OwnReplica],
    spec: DeploymentSpec,
    reported: Reported,
    now: datetime,
) -> timedelta:
    """When to look again (modelplane_common.requeue): CONVERGING while the watch circuit
    may drop events; WAITING while a placed replica is not Ready yet, replicas were just
    removed or healed (their events bring the rest), or a replica waits for capacity,
    which reaches the deployment only through required resources; never later than the
    first failure memory to expire, missing cluster's grace to run out or replica's
    failure to fall due (an Unschedulable replica's grace: no event marks that instant,
    and the healed replica's placed-at is dated from it, placement_time.py), capped."""
    waiting = (
        plan.ready < plan.scheduled or bool(plan.removed) or bool(plan.healed) or plan.missing > 0
    )
    deadlines = (
        *(f.expires_at for f in plan.failed_placements),
        *(m.since + spec.missing_cluster_grace for m in missing),
        *(due for replica in own if (due := failure_due(replica, spec)) is not None),
    )
    return requeue.after(
        dropping_events=reported.dropping_events,
        waiting=waiting,
        deadlines=[requeue.until(d, now) for d in deadlines],
    )


def _cannot_plan(desired: int | None, reason: str, message: str) -> report.NothingPlanned:
    """An input a person has to fix: ReplicasScheduled False and a Warning event."""
    return report.NothingPlanned(
        desired=desired, status="False", reason=reason, message=capped(message), needs_action=True
    )


def _unfetched(fetched: Fetched) -> list[str]:
    return [
        name
        for name, items in ((CLUSTERS, fetched.clusters), (PENDING_REPLICAS, fetched.replicas))
        if items is None
    ] + fetched.tenant.unfetched()


def _waiting(spec_replicas: int, names: Sequence[str]) -> report.NothingPlanned:
    """Crossplane has not fetched these required resources yet."""
    return report.NothingPlanned(
        desired=spec_replicas,
        status="Unknown",
        reason="WaitingForInputs",
        message=capped(f"waiting for Crossplane to fetch {', '.join(names)}"),
        needs_action=False,
    )


def _not_ready_to_plan(
    spec_replicas: int, fetched: Fetched, labels: Mapping
) -> report.NothingPlanned | None:
    """Why the fetched resources cannot be planned on yet, or None when they can."""
    missing = _unfetched(fetched)
    if missing:
        return _waiting(spec_replicas, missing)
    if fetched.no_clusters:
        return _cannot_plan(
            spec_replicas,
            "NoClusters",
            f"no InferenceCluster matches clusterSelector {labels}; "
            "existing replicas are kept as they are",
        )
    return None


@dataclass(frozen=True, slots=True)
class Composed:
    """The deployment's observed composed resources, by composition resource name."""

    replicas: Mapping[str, Observed]  # its ModelReplicas (readers.RESOURCE_PREFIX)
    namespaces: Mapping[str, Mapping] = field(default_factory=dict)  # namespaces.PREFIX


def decide(
    xr: Mapping,
    composed: Composed,
    fetched: Fetched,
    now: datetime,
    matcher: Matcher,
    laps: logs.Laps | None = None,
) -> Outcome:
    """One pass's decision. Raises InvalidInput only when the composite is not an object
    with metadata and spec (guard.py turns that into a Fatal result).

    Which inputs it plans on, and which it requires next, follow from what is
    fetched (steady.py): the fleet, the footprint, or nothing yet."""
    laps = laps or logs.Laps()
    own, observed_namespaces = composed.replicas, composed.namespaces
    inputs.mapping(xr.get("metadata"), "metadata")
    inputs.mapping(xr.get("spec"), "spec")
    reported = readers.read_reported(xr, now)
    try:
        deployment = readers.read_deployment(xr)
    except ValueError as err:
        why = _cannot_plan(readers.replica_count(xr), "InvalidDeployment", str(err))
        return _unplanned(why, own, reported, observed_namespaces)
    this = _Pass(xr, deployment, own, reported, now, matcher, laps, observed_namespaces)
    if fetched.fleet:
        return _back_to_footprint(this, _decide(this, fetched))
    footprint = steady.footprint(deployment.spec, own)
    if footprint is None:
        return _decide(this, fetched)
    if fetched.footprint is None:
        names = [steady.requirement_name(c) for c in footprint]
        waiting = _waiting(deployment.spec.replicas, [*names, *fetched.tenant.unfetched()])
        return replace(this.unplanned(waiting), footprint=tuple(footprint))
    return _decide_steady(this, fetched, footprint)


def _back_to_footprint(this: _Pass, outcome: Outcome) -> Outcome:
    """A fleet pass whose plan settles requires the footprint next, not the fleet.

    Its plan never consulted the rest of the fleet (steady.settles), so the
    footprint plans it the same and the next call or reconcile reads only
    that. Without this, a deployment once on the fleet stays there under
    Crossplane v2.4, which seeds every reconcile with the last one's
    requirements and keeps them in each call (design/reconcile.md, "Crossplane
    v2.4"): it would plan on, and be woken by, every pending replica of the
    fleet for as long as it runs. Under v2.3.4 it costs one call after a fleet
    pass that settles.

    Not after a pass that removes replicas: the footprint is read from the own
    replicas, the removed ones included until they are gone, and a removed
    replica's cluster may be gone too (nothing to plan on there); the reconcile
    after, without them, returns to the footprint."""
    if not isinstance(outcome, Planned) or outcome.plan.removed:
        return outcome
    if not steady.settles(outcome.plan, outcome.missing):
        return outcome
    footprint = steady.footprint(this.deployment.spec, this.own)
    if footprint is None:
        return outcome
    return replace(outcome, footprint=tuple(footprint))


@dataclass(frozen=True, slots=True)
class _Pass:
    """What every stage of one pass reads besides the fetched resources."""

    xr: Mapping
    deployment: readers.DeploymentInput
    own: Mapping[str, Observed]
    reported: Reported
    now: datetime
    matcher: Matcher
    laps: logs.Laps
    namespaces: Mapping[str, Mapping]  # the observed Namespace Objects (namespaces.py)

    def unplanned(self, why: report.NothingPlanned) -> Unplanned:
        """Nothing planned for a readable deployment: its fleet and tenant are required."""
        labels, namespace = self.deployment.cluster_labels, self.deployment.spec.namespace
        return _unplanned(why, self.own, self.reported, self.namespaces, labels, namespace)


def _decide_steady(
    this: _Pass, fetched: Fetched, footprint: Mapping[str, frozenset[str]]
) -> Outcome:
    """The footprint fetched: its plan when it settles (the footprint required again, so
    Crossplane stops); else nothing planned and the fleet required for a third call."""
    assert fetched.footprint is not None
    if set(fetched.footprint) == set(footprint):
        clusters = steady.footprint_clusters(
            fetched.footprint, this.deployment.cluster_labels, footprint
        )
        on_footprint = Fetched(
            clusters=clusters,
            replicas=fleet_reads.Replicas(),
            no_clusters=not clusters,
            tenant=fetched.tenant,
        )
        outcome = _decide(this, on_footprint, reads_fleet=False)
        if isinstance(outcome, Planned) and steady.settles(outcome.plan, outcome.missing):
            return replace(outcome, footprint=tuple(footprint))
    return this.unplanned(_waiting(this.deployment.spec.replicas, [CLUSTERS, PENDING_REPLICAS]))


def _decide(this: _Pass, fetched: Fetched, reads_fleet: bool = True) -> Outcome:
    """Plan on what is fetched (the fleet, or the footprint standing in for it, which
    reads no other replica: `reads_fleet` False)."""
    deployment, reported = this.deployment, this.reported
    labels = deployment.cluster_labels
    namespace = deployment.spec.namespace
    waiting = _not_ready_to_plan(deployment.spec.replicas, fetched, labels)
    if waiting is not None:
        return this.unplanned(waiting)
    assert fetched.clusters is not None and fetched.replicas is not None
    tenant, tenant_notes = tenancy.read_tenant(namespace, fetched.tenant)
    cluster_objects = list(fetched.clusters)
    clusters_read = readers.read_clusters(cluster_objects)
    quota_namespace = namespace if tenant.quota.limited else None
    reads = fleet_reads.Reads()
    if reads_fleet:
        reads = fleet_reads.Reads(
            whole=fleet_reads.whole_clusters(clusters_read[0], this.now), namespace=quota_namespace
        )
    unfetched = fetched.replicas.unfetched(reads)
    if unfetched:
        return replace(this.unplanned(_waiting(deployment.spec.replicas, unfetched)), reads=reads)
    try:
        read = readers.read_inputs(
            this.xr,
            deployment.spec,
            clusters_read,
            this.own,
            fetched.replicas,
            quota_namespace=quota_namespace,
        )
    except readers.InvalidOwnReplica as err:
        message = f"{err}; every replica is kept as it is"
        why = _cannot_plan(deployment.spec.replicas, "InvalidReplica", message)
        return replace(this.unplanned(why), reads=reads)
    tenant = replace(tenant, used=read.others.namespace_claims())
    bound = in_flight.room(fetched.replicas.pending, namespace)
    desired = in_flight.desired_now(deployment.spec.replicas, len(read.own), bound)
    bounded = (bound.why,) if desired < deployment.spec.replicas and bound.why else ()
    spec = replace(deployment.spec, replicas=desired)
    try:
        plan, missing = _schedule(spec, read, tenant, this.now, this.matcher, this.laps)
    except InvalidSelector as err:
        why = _cannot_plan(deployment.spec.replicas, "InvalidSelector", str(err))
        return replace(this.unplanned(why), reads=reads)
    notes = (*deployment.notes, *read.notes, *tenant_notes, *bounded, *plan.others_notes)
    return Planned(
        resources=_planned_resources(this, plan, cluster_objects, clusters_read),
        status=writer.status(plan, missing),
        said=report.of_plan(
            plan, previous_scheduled=reported.scheduled, was_ready=reported.was_ready, notes=notes
        ),
        plan=plan,
        missing=missing,
        notes=notes,
        cluster_labels=labels,
        requeue_after=_requeue_after(plan, missing, read.own, deployment.spec, reported, this.now),
        tenancy=tenancy.requirements(namespace),
        reads=reads,
    )


def _planned_resources(
    this: _Pass, plan: Plan, cluster_objects: Iterable[Mapping], read: readers.ReadClusters
) -> dict[str, dict]:
    """The replicas the plan writes, and the Namespace on each cluster they run on."""
    spec = this.deployment.spec
    workload_namespaces = namespaces.compose(
        deployment=spec.name,
        namespace=spec.namespace,
        in_use=(r.cluster for r in plan.replicas),
        sites=namespaces.read_sites(cluster_objects, (c.name for c in read[0])),
        observed=this.namespaces,
    )
    return {**writer.planned_resources(this.deployment, plan, this.own), **workload_namespaces}


def _schedule(
    spec: DeploymentSpec,
    read: readers.PlanningInputs,
    tenant: Tenant,
    now: datetime,
    matcher: Matcher,
    laps: logs.Laps,
) -> tuple[Plan, tuple[MissingCluster, ...]]:
    """Judge absence, then plan: the plan, and the missing clusters to remember after
    it. Raises InvalidSelector."""
    absences = absence.judge(
        (r.cluster for r in read.own),
        (c.name for c in read.clusters),
        read.unreadable,
        read.remembered,
        now,
        spec.missing_cluster_grace,
    )
    laps.lap("read")
    plan = placement.plan(
        Inputs(
            deployment=spec,
            clusters=read.clusters,
            own=read.own,
            failed=read.failed,
            now=now,
            held=absences.held,
            others=read.others,
            tenant=tenant,
            missing_since={m.name: m.since for m in absences.missing},
        ),
        matcher,
    )
    laps.lap("schedule")
    return plan, absence.still_remembered(absences.missing, (r.cluster for r in plan.replicas))
