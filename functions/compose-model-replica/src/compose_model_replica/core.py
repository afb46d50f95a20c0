"""What compose-model-replica decides, as a pure function of typed inputs.

A ModelReplica is one complete serving instance of a model, pinned to one
InferenceCluster and, per member, one pool of it. `decide` takes the inputs
readers.py read once (model.py, `now` among them) and returns an `Outcome`,
everything the shell writes:

1. The resources to compose on the workload cluster (see workloads.py for
   the mapping), each a provider-kubernetes Object in the replica's
   namespace using the cluster's ClusterProviderConfig, and which of them
   are ready: an Object is ready when its Ready condition is True, which
   for a workload means the readiness query found every pod available.
2. The replica's status: `pods`, `scheduledAt`, `engines[]`, `admission`,
   and the conditions PodsScheduled (pods_scheduled.py), WorkloadsReady,
   WorkloadsComposed and Admitted (admission.py: only an admitted replica
   composes its engines' workloads).
3. Whether the replica itself is Ready (the XR's `Ready`, which the shell
   states instead of letting Crossplane derive it): exactly when
   WorkloadsReady is True, that is when the spec names at least one engine
   and every engine's workload is available. It is judged on the observed
   Objects alone, so a missing cluster or another input problem, which
   keeps the Objects as they are, does not change it.
4. Warning events for everything a person has to fix, the resources the
   shell must require next (the cluster, its replicas until the verdict is
   recorded, and the ModelDeployment while a member names its template by
   digest), and when to be called again: at the end of admission's commit delay,
   else soon while the replica is not yet Ready with every pod scheduled,
   a template is not in hand, or its watch circuit is open
   (modelplane_common.requeue: Crossplane may drop the events that would
   report the workloads' progress).

Phases (each a function below that returns what it decided; `decide` runs them in order)
    1. admit     -> AdmissionVerdict (admission.py) for the current placement.
    2. resolve   -> Target: the cluster's own problem (or that it reserves the
                 replica's namespace: modelplane_common.workload_namespace), and
                 the cluster's facts when the pass may compose on it; before it,
                 held_templates -> Templates: the engines whose pod templates are
                 in hand (inline, or named by digest and taken from the
                 ModelDeployment) and whose priority class the cluster approves.
                 A reserved namespace or an unapproved class also keeps a replica
                 not yet admitted from being judged (phase 1).
    3. compose   -> Composition: the engines' and the ReplicaObservation's
                 Objects, the engines whose pools the cluster lacks, and the
                 source PodsScheduled is judged from.
    4. problems  -> Problems: everything that keeps the pass from being
                 clean, in the order they are reported, and per engine.
    5. keep      -> Leftovers: what a pass that is not clean re-emits unchanged.
    6. pods      -> PodsScheduledVerdict (pods_scheduled.py).
    7. readiness -> WorkloadsReadiness: status.engines[] and WorkloadsReady.
    8. report    -> the WorkloadsComposed condition and the Warning events.

Where the pods run
    In the workload cluster namespace named like the replica's namespace.
    The replica does not compose that Namespace: its ModelDeployment does,
    once per cluster it has replicas on (modelplane_common.workload_namespace),
    labelled with the cluster's Pod Security level and never deleted. When a
    workload cannot be applied (its namespace does not exist yet, a webhook
    refuses it), provider-kubernetes' Synced condition says why, and
    WorkloadsReady is False with reason WorkloadsNotSynced quoting the
    provider (PodsCreated quotes it too: pods_created.py). An earlier
    release's per-replica Namespace Object is a leftover, dropped by the
    next clean pass; its policies (no Delete) keep the remote namespace.

Invariants
    - Running work is never dropped because an input is missing or wrong.
      A pass composes what its inputs allow; a resource it observed but
      did not compose is re-emitted unchanged unless the pass is CLEAN:
      the cluster resolved, its spec valid against its XRD (an unknown
      observation.mode makes it invalid) and with a provider config, the
      replica's spec valid, every engine's templates in hand (a digest that
      does not match the ModelDeployment's template keeps its workloads as
      they are: templates.py), every engine's pools in the cluster's spec.
      Only a clean pass removes leftovers (an engine removed from the
      spec, the Objects of the cluster the replica left, the
      ReplicaObservation in Declared mode, an earlier release's Namespace
      Object). Waiting for admission or being
      Overcommitted is no missing input: such a pass stays clean.
    - A ReplicaObservation is composed only in Observed mode, and only once
      the cluster reports the agent present (or one already exists).
    - The composition resource names and Object names include the cluster,
      so moving a replica replaces its Objects instead of retargeting them.
    - Messages hold no counts or times, so lastTransitionTime means
      something.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta

from modelplane_common import inputs, orphans, requeue, workload_namespace
from modelplane_common.capacity.admission import CONDITION as ADMITTED_CONDITION
from modelplane_common.capacity.admission import OVERCOMMITTED, Queued
from modelplane_common.capacity.charge_label import reads_pending_only
from modelplane_common.composed import ObservedObject
from modelplane_common.outcome import Condition, Event, capped, unchanged
from modelplane_common.pods_created import NOT_CREATED
from modelplane_common.pods_created import TYPE as CREATED
from modelplane_common.timeutil import format_time

from compose_model_replica import admission, pods_created, pods_scheduled, quota_gate, templates
from compose_model_replica.admission import AdmissionVerdict, Applicant
from compose_model_replica.model import (
    Absent,
    ClusterFacts,
    ClusterInput,
    Found,
    Inputs,
    Invalid,
    NotFetched,
)
from compose_model_replica.pods_created import PodsCreatedVerdict
from compose_model_replica.pods_scheduled import PodsScheduledVerdict
from compose_model_replica.spec import Engine, ParsedSpec
from compose_model_replica.templates import Templates
from compose_model_replica.workloads import (
    ReplicaManifests,
    engine_prefix,
    is_engine_resource,
    observation_resource,
)

DEFAULT_MAX_AGE = inputs.DEFAULT_MAX_AGE

COMPOSED = "WorkloadsComposed"
READY = "WorkloadsReady"
KEPT_NOTE = "composed resources are kept unchanged until this is fixed"


@dataclass(frozen=True, slots=True)
class Desired:
    body: Mapping
    ready: bool


@dataclass(frozen=True, slots=True)
class Requirements:
    """What the shell asks Crossplane to fetch for the next call."""

    cluster: str  # the InferenceCluster; "" when the spec names none
    replicas_of: str  # the cluster whose ModelReplicas admission reads; "" once decided
    # Only those whose charge is pending: every pool of the cluster is freshly observed,
    # or the cluster is not read yet (capacity/charge_label.py).
    pending_only: bool = True
    # The namespace whose ResourceQuotas (and, under a device quota, ModelReplicas)
    # admission reads (quota_gate.py); "" once decided.
    quotas_of: str = ""
    namespace_replicas: bool = False
    # The ModelDeployment (in the replica's namespace) whose templates it names by
    # digest (templates.py); "" when no member does, or the labels name none.
    deployment: str = ""
    deployment_namespace: str = ""


@dataclass(frozen=True, slots=True)
class Outcome:
    """Everything one pass writes."""

    requirements: Requirements
    resources: Mapping[str, Desired]  # composed now, plus the leftovers kept unchanged
    kept_unchanged: tuple[str, ...]  # the leftovers' names
    status: Mapping
    conditions: tuple[Condition, ...]
    events: tuple[Event, ...]
    ready: bool  # the replica's own Ready: WorkloadsReady is True
    # When to be called again: the end of admission's commit delay, else modelplane_common.requeue.
    requeue_after: timedelta


NAMESPACE_RESERVED = "NamespaceReserved"


@dataclass(frozen=True, slots=True)
class Problem:
    reason: str
    message: str
    warn: bool = True


# -- phase 1: admit ----------------------------------------------------------------------------


def _has_workloads(spec: ParsedSpec, observed: Mapping[str, ObservedObject]) -> bool:
    """Whether an engine Object on the replica's cluster exists: it was started already.

    Any engine's name under the cluster's prefix counts (an engine renamed
    since is still running work); the ReplicaObservation and an earlier
    release's workload Namespace, composed before any verdict, are not workloads: counting them
    would admit every replica at once, past the commit delay and the replay.
    """
    return bool(spec.cluster) and any(is_engine_resource(spec.cluster, n) for n in observed)


def admit(given: Inputs, refused: str | None = None) -> AdmissionVerdict:
    """The verdict; `refused` says why the replica's cluster refuses its namespace or a
    template (`tenancy_refusal`), which keeps a replica not yet admitted from being judged."""
    replica, spec = given.replica, given.replica.spec
    problem = replica.placement_problem or replica.cluster_label_problem
    if problem is None and (spec.defects or spec.invalid):
        problem = "its spec is invalid"
    problem = problem or refused
    cluster = given.cluster.facts.fleet if isinstance(given.cluster, Found) else None
    applicant = Applicant(
        queued=replica.queued,
        placement=replica.placement,
        previous=replica.previous_admission,
        has_workloads=_has_workloads(spec, given.observed),
        problem=problem,
        shape=replica.shape,
    )
    verdict = admission.judge(applicant, cluster, queue_of(given), given.now)
    if verdict.admitted and not quota_gate.already_decided(applicant):
        quota = quota_gate.gate(applicant, given.quota, given.namespace_replicas, given.now)
        verdict = quota or verdict
    return admission.growth_verdict(applicant, verdict, given.now)


# -- phase 2: resolve --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """What `resolve` decided about the cluster."""

    problem: Problem | None  # the cluster's own problem
    # Set only when this pass may compose: the cluster resolved and the spec has no
    # replica-level defect (no cluster name, unreadable tolerations would change every pod).
    cluster: ClusterFacts | None


def _cluster_problem(name: str, cluster: ClusterInput) -> Problem | None:
    match cluster:
        case NotFetched():
            # Crossplane fetches required resources between calls; the
            # first call never has them, and that is no fault.
            return Problem("ClusterNotResolved", f"waiting for InferenceCluster {name}", warn=False)
        case Invalid(defects):
            # An unknown observation.mode lands here too: the shared rule
            # makes it an unresolved input, never a reason to remove anything.
            return Problem("ClusterInvalid", f"InferenceCluster {name} is invalid: {defects}")
        case Found(facts) if not facts.provider_config:
            return Problem(
                "ClusterNotReady", f"InferenceCluster {name} publishes no providerConfigRef yet"
            )
        case Found():
            return None
        case Absent():
            return Problem("ClusterNotFound", f"InferenceCluster {name} does not exist")


def namespace_problem(given: Inputs) -> Problem | None:
    """Why the replica's namespace may not run pods on its cluster
    (`modelplane_common.workload_namespace`); the cluster's own list once it is read."""
    cluster = given.cluster
    reserved_here = cluster.facts.tenancy.reserved_namespaces if isinstance(cluster, Found) else ()
    why = workload_namespace.reserved_problem(given.replica.namespace, reserved_here)
    return Problem(NAMESPACE_RESERVED, why) if why is not None else None


