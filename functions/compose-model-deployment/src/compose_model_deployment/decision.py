"""What one pass decides, as a value: plan the replicas, or keep every one as it is.

`plan` takes the request read once (readers.read_request: request.py) and
returns exactly one outcome. Each carries all the shell writes (the desired
composed resources, the deployment's status, the report and the resources
to require next), so the shell only translates it to the wire:

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
                                    the footprint, and its plan is not
                                    steady: the fleet is required);
                 NoClusters         no InferenceCluster matches clusterSelector;
                 InvalidReplica     one of the deployment's own replicas is
                                    unreadable;
                 InvalidSelector    a CEL selector does not compile.

Phases (each a function below that returns what it decided; `plan` runs them in order)
    1. trust     the deployment read, or Unplanned (InvalidDeployment).
    2. view      what it plans on, from what is fetched (steady.py): the
                 fleet; else the footprint when the deployment may be steady
                 (required first, then planned on); else the fleet is required.
    3. ready     every input of the view fetched and a cluster selected
                 (WaitingForInputs, NoClusters).
    4. reads     the fleet's replicas a fleet pass must have read
                 (fleet_reads.Reads), fetched (WaitingForInputs).
    5. own       the deployment's own replicas readable (InvalidReplica).
    6. schedule  the new replicas bounded (in_flight.py), absence judged
                 (absence.py), `placement.plan` (InvalidSelector): a plan.
    7. outcome   built once from what phases 1-6 decided; a plan on the
                 footprint is kept only when it is steady, and a steady
                 fleet plan requires the footprint next (`footprint`).

Bad or missing input never deletes running work: every path that cannot
trust its inputs ends in `Unplanned`. The labels to require
InferenceClusters by are None when the deployment cannot be read, so
nothing is required.

What a pass plans on follows from what Crossplane fetched (steady.py): the
fleet (every selected InferenceCluster and the ModelReplicas it must charge,
fleet_reads.py), or, for a
deployment that may be steady, its footprint (the clusters its replicas run
on, by name). A plan on the footprint is returned only when `steady.is_steady`
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

from modelplane_common import logs, requeue
from modelplane_common.outcome import capped
from modelplane_common.requirements import ResourceRequirement

from compose_model_deployment import (
    absence,
    fleet_reads,
    in_flight,
    namespaces,
    placement,
    report,
    steady,
    tenancy,
    writer,
)
from compose_model_deployment.model import (
    DeploymentInput,
    DeploymentSpec,
    MissingCluster,
    OwnReplica,
    Reported,
)
from compose_model_deployment.placement import (
    Inputs,
    InvalidSelector,
    Matcher,
    Plan,
    failure_due,
)
from compose_model_deployment.request import Footprint, InvalidDeployment, Request, View

CLUSTERS = fleet_reads.CLUSTERS
PENDING_REPLICAS = fleet_reads.PENDING_REPLICAS


@dataclass(frozen=True, slots=True, kw_only=True)
class Unplanned:
    """Nothing planned: every observed replica is written back exactly as it is, and why."""

    resources: Mapping[str, dict]  # composition name -> desired resource
    status: dict
    said: report.Report
    why: report.NothingPlanned
    cluster_labels: Mapping[str, str] | None
    requeue_after: timedelta  # nothing moves while nothing is planned: AT_REST_CAP, unless
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


@dataclass(frozen=True, slots=True)
class _NotPlanned:
    """A phase's finding that nothing may be planned, and the replicas it found it needs."""

    why: report.NothingPlanned
    reads: fleet_reads.Reads = field(default_factory=fleet_reads.Reads)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Scheduled:
    """Phase 6's plan on one view, and what the outcome reports with it."""

    plan: Plan
    missing: tuple[MissingCluster, ...]  # the missing clusters remembered after it
    notes: tuple[str, ...]
    view: View
    reads: fleet_reads.Reads


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


def _waiting(spec_replicas: int, names: Sequence[str]) -> report.NothingPlanned:
    """Crossplane has not fetched these required resources yet."""
    return report.NothingPlanned(
        desired=spec_replicas,
        status="Unknown",
        reason="WaitingForInputs",
        message=capped(f"waiting for Crossplane to fetch {', '.join(names)}"),
        needs_action=False,
    )


