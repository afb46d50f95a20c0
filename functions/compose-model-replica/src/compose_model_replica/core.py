"""What compose-model-replica decides, as a pure function of typed inputs and `now`.

A ModelReplica is one complete serving instance of a model, pinned to one
InferenceCluster and, per member, one pool of it. This module decides:

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
4. Warning events for everything a person has to fix.

Where the pods run
    In the workload cluster namespace named like the replica's namespace.
    The replica does not create it: a namespace outlives any one replica
    and holds other tenants' work, so owning it from a replica would delete
    it with the replica. When it is missing, provider-kubernetes cannot
    apply the Objects, their Synced condition says so, and WorkloadsReady
    is False with reason WorkloadsNotSynced quoting the provider.

Invariants
    - Running work is never dropped because an input is missing or wrong.
      A pass composes what its inputs allow; a resource it observed but
      did not compose is re-emitted unchanged unless the pass is CLEAN:
      the cluster resolved, its spec valid against its XRD (an unknown
      observation.mode makes it invalid) and with a provider config, the
      replica's spec valid, every
      engine's pools in the cluster's spec. Only a clean pass removes
      leftovers (an engine removed from the spec, the Objects of the
      cluster the replica left, the ReplicaObservation in Declared mode).
    - A ReplicaObservation is composed only in Observed mode, and only once
      the cluster reports the agent present (or one already exists).
    - The composition resource names and Object names include the cluster,
      so moving a replica replaces its Objects instead of retargeting them.
    - Messages hold no counts or times, so lastTransitionTime means
      something.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from modelplane_common import inputs
from modelplane_common.capacity.admission import CONDITION as ADMITTED_CONDITION
from modelplane_common.capacity.admission import OVERCOMMITTED, Queued, record_from_status
from modelplane_common.capacity.fleet import Cluster
from modelplane_common.outcome import Condition, Event, unchanged

from compose_model_replica import admission, pods_scheduled
from compose_model_replica.spec import Engine, ReplicaSpec, parse_spec
from compose_model_replica.workloads import (
    Replica,
    engine_prefix,
    observation_resource,
)

DEFAULT_MAX_AGE = inputs.DEFAULT_MAX_AGE

COMPOSED = "WorkloadsComposed"
READY = "WorkloadsReady"


@dataclass(frozen=True, slots=True)
class NotFetched:
    """Crossplane has not fetched the required InferenceCluster yet."""


@dataclass(frozen=True, slots=True)
class Absent:
    """Fetched: no InferenceCluster has that name."""


@dataclass(frozen=True, slots=True)
class Found:
    cluster: Mapping


ClusterInput = NotFetched | Absent | Found


@dataclass(frozen=True, slots=True)
class AdmissionInput:
    """What admission reads besides the XR's status (admission.py)."""

    mine: Queued  # this replica, as its fellow replicas read it
    placement: str  # the raw modelplane.ai/placed-at annotation
    cluster: Cluster | None  # None: the InferenceCluster cannot be read
    others: tuple[Queued, ...] | None  # the cluster's ModelReplicas; None: not fetched
    problem: str | None = None  # why the replica's own placement cannot be read


@dataclass(frozen=True, slots=True)
class ObservedObject:
    """A composed Object as the control plane last saw it."""

    body: Mapping  # as observed, status removed
    ready: bool
    synced: bool | None  # None: no Synced condition yet
    synced_message: str = ""
    remote: Mapping | None = None  # the workload-cluster object the provider last saw


@dataclass(frozen=True, slots=True)
class Desired:
    body: Mapping
    ready: bool


@dataclass(frozen=True, slots=True)
class Decision:
    desired: dict[str, Desired]
    status: dict
    conditions: tuple[Condition, ...]
    events: tuple[Event, ...]
    kept: tuple[str, ...] = field(default=())
    ready: bool = False  # the replica's own Ready: WorkloadsReady is True
    retry_after: timedelta | None = None  # while admission settles: when to look again


@dataclass(frozen=True, slots=True)
class _Problem:
    reason: str
    message: str
    warn: bool = True


def _cluster_status(cluster: Mapping) -> Mapping:
    status = cluster.get("status")
    return status if isinstance(status, Mapping) else {}


def _provider_config(cluster: Mapping) -> str:
    ref = _cluster_status(cluster).get("providerConfigRef")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return name if isinstance(name, str) else ""


def _cluster_problem(cluster_name: str, cluster: ClusterInput) -> _Problem | None:
    match cluster:
        case NotFetched():
            # Crossplane fetches required resources between calls; the
            # first call never has them, and that is no fault.
            return _Problem(
                "ClusterNotResolved", f"waiting for InferenceCluster {cluster_name}", warn=False
            )
        case Absent():
            return _Problem("ClusterNotFound", f"InferenceCluster {cluster_name} does not exist")
        case Found(body) if defects := inputs.inference_cluster_problems(body.get("spec")):
            # An unknown observation.mode lands here too: the shared rule
            # makes it an unresolved input, never a reason to remove anything.
            return _Problem(
                "ClusterInvalid",
                f"InferenceCluster {cluster_name} is invalid: {'; '.join(defects)}",
            )
        case Found(body) if not _provider_config(body):
            return _Problem(
                "ClusterNotReady",
                f"InferenceCluster {cluster_name} publishes no providerConfigRef yet",
            )
    return None