def tenancy_refusal(given: Inputs, held: Templates) -> str | None:
    """What the cluster's tenancy rules refuse: the namespace, else a template's priority."""
    reserved = namespace_problem(given)
    return reserved.message if reserved is not None else templates.refusal(held)


def resolve(given: Inputs) -> Target:
    """The cluster's facts, unless the cluster or the spec is a problem or the namespace is
    reserved there: then nothing is composed, and whatever runs is kept as observed."""
    spec, cluster = given.replica.spec, given.cluster
    problem = _cluster_problem(spec.cluster, cluster) if spec.cluster else None
    problem = problem or namespace_problem(given)
    if isinstance(cluster, Found) and problem is None and not spec.defects:
        return Target(problem, cluster.facts)
    return Target(problem, None)


def held_templates(given: Inputs) -> Templates:
    """The engines whose templates are in hand and that the cluster approves."""
    held = templates.resolve(given.replica.spec.engines, reference(given))
    if not isinstance(given.cluster, Found):
        return held
    return templates.approve(held, given.cluster.facts.tenancy.priority_class_names)


# -- phase 3: compose --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Composition:
    """What `compose` decided."""

    desired: Mapping[str, Desired]
    missing_pools: Mapping[str, str]  # engine -> why its pools are not on the cluster
    source: pods_scheduled.Source  # what PodsScheduled is judged from