def _unplanned(request: Request, why: report.NothingPlanned) -> Unplanned:
    """Every observed replica and Namespace Object kept as it is. A readable deployment's
    fleet and tenant are required; an unreadable one requires nothing."""
    own, reported = request.own, request.reported
    deployment = request.deployment if isinstance(request.deployment, DeploymentInput) else None
    return Unplanned(
        resources={**writer.all_unchanged(own.observed), **namespaces.kept(request.namespaces)},
        status=writer.kept_status(reported.memories, why.desired, len(own.observed), own.ready),
        said=report.kept_as_is(
            why, kept=len(own.observed), kept_ready=own.ready, was_ready=reported.was_ready
        ),
        why=why,
        cluster_labels=deployment.cluster_labels if deployment is not None else None,
        # What it waits for (a cluster, a fetched input) shows only in required resources.
        requeue_after=requeue.after(dropping_events=reported.dropping_events, waiting=True),
        tenancy=tenancy.requirements(deployment.spec.namespace) if deployment is not None else (),
    )


def plan(request: Request, matcher: Matcher, laps: logs.Laps | None = None) -> Outcome:
    """One pass's decision on the request read once (readers.read_request): the phases of
    the module docstring, in order."""
    laps = laps or logs.Laps()
    deployment = request.deployment
    if isinstance(deployment, InvalidDeployment):  # 1
        why = _cannot_plan(deployment.replicas, "InvalidDeployment", deployment.message)
        return _unplanned(request, why)
    this = _Pass(request, deployment, matcher, laps)
    if request.fleet is not None:  # 2: the fleet
        decided = _on_view(this, request.fleet.unfetched, request.fleet.view)
        return this.outcome(decided, footprint=_back_to_footprint(request, decided))
    if request.footprint is None:
        return this.outcome(_on_view(this, (CLUSTERS, PENDING_REPLICAS), None))
    return _on_footprint(this, request.footprint, request.fetched_footprint)


def _back_to_footprint(request: Request, decided: _Scheduled | _NotPlanned) -> Sequence[str] | None:
    """A fleet pass whose plan is steady requires the footprint next, not the fleet.

    Its plan never consulted the rest of the fleet (steady.is_steady), so the
    footprint plans it the same and the next call or reconcile reads only
    that. Without this, a deployment once on the fleet stays there under
    Crossplane v2.4, which seeds every reconcile with the last one's
    requirements and keeps them in each call (design/reconcile.md, "Crossplane
    v2.4"): it would plan on, and be woken by, every pending replica of the
    fleet for as long as it runs. Under v2.3.4 it costs one call after a steady fleet
    pass.

    Not after a pass that removes replicas: the footprint is read from the own
    replicas, the removed ones included until they are gone, and a removed
    replica's cluster may be gone too (nothing to plan on there); the reconcile
    after, without them, returns to the footprint."""
    if not isinstance(decided, _Scheduled) or decided.plan.removed:
        return None
    if not steady.is_steady(decided.plan, decided.missing) or request.footprint is None:
        return None
    return tuple(request.footprint)


def _on_footprint(
    this: _Pass, footprint: Mapping[str, frozenset[str]], fetched: Footprint | None
) -> Outcome:
    """2: the footprint. Not fetched yet: required. Fetched: its plan when it is steady (the
    footprint required again, so Crossplane stops); else nothing planned and the fleet
    required for a third call."""
    replicas = this.deployment.spec.replicas
    if fetched is None:
        names = [steady.requirement_name(c) for c in footprint]
        waiting = _waiting(replicas, [*names, *this.request.tenant_unfetched])
        return this.outcome(_NotPlanned(waiting), footprint=tuple(footprint))
    if fetched.view is not None:
        decided = _on_view(this, (), fetched.view)
        if isinstance(decided, _Scheduled) and steady.is_steady(decided.plan, decided.missing):
            return this.outcome(decided, footprint=tuple(footprint))
    return this.outcome(_NotPlanned(_waiting(replicas, [CLUSTERS, PENDING_REPLICAS])))


def _on_view(this: _Pass, unfetched: Sequence[str], view: View | None) -> _Scheduled | _NotPlanned:
    """Phases 3 to 6 on what is fetched: the fleet, or the footprint standing in for it."""
    ready = _ready_to_plan(this, unfetched, view)  # 3
    if isinstance(ready, _NotPlanned):
        return ready
    reads = _reads(this, ready)  # 4
    missing = ready.unfetched(reads)
    if missing:
        return _NotPlanned(_waiting(this.deployment.spec.replicas, missing), reads)
    own = this.request.own
    if own.invalid is not None:  # 5
        message = f"{own.invalid}; every replica is kept as it is"
        why = _cannot_plan(this.deployment.spec.replicas, "InvalidReplica", message)
        return _NotPlanned(why, reads)
    try:
        return _schedule(this, ready, reads)  # 6
    except InvalidSelector as err:
        why = _cannot_plan(this.deployment.spec.replicas, "InvalidSelector", str(err))
        return _NotPlanned(why, reads)