def _max_age(cluster: Mapping, events: list[Event]) -> timedelta:
    observation = (cluster.get("spec") or {}).get("observation")
    max_age, defect = inputs.max_age(observation, "the cluster's spec.observation")
    if defect:
        events.append(Event("Warning", defect))
    return max_age


def _missing_pools(engine: Engine, cluster_pools: set[str]) -> list[str]:
    return sorted({m.pool for m in engine.members if m.pool not in cluster_pools})


def _engine_of(replica: Replica, spec: ReplicaSpec):
    """Which engine a scheduler message is about, found by its workload's name."""
    names = {replica.workload_name(e): e for e in spec.engine_names}

    def engine_of(message: str) -> str | None:
        if len(spec.engine_names) == 1:
            return spec.engine_names[0]
        hits = [name for name in names if name in message]
        return names[max(hits, key=len)] if hits else None

    return engine_of


def _remote_not_available(obj: ObservedObject) -> str:
    remote = obj.remote or {}
    kind = remote.get("kind") or "workload"
    available = inputs.find_condition(remote, "Available")
    if available.get("status") == "False" and available.get("message"):
        return f"the {kind} is not Available: {available['message']}"
    return f"waiting for every pod of the {kind} to be available"


def _engine_readiness(
    name: str,
    problem: str | None,
    resources: Mapping[str, ObservedObject],
) -> dict:
    """One status.engines[] entry from the engine's observed Objects."""
    if problem:
        return {"name": name, "ready": False, "message": problem}
    unsynced = [o for _, o in sorted(resources.items()) if o.synced is False]
    if unsynced:
        return {
            "name": name,
            "ready": False,
            "message": "cannot apply to the cluster: "
            + (unsynced[0].synced_message or "the provider reports no reason"),
        }
    workload = next((o for n, o in resources.items() if n.endswith("/workload")), None)
    if workload is None:
        return {"name": name, "ready": False, "message": "the workload is not created yet"}
    if not workload.ready:
        return {"name": name, "ready": False, "message": _remote_not_available(workload)}
    return {"name": name, "ready": True, "message": "available"}


def _ready_condition(engines: list[dict], any_unsynced: bool) -> Condition:
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