def _observed_report(obj: ObservedObject | None) -> pods_scheduled.Source:
    if obj is None or obj.remote is None:
        return pods_scheduled.NOT_REPORTED
    return pods_scheduled.parse_report(obj.remote.get("status"))


def _pods_source(
    cluster: str, facts: ClusterFacts, observed: Mapping[str, ObservedObject]
) -> pods_scheduled.Source:
    """Where PodsScheduled comes from on a resolved cluster."""
    report = observation_resource(cluster)
    if facts.mode == "Declared":
        return pods_scheduled.Unobserved(
            "the cluster's capacity is Declared: no agent observes its pods"
        )
    if not facts.agent_present and report not in observed:
        return pods_scheduled.Unobserved(
            f"the agent is not installed on InferenceCluster {cluster}"
        )
    source = _observed_report(observed.get(report))
    if isinstance(source, pods_scheduled.AgentReport):
        return replace(source, cluster_current_until=facts.replicas_current_until)
    return source


def _unresolved_source(
    cluster: str, problem: Problem | None, observed: Mapping[str, ObservedObject]
) -> pods_scheduled.Source:
    """Without the cluster there is nothing to compose, but a report the agent already
    wrote is still worth relaying."""
    source = _observed_report(observed.get(observation_resource(cluster)))
    if isinstance(source, pods_scheduled.Unobserved) and problem is not None:
        return pods_scheduled.Unobserved(problem.message)
    return source