def _ready_to_plan(this: _Pass, unfetched: Sequence[str], view: View | None) -> View | _NotPlanned:
    """3: every input fetched and some cluster selected, or why not."""
    missing = [*unfetched, *this.request.tenant_unfetched]
    if missing or view is None:
        return _NotPlanned(_waiting(this.deployment.spec.replicas, missing))
    if view.no_clusters:
        return _NotPlanned(
            _cannot_plan(
                this.deployment.spec.replicas,
                "NoClusters",
                f"no InferenceCluster matches clusterSelector {this.deployment.cluster_labels}; "
                "existing replicas are kept as they are",
            )
        )
    return view


def _reads(this: _Pass, view: View) -> fleet_reads.Reads:
    """4: which of the fleet's replicas a fleet pass must have read (fleet_reads.py)."""
    if not view.reads_fleet:
        return fleet_reads.Reads()
    tenant = this.request.tenant
    limited = tenant is not None and tenant.quota.limited
    return fleet_reads.Reads(
        whole=fleet_reads.whole_clusters(view.clusters, this.request.now),
        namespace=this.deployment.spec.namespace if limited else None,
    )


def _schedule(this: _Pass, view: View, reads: fleet_reads.Reads) -> _Scheduled:
    """6: bound the new replicas (in_flight.py), judge absence, then plan. Raises
    InvalidSelector."""
    request, spec = this.request, this.deployment.spec
    own = request.own.replicas
    assert request.tenant is not None  # phase 3: fetched
    desired = in_flight.desired_now(spec.replicas, len(own), view.room)
    bounded = (view.room.why,) if desired < spec.replicas and view.room.why else ()
    absences = absence.judge(
        (r.cluster for r in own),
        (c.name for c in view.clusters),
        view.unreadable,
        request.remembered,
        request.now,
        spec.missing_cluster_grace,
    )
    this.laps.lap("read")
    planned = placement.plan(
        Inputs(
            deployment=replace(spec, replicas=desired),
            clusters=view.clusters,
            own=own,
            failed=request.failed,
            now=request.now,
            held=absences.held,
            others=view.others,
            tenant=replace(request.tenant, used=view.claims),
            missing_since={m.name: m.since for m in absences.missing},
        ),
        this.matcher,
    )
    this.laps.lap("schedule")
    notes = (
        *this.deployment.notes,
        *view.notes,
        *request.own.notes,
        *request.memory_notes,
        *request.tenant_notes,
        *bounded,
        *planned.others_notes,
    )
    return _Scheduled(
        plan=planned,
        missing=absence.still_remembered(absences.missing, (r.cluster for r in planned.replicas)),
        notes=notes,
        view=view,
        reads=reads,
    )


@dataclass(frozen=True, slots=True)
class _Pass:
    """What every phase of one pass reads besides the view it plans on."""

    request: Request
    deployment: DeploymentInput  # request.deployment, read
    matcher: Matcher
    laps: logs.Laps

    def outcome(
        self, decided: _Scheduled | _NotPlanned, footprint: Sequence[str] | None = None
    ) -> Outcome:
        """7: the outcome of what the phases decided, built once."""
        if isinstance(decided, _NotPlanned):
            unplanned = _unplanned(self.request, decided.why)
            return replace(unplanned, reads=decided.reads, footprint=_tuple(footprint))
        return self._planned(decided, footprint)

    def _planned(self, decided: _Scheduled, footprint: Sequence[str] | None) -> Planned:
        request, deployment = self.request, self.deployment
        spec, reported = deployment.spec, request.reported
        plan, missing, notes = decided.plan, decided.missing, decided.notes
        return Planned(
            resources=self._resources(plan, decided.view),
            status=writer.status(plan, missing),
            said=report.of_plan(
                plan,
                previous_scheduled=reported.scheduled,
                was_ready=reported.was_ready,
                notes=notes,
            ),
            plan=plan,
            missing=missing,
            notes=notes,
            cluster_labels=deployment.cluster_labels,
            requeue_after=_requeue_after(
                plan, missing, request.own.replicas, spec, reported, request.now
            ),
            tenancy=tenancy.requirements(spec.namespace),
            reads=decided.reads,
            footprint=_tuple(footprint),
        )

    def _resources(self, plan: Plan, view: View) -> dict[str, dict]:
        """The replicas the plan writes, and the Namespace on each cluster they run on."""
        spec = self.deployment.spec
        workload_namespaces = namespaces.compose(
            deployment=spec.name,
            namespace=spec.namespace,
            in_use=(r.cluster for r in plan.replicas),
            sites=view.sites,
            observed=self.request.namespaces,
        )
        own = self.request.own.observed
        return {**writer.planned_resources(self.deployment, plan, own), **workload_namespaces}


def _tuple(footprint: Sequence[str] | None) -> tuple[str, ...] | None:
    return tuple(footprint) if footprint is not None else None