def decide(
    xr_name: str,
    xr_namespace: str,
    raw_spec: Mapping,
    previous_status: Mapping,
    cluster: ClusterInput,
    observed: Mapping[str, ObservedObject],
    now: datetime,
    admission_input: AdmissionInput | None = None,
) -> Decision:
    """Decide the desired resources, status, conditions and events of one ModelReplica.

    `admission_input` None judges nothing and admits (callers that predate
    admission, such as unit tests of the workloads alone).
    """
    spec = parse_spec(raw_spec)
    events: list[Event] = []
    problems: list[_Problem] = []
    engine_problems: dict[str, str] = {}
    verdict = _admit(spec, previous_status, observed, now, admission_input)
    if admission_input is not None and admission_input.problem:
        events.append(Event("Warning", admission_input.problem))

    if spec.defects:
        problems.append(_Problem("InvalidSpec", "; ".join(spec.defects)))
    for invalid in spec.invalid:
        if invalid.name:
            engine_problems[invalid.name] = f"invalid spec: {invalid.message}"
        problems.append(
            _Problem(
                "InvalidSpec",
                f"engine {invalid.name}: {invalid.message}" if invalid.name else invalid.message,
            )
        )

    cluster_problem = _cluster_problem(spec.cluster, cluster) if spec.cluster else None
    if cluster_problem:
        problems.insert(0, cluster_problem)

    # A replica-level defect (no cluster name, unreadable tolerations) would
    # change every pod, so such a pass composes nothing new at all.
    usable = isinstance(cluster, Found) and not cluster_problem and not spec.defects
    found = cluster.cluster if usable and isinstance(cluster, Found) else None
    max_age = _max_age(found, events) if found is not None else DEFAULT_MAX_AGE
    provider_config = _provider_config(found) if found is not None else ""
    replica = Replica(xr_name, xr_namespace, spec.cluster, provider_config)

    desired: dict[str, Desired] = {}

    def want(name: str, body: Mapping) -> None:
        obj = observed.get(name)
        desired[name] = Desired(body, obj is not None and obj.ready)

    if found is not None:
        cluster_spec = found.get("spec") or {}
        pools = {
            name
            for p in cluster_spec.get("nodePools") or []
            if isinstance(p, Mapping) and isinstance(name := p.get("name"), str)
        }
        for engine in spec.engines:
            missing = _missing_pools(engine, pools)
            if missing:
                text = f"pool {', '.join(missing)} is not in InferenceCluster {spec.cluster}'s spec"
                engine_problems[engine.name] = text
                problems.append(_Problem("PoolNotFound", f"engine {engine.name}: {text}"))
                continue
            if verdict is None or verdict.admitted:
                for name, body in replica.engine_objects(engine, spec.tolerations).items():
                    want(name, body)
        mode = inputs.observation_mode(cluster_spec.get("observation"))
        agent = _cluster_status(found).get("agent")
        agent_present = isinstance(agent, Mapping) and agent.get("present") is True
        obs_name = observation_resource(spec.cluster)
        if mode == "Observed" and (agent_present or obs_name in observed):
            want(obs_name, replica.observation_object())
        if mode == "Declared":
            source: pods_scheduled.Source = pods_scheduled.Unobserved(
                "the cluster's capacity is Declared: no agent observes its pods"
            )
        elif not agent_present and obs_name not in observed:
            source = pods_scheduled.Unobserved(
                f"the agent is not installed on InferenceCluster {spec.cluster}"
            )
        else:
            source = _observed_report(observed.get(obs_name))
    else:
        # Without the cluster there is nothing to compose, but a report the
        # agent already wrote is still worth relaying.
        source = _observed_report(observed.get(observation_resource(spec.cluster)))
        if isinstance(source, pods_scheduled.Unobserved) and cluster_problem:
            source = pods_scheduled.Unobserved(cluster_problem.message)

    clean = not problems
    kept = []
    if not clean:
        for name in sorted(set(observed) - set(desired)):
            desired[name] = Desired(unchanged(observed[name].body), observed[name].ready)
            kept.append(name)

    # Waiting or Overcommitted is no missing input: the pass stays clean (leftovers of a
    # cluster the replica left still go). A replica that cannot be judged because of
    # another problem is reported by that problem; otherwise not being admitted is
    # itself why nothing is composed.
    if (
        verdict is not None
        and not verdict.admitted
        and (verdict.reason == OVERCOMMITTED or not problems)
    ):
        problems.append(
            _Problem(
                verdict.reason,
                f"not admitted: {verdict.message}",
                warn=verdict.reason == OVERCOMMITTED,
            )
        )

    pods = pods_scheduled.judge(
        source,
        spec.expected_pods,
        now,
        max_age,
        pods_scheduled.Previous.from_status(previous_status),
        _engine_of(replica, spec),
    )
    events.extend(Event("Warning", w) for w in pods.warnings)

    engines = []
    any_unsynced = False
    for name in spec.engine_names:
        prefix = engine_prefix(spec.cluster, name)
        mine = {n: o for n, o in observed.items() if n.startswith(prefix)}
        entry = _engine_readiness(name, engine_problems.get(name), mine)
        if name not in engine_problems and any(o.synced is False for o in mine.values()):
            any_unsynced = True
        engines.append(entry)
    ready_condition = _ready_condition(engines, any_unsynced)

    if problems:
        first = problems[0]
        message = "; ".join(p.message for p in problems)
        if kept:
            message += "; composed resources are kept unchanged until this is fixed"
        composed = Condition(COMPOSED, "False", first.reason, message)
        for problem in problems:
            if problem.warn:
                events.append(Event("Warning", problem.message))
    else:
        composed = Condition(
            COMPOSED, "True", "Composed", f"composed on InferenceCluster {spec.cluster}"
        )

    status = {**pods.status(), "engines": engines}
    conditions = [pods.condition, ready_condition, composed]
    if verdict is not None:
        conditions.append(
            Condition(ADMITTED_CONDITION, verdict.status, verdict.reason, verdict.message)
        )
        if verdict.record is not None:
            status["admission"] = verdict.record.to_wire()
    return Decision(
        desired=desired,
        status=status,
        conditions=tuple(conditions),
        events=tuple(events),
        kept=tuple(kept),
        ready=ready_condition.status == "True",
        retry_after=verdict.retry_after if verdict is not None else None,
    )


def _has_workloads(spec: ReplicaSpec, observed: Mapping[str, ObservedObject]) -> bool:
    """Whether an engine Object on the replica's cluster exists: it was started already.

    Any name under the cluster's prefix counts (an engine renamed since is
    still running work); the ReplicaObservation is not a workload.
    """
    prefix, report = f"{spec.cluster}/", observation_resource(spec.cluster)
    return bool(spec.cluster) and any(n.startswith(prefix) and n != report for n in observed)


def _admit(
    spec: ReplicaSpec,
    previous_status: Mapping,
    observed: Mapping[str, ObservedObject],
    now: datetime,
    given: AdmissionInput | None,
) -> admission.Verdict | None:
    if given is None:
        return None
    problem = given.problem
    if problem is None and (spec.defects or spec.invalid):
        problem = "its spec is invalid"
    return admission.judge(
        given.mine,
        given.placement,
        given.cluster,
        given.others,
        now,
        previous=record_from_status(previous_status),
        has_workloads=_has_workloads(spec, observed),
        problem=problem,
    )


def _observed_report(obj: ObservedObject | None) -> pods_scheduled.Source:
    if obj is None or obj.remote is None:
        return pods_scheduled.NOT_REPORTED
    return pods_scheduled.parse_report(obj.remote.get("status"))