def _missing_pools(engine: Engine, facts: ClusterFacts, cluster: str) -> str | None:
    missing = sorted({m.pool for m in engine.members if m.pool not in facts.pools})
    if not missing:
        return None
    return f"pool {', '.join(missing)} is not in InferenceCluster {cluster}'s spec"


def _running_engines(cluster: str, observed: Mapping[str, ObservedObject]) -> dict[str, Mapping]:
    """The engine Objects as they run, for a replica whose growth is not admitted: it
    keeps running at the shape its verdict charged, never at more, never at less."""
    return {
        name: unchanged(obj.body)
        for name, obj in sorted(observed.items())
        if is_engine_resource(cluster, name)
    }


def compose(
    given: Inputs,
    target: Target,
    manifests: ReplicaManifests,
    verdict: AdmissionVerdict,
    held: Templates,
) -> Composition:
    """The Objects this pass composes: an engine's only when admitted, its pools are on
    the cluster and its templates are in hand (`held`); while its growth is not admitted,
    the engines' Objects as observed."""
    spec, observed = given.replica.spec, given.observed
    facts = target.cluster
    if facts is None:
        return Composition({}, {}, _unresolved_source(spec.cluster, target.problem, observed))
    admitted = verdict.admitted
    bodies: dict[str, Mapping] = _running_engines(spec.cluster, observed) if verdict.holding else {}
    missing: dict[str, str] = {}
    for engine in spec.engines:
        why = _missing_pools(engine, facts, spec.cluster)
        if why is not None:
            missing[engine.name] = why
        elif admitted and engine.name in held.engines:
            bodies.update(manifests.engine_objects(held.engines[engine.name], spec.tolerations))
    report = observation_resource(spec.cluster)
    if facts.mode == "Observed" and (facts.agent_present or report in observed):
        bodies[report] = manifests.observation_object()
    desired = {
        name: Desired(body, name in observed and observed[name].ready)
        for name, body in bodies.items()
    }
    return Composition(desired, missing, _pods_source(spec.cluster, facts, observed))


# -- phase 4: problems -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Problems:
    """What `problems` decided: why the pass is not clean, in reporting order."""

    listed: tuple[Problem, ...]
    by_engine: Mapping[str, str]  # engine -> why it has no workload (status.engines[])


def problems(
    spec: ParsedSpec, target: Target, composition: Composition, held: Templates
) -> Problems:
    """The cluster's problem first, then the spec's, then the templates not in hand, then
    the engines whose pools are missing. Templates not in hand are not an engine's
    status: its workloads, kept as observed, say how it runs."""
    listed: list[Problem] = [target.problem] if target.problem is not None else []
    by_engine: dict[str, str] = {}
    if spec.defects:
        listed.append(Problem("InvalidSpec", "; ".join(spec.defects)))
    for invalid in spec.invalid:
        if invalid.name:
            by_engine[invalid.name] = f"invalid spec: {invalid.message}"
        listed.append(
            Problem(
                "InvalidSpec",
                f"engine {invalid.name}: {invalid.message}" if invalid.name else invalid.message,
            )
        )
    listed.extend(Problem(u.reason, u.message, u.warn) for u in held.problems)
    for engine, why in composition.missing_pools.items():
        by_engine[engine] = why
        listed.append(Problem("PoolNotFound", f"engine {engine}: {why}"))
    return Problems(tuple(listed), by_engine)


def admission_problem(listed: tuple[Problem, ...], verdict: AdmissionVerdict) -> Problem | None:
    """Not being admitted is itself why nothing is composed, unless another problem
    already says why; Overcommitted is always said (a person may have to act), and so
    is a growth not admitted (its engines are kept as they run), warned when refused."""
    if verdict.holding:
        return Problem(verdict.reason, verdict.message, warn=verdict.refused)
    if verdict.admitted or (verdict.reason != OVERCOMMITTED and listed):
        return None
    return Problem(
        verdict.reason, f"not admitted: {verdict.message}", warn=verdict.reason == OVERCOMMITTED
    )


# -- phase 5: keep -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Leftovers:
    """What `keep` decided: every resource this pass writes, and those kept as observed."""

    resources: Mapping[str, Desired]
    kept: tuple[str, ...]


def keep(
    observed: Mapping[str, ObservedObject], composed: Mapping[str, Desired], clean: bool
) -> Leftovers:
    """A pass that is not clean re-emits every observed resource it did not compose."""
    if clean:
        return Leftovers(composed, ())
    kept = tuple(sorted(set(observed) - set(composed)))
    resources = {
        **composed,
        **{n: Desired(unchanged(observed[n].body), observed[n].ready) for n in kept},
    }
    return Leftovers(resources, kept)


# -- phase 6: pods -----------------------------------------------------------------------------


def _engine_of(manifests: ReplicaManifests, spec: ParsedSpec) -> Callable[[str], str | None]:
    """Which engine a scheduler message is about, found by its workload's name."""
    names = {manifests.workload_name(e): e for e in spec.engine_names}

    def engine_of(message: str) -> str | None:
        if len(spec.engine_names) == 1:
            return spec.engine_names[0]
        hits = [name for name in names if name in message]
        return names[max(hits, key=len)] if hits else None

    return engine_of


def pods(
    given: Inputs, target: Target, composition: Composition, manifests: ReplicaManifests
) -> PodsScheduledVerdict:
    spec = given.replica.spec
    return pods_scheduled.judge(
        composition.source,
        spec.expected_pods,
        given.now,
        target.cluster.max_age if target.cluster is not None else DEFAULT_MAX_AGE,
        given.replica.previous_pods,
        _engine_of(manifests, spec),
    )


# -- phase 7: readiness ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkloadsReadiness:
    """What `readiness` decided: status.engines[] and the WorkloadsReady condition."""

    engines: tuple[dict, ...]
    condition: Condition


def _remote_not_available(obj: ObservedObject) -> str:
    remote = obj.remote or {}
    kind = remote.get("kind") or "workload"
    available = inputs.find_condition(remote, "Available")
    if available.get("status") == "False" and available.get("message"):
        # The workload cluster's words: capped once, here.
        return capped(f"the {kind} is not Available: {available['message']}")
    return f"waiting for every pod of the {kind} to be available"


def _engine_readiness(
    name: str, problem: str | None, resources: Mapping[str, ObservedObject], namespace: str
) -> dict:
    """One status.engines[] entry from the engine's observed Objects."""
    if problem:
        return {"name": name, "ready": False, "message": problem}
    unsynced = [o for _, o in sorted(resources.items()) if o.synced is False]
    if unsynced:
        return {
            "name": name,
            "ready": False,
            "message": capped(
                "cannot apply to the cluster: "
                + workload_namespace.explain_unapplied(
                    unsynced[0].synced_message or "the provider reports no reason", namespace
                )
            ),
        }
    workload = next((o for n, o in resources.items() if n.endswith("/workload")), None)
    if workload is None:
        return {"name": name, "ready": False, "message": "the workload is not created yet"}
    if not workload.ready:
        return {"name": name, "ready": False, "message": _remote_not_available(workload)}
    return {"name": name, "ready": True, "message": "available"}


def _ready_condition(engines: tuple[dict, ...], any_unsynced: bool) -> Condition:
    if not engines:
        # Nothing to be available: claiming every engine is would be vacuous.
        return Condition(READY, "False", "NoEngines", "the spec names no engine")
    not_ready = [e for e in engines if not e["ready"]]
    if not not_ready:
        return Condition(READY, "True", "AllWorkloadsReady", "every engine's workload is available")
    reason = "WorkloadsNotSynced" if any_unsynced else "WorkloadsNotReady"
    return Condition(
        READY,
        "False",
        reason,
        "; ".join(f"engine {e['name']}: {e['message']}" for e in not_ready),
    )


def readiness(given: Inputs, by_engine: Mapping[str, str]) -> WorkloadsReadiness:
    """Each engine judged on its observed Objects alone, whatever this pass composes."""
    spec = given.replica.spec
    engines = []
    any_unsynced = False
    for name in spec.engine_names:
        prefix = engine_prefix(spec.cluster, name)
        mine = {n: o for n, o in given.observed.items() if n.startswith(prefix)}
        engines.append(_engine_readiness(name, by_engine.get(name), mine, given.replica.namespace))
        if name not in by_engine and any(o.synced is False for o in mine.values()):
            any_unsynced = True
    return WorkloadsReadiness(tuple(engines), _ready_condition(tuple(engines), any_unsynced))


# -- phase 8: report ---------------------------------------------------------------------------


def composed_condition(listed: tuple[Problem, ...], kept: bool, cluster: str) -> Condition:
    if not listed:
        return Condition(COMPOSED, "True", "Composed", f"composed on InferenceCluster {cluster}")
    message = "; ".join(p.message for p in listed)
    if kept:
        message += f"; {KEPT_NOTE}"
    return Condition(COMPOSED, "False", listed[0].reason, message)


def warning_events(
    given: Inputs,
    target: Target,
    pods_verdict: PodsScheduledVerdict,
    listed: tuple[Problem, ...],
    created_verdict: PodsCreatedVerdict,
) -> tuple[Event, ...]:
    """The Warning events, in a fixed order: the placement time, a clamped grace, the
    cluster's maxAge, the agent's report, pods the cluster refused past the grace, then
    every problem a person has to fix."""
    said = [
        given.replica.placement_problem,
        given.replica.placement_replaced,
        given.replica.cluster_label_problem,
        given.replica.spec.grace_clamped,
    ]
    if target.cluster is not None:
        said.append(target.cluster.max_age_problem)
    said.extend(pods_verdict.warnings)
    if created_verdict.condition.reason == NOT_CREATED:
        said.append(created_verdict.condition.message)
    said.extend(p.message for p in listed if p.warn)
    return tuple(Event("Warning", text) for text in said if text)


def created(
    given: Inputs, composition: Composition, verdict: AdmissionVerdict
) -> PodsCreatedVerdict:
    """PodsCreated, judged on the Objects of the cluster the replica is pinned to."""
    spec = given.replica.spec
    cluster = given.cluster
    prefix = f"{spec.cluster}/"
    return pods_created.judge(
        pods_created.Evidence(
            source=composition.source,
            expected=spec.expected_pods,
            record=verdict.record,
            previous_since=given.replica.previous_missing_since,
            observed={n: o for n, o in given.observed.items() if n.startswith(prefix)},
            grace=spec.missing_pods_grace,
            max_age=cluster.facts.max_age if isinstance(cluster, Found) else DEFAULT_MAX_AGE,
            now=given.now,
            namespace=given.replica.namespace,
        )
    )


def _status(
    pods_verdict: PodsScheduledVerdict,
    ready: WorkloadsReadiness,
    verdict: AdmissionVerdict,
    created: PodsCreatedVerdict,
) -> dict:
    status = {**pods_verdict.status(), "engines": list(ready.engines)}
    if created.missing_since is not None:
        status["pods"] = {**status["pods"], "missingSince": format_time(created.missing_since)}
    if verdict.record is not None:
        status["admission"] = verdict.record.to_wire()
    return status


def _reads_pending_only(given: Inputs) -> bool:
    """Whether the cluster's pending replicas are all admission must charge: every pool
    is freshly observed, or the cluster is not read yet, so the cheap set is asked first."""
    if not isinstance(given.cluster, Found) or given.cluster.facts.fleet is None:
        return True
    return reads_pending_only(given.cluster.facts.fleet, given.now)


def queue_of(given: Inputs) -> tuple[Queued, ...] | None:
    """The replicas admission replays the queue with: all of the cluster's, or only its
    pending ones when that is all it must charge; None until the right set is fetched."""
    if given.fellows is not None:
        return given.fellows
    if given.pending_fellows is not None and isinstance(given.cluster, Found):
        return given.pending_fellows if _reads_pending_only(given) else None
    return None


def requirements(given: Inputs) -> Requirements:
    """The cluster, and its ModelReplicas only until the verdict for this placement is
    recorded: a decided replica never reads them again (design/admission.md, "Cost"),
    only the pending ones while every pool of the cluster is freshly observed; and on
    every pass, asked from the first, the ModelDeployment whose templates it names by
    digest."""
    replica = given.replica
    cluster = replica.spec.cluster
    deciding = not replica.verdict_recorded and bool(cluster)
    limited = given.quota is not None and given.quota.limited
    return Requirements(
        cluster,
        cluster if deciding else "",
        pending_only=_reads_pending_only(given),
        quotas_of=replica.namespace if deciding else "",
        namespace_replicas=deciding and limited,
        deployment=replica.deployment if replica.spec.templates_by_digest else "",
        deployment_namespace=replica.namespace,
    )


def reference(given: Inputs) -> templates.Reference:
    replica = given.replica
    return templates.Reference(
        replica.namespace, replica.deployment, replica.deployment_problem, given.deployment
    )


def admitted_message(given: Inputs, verdict: AdmissionVerdict) -> str:
    """The verdict, and the placed-at it was not queued by when that stamp was implausible."""
    replaced = given.replica.placement_replaced
    return f"{verdict.message}; {replaced}" if replaced else verdict.message


# -- the pass ----------------------------------------------------------------------------------


def orphaned(given: Inputs) -> Outcome:
    """A replica no ModelDeployment owns any more (modelplane_common.orphans): it composes
    nothing, so Crossplane removes its workloads (an earlier release's Namespace Object
    never deletes the remote namespace), it
    holds no capacity (PodsCreated False/Orphaned) and reads nothing."""
    message = (
        "no ModelDeployment owns this replica any more (composed by Crossplane, "
        f"annotated {orphans.COMPOSED_ANNOTATION}, no controller ownerReference: its "
        "deployment was deleted with --cascade=orphan): it runs nothing and holds no "
        "capacity; it can be deleted"
    )
    types = (pods_scheduled.TYPE, CREATED, READY, COMPOSED, ADMITTED_CONDITION)
    return Outcome(
        requirements=Requirements(cluster="", replicas_of=""),
        resources={},
        kept_unchanged=(),
        status={},
        conditions=tuple(Condition(t, "False", orphans.ORPHANED, message) for t in types),
        events=(Event("Warning", message),),
        ready=False,
        requeue_after=requeue.AT_REST_CAP,
    )


def decide(given: Inputs) -> Outcome:
    """Decide the resources, status, conditions and events of one ModelReplica."""
    if given.replica.orphaned:
        return orphaned(given)
    spec = given.replica.spec
    held = held_templates(given)
    verdict = admit(given, tenancy_refusal(given, held))
    target = resolve(given)
    manifests = ReplicaManifests(
        name=given.replica.name,
        namespace=given.replica.namespace,
        cluster=spec.cluster,
        provider_config=target.cluster.provider_config if target.cluster is not None else "",
    )
    composition = compose(given, target, manifests, verdict, held)
    found = problems(spec, target, composition, held)
    leftovers = keep(given.observed, composition.desired, clean=not found.listed)
    late = admission_problem(found.listed, verdict)
    listed = (*found.listed, late) if late is not None else found.listed
    pods_verdict = pods(given, target, composition, manifests)
    created_verdict = created(given, composition, verdict)
    ready = readiness(given, found.by_engine)
    admitted = Condition(
        ADMITTED_CONDITION, verdict.status, verdict.reason, admitted_message(given, verdict)
    )
    return Outcome(
        requirements=requirements(given),
        resources=leftovers.resources,
        kept_unchanged=leftovers.kept,
        status=_status(pods_verdict, ready, verdict, created_verdict),
        conditions=(
            pods_verdict.condition,
            created_verdict.condition,
            ready.condition,
            composed_condition(listed, bool(leftovers.kept), spec.cluster),
            admitted,
        ),
        events=warning_events(given, target, pods_verdict, listed, created_verdict),
        ready=ready.condition.status == "True",
        requeue_after=requeue.after(
            dropping_events=given.replica.dropping_events,
            waiting=ready.condition.status != "True"
            or pods_verdict.condition.status != "True"
            # Required resources are not watched: only a call shows the template.
            or bool(held.problems),
            deadlines=_deadlines(given, target, composition, verdict, created_verdict),
        ),
    )


def _deadlines(
    given: Inputs,
    target: Target,
    composition: Composition,
    verdict: AdmissionVerdict,
    created_verdict: PodsCreatedVerdict,
) -> tuple[timedelta | None, ...]:
    """When the replica's answer changes with no event: admission's commit delay, the agent's
    report turning stale (its own observedAt, or its cluster's word on it, running out:
    required resources are not watched before Crossplane v2.4), the missing pods' grace
    running out."""
    now = given.now
    max_age = target.cluster.max_age if target.cluster is not None else DEFAULT_MAX_AGE
    source = composition.source
    stale_at = (
        source.turns_stale_at(now, max_age)
        if isinstance(source, pods_scheduled.AgentReport)
        else None
    )
    grace = given.replica.spec.missing_pods_grace
    return (
        verdict.retry_after,
        requeue.until(stale_at, now),
        requeue.until(pods_created.grace_expires_at(created_verdict, grace), now),
    )
