"""The wire shell of compose-model-deployment.

Reads the RunFunctionRequest, resolves the required resources (three states:
not fetched yet, fetched and empty, present), hands typed inputs and `now`
to the pure core (`placement.plan`), and writes the desired ModelReplicas,
the deployment's status, conditions and events. No scheduling arithmetic
lives here, and no readiness rule either: `readiness` decides whether the
deployment is Ready and this shell writes it both as `ReplicasReady` and as
`desired.composite.ready`, which Crossplane turns into the XR's `Ready`.

Whenever the inputs cannot be trusted (the deployment does not validate,
the clusters or replicas are not fetched yet, no cluster is selected, a CEL
selector does not compile), the observed ModelReplicas are re-emitted
unchanged: bad or missing input never deletes running work, and the
deployment's readiness is judged on those kept replicas.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, MutableMapping
from datetime import UTC, datetime
from typing import Any

import grpc
from crossplane.function import logging, resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane_common import inputs, labels, logs
from modelplane_common.guard import guarded
from modelplane_common.timeutil import format_time

from compose_model_deployment import absence, compose, placement, readers, readiness
from compose_model_deployment.diagnosis import NOTHING_CHECKED
from compose_model_deployment.placement import Change, Inputs, InvalidSelector, Matcher, Plan

CLUSTERS = "inference-clusters"
REPLICAS = "model-replicas"
SCHEDULED = "ReplicasScheduled"
READY = "ReplicasReady"
INPUTS = "InputsValid"
MAX_NOTE_EVENTS = 5


def default_matcher() -> Matcher:
    from modelplane_common.cel.devices import match_requests

    return match_requests


def _require(rsp: fnv1.RunFunctionResponse, name: str, kind: str, match: Mapping[str, str]) -> None:
    selector = fnv1.ResourceSelector(api_version=labels.API_VERSION, kind=kind)
    # An empty matchLabels must still be SET: it is how a selector says "all of them".
    selector.match_labels.SetInParent()
    selector.match_labels.labels.update(dict(match))
    rsp.requirements.resources[name].CopyFrom(selector)


def _own_observed(req: fnv1.RunFunctionRequest) -> dict[str, dict]:
    return {
        key: readers.integral(resource.struct_to_dict(observed.resource))
        for key, observed in sorted(req.observed.resources.items())
        if key.startswith(readers.RESOURCE_PREFIX)
    }


def _set_status(rsp: fnv1.RunFunctionResponse, status: dict) -> None:
    resource.update(rsp.desired.composite, {"status": status})


def _ready(rsp: fnv1.RunFunctionResponse, judged: readiness.Readiness) -> resource.Condition:
    """Write the judged readiness as the XR's Ready; return it as the ReplicasReady condition."""
    rsp.desired.composite.ready = fnv1.READY_TRUE if judged.ready else fnv1.READY_FALSE
    return resource.Condition(
        READY, "True" if judged.ready else "False", judged.reason, judged.message
    )


def _count(raw: object) -> int | None:
    """spec.replicas when it is a readable count (bool is an int to Python, not to us)."""
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else None


def _pass_through(
    rsp: fnv1.RunFunctionResponse,
    xr: Mapping,
    own: Mapping[str, dict],
    *,
    desired: int | None,
    status: str,
    reason: str,
    message: str,
    warn: bool,
    log: Any = logs.QUIET,
) -> fnv1.RunFunctionResponse:
    """Keep every observed replica exactly as it is and say why nothing was planned."""
    log.debug("nothing planned, every replica kept", reason=reason, message=message, kept=len(own))
    ready = 0
    for key, obj in own.items():
        rsp.desired.resources[key].resource.update(compose.unchanged(obj))
        ready += 1 if readers.replica_ready(obj) else 0
    observed_status = xr.get("status") if isinstance(xr.get("status"), Mapping) else {}
    assert isinstance(observed_status, Mapping)
    kept_status: dict = {
        "replicas": {
            "desired": desired if desired is not None else len(own),
            "scheduled": len(own),
            "ready": ready,
        }
    }
    # The memories are passed through as they are: this pass decided nothing.
    for memory in ("failedPlacements", "missingClusters"):
        if isinstance(observed_status.get(memory), list):
            kept_status[memory] = list(observed_status[memory])
    _set_status(rsp, kept_status)
    if desired is None:
        judged = readiness.carried(readers.was_ready(xr), len(own), ready)
    else:
        judged = readiness.of_replicas(desired, ready)
    response.set_conditions(
        rsp, resource.Condition(SCHEDULED, status, reason, message), _ready(rsp, judged)
    )
    if warn:
        response.warning(rsp, f"{reason}: {message}")
    return rsp


def run_function(
    req: fnv1.RunFunctionRequest,
    now: datetime,
    matcher: Matcher,
    timings: MutableMapping[str, float] | None = None,
    log: Any = logs.QUIET,
) -> fnv1.RunFunctionResponse:
    """One reconcile. `timings`, when given, receives seconds per phase.

    `log` is the request's logger (logs.for_request): the plan summary and
    the phase timings go to it at debug level.
    """
    laps = logs.Laps()
    rsp = response.to(req)
    xr = readers.integral(resource.struct_to_dict(req.observed.composite.resource))
    assert isinstance(xr, dict)
    # A composite that is not even an object cannot be reasoned about: Fatal (guard.py).
    inputs.mapping(xr.get("metadata"), "metadata")
    raw_replicas = inputs.mapping(xr.get("spec"), "spec").get("replicas")
    own_observed = _own_observed(req)
    try:
        deployment = readers.read_deployment(xr)
    except ValueError as err:
        return _pass_through(
            rsp,
            xr,
            own_observed,
            desired=_count(raw_replicas),
            status="False",
            reason="InvalidDeployment",
            message=str(err)[:1024],
            warn=True,
            log=log,
        )
    spec = deployment.spec

    _require(rsp, CLUSTERS, "InferenceCluster", deployment.cluster_labels)
    _require(rsp, REPLICAS, "ModelReplica", {})
    if CLUSTERS not in req.required_resources or REPLICAS not in req.required_resources:
        missing = [n for n in (CLUSTERS, REPLICAS) if n not in req.required_resources]
        return _pass_through(
            rsp,
            xr,
            own_observed,
            desired=spec.replicas,
            status="Unknown",
            reason="WaitingForInputs",
            message=f"waiting for Crossplane to fetch {', '.join(missing)}",
            warn=False,
            log=log,
        )
    cluster_items = req.required_resources[CLUSTERS].items
    if not cluster_items:
        return _pass_through(
            rsp,
            xr,
            own_observed,
            desired=spec.replicas,
            status="False",
            reason="NoClusters",
            message=f"no InferenceCluster matches clusterSelector {deployment.cluster_labels}; "
            "existing replicas are kept as they are",
            warn=True,
            log=log,
        )

    notes: list[str] = []
    clusters = []
    unreadable: dict[str, str] = {}
    for item in cluster_items:
        try:
            cluster, cluster_notes = readers.read_cluster(
                readers.integral(resource.struct_to_dict(item.resource))
            )
        except readers.UnreadableCluster as err:
            unreadable[err.name] = str(err)
            notes.append(f"InferenceCluster {err.name} is invalid: {err}")
            continue
        except inputs.InvalidInput as err:
            notes.append(str(err))
            continue
        clusters.append(cluster)
        notes.extend(cluster_notes)
    own = []
    for key, obj in own_observed.items():
        try:
            replica, replica_notes = readers.read_own_replica(key, obj, spec)
        except ValueError as err:
            return _pass_through(
                rsp,
                xr,
                own_observed,
                desired=spec.replicas,
                status="False",
                reason="InvalidReplica",
                message=f"{err}; every replica is kept as it is"[:1024],
                warn=True,
            )
        notes.extend(replica_notes)
        if replica is not None:
            own.append(replica)
    failed, failed_notes = readers.read_failed_placements(xr)
    notes.extend(failed_notes)
    remembered, missing_notes = readers.read_missing_clusters(xr)
    notes.extend(missing_notes)
    absences = absence.judge(
        (r.cluster for r in own),
        (c.name for c in clusters),
        unreadable,
        remembered,
        now,
        spec.missing_cluster_grace,
    )
    index = readers.ReplicaIndex(
        (item.resource for item in req.required_resources[REPLICAS].items),
        (c.name for c in clusters),
        {(spec.namespace, r.name) for r in own},
        (spec.namespace, spec.name),
    )
    laps.lap("read")

    try:
        plan = placement.plan(
            Inputs(spec, tuple(clusters), tuple(own), failed, now, absences.held),
            index.charges_for,
            matcher,
        )
    except InvalidSelector as err:
        return _pass_through(
            rsp,
            xr,
            own_observed,
            desired=spec.replicas,
            status="False",
            reason="InvalidSelector",
            message=str(err)[:1024],
            warn=True,
            log=log,
        )
    notes.extend(index.notes)
    laps.lap("schedule")

    _write(rsp, xr, deployment, plan, own_observed, notes, absences)
    laps.lap("write")
    if timings is not None:
        timings.update(laps.seconds)
    log.debug("planned", **_summary(plan), input_problems=len(notes), **laps.as_fields())
    return rsp


def _summary(plan: Plan) -> dict[str, object]:
    """The plan in a few log fields: counts, never one line per replica."""
    changes = Counter(str(r.change) for r in plan.replicas)
    return {
        "desired": plan.desired,
        "scheduled": plan.scheduled,
        "ready": plan.ready,
        "changes": dict(sorted(changes.items())),
        "removed": len(plan.removed),
        "healed": len(plan.healed),
        "unplaced": plan.diagnosis.summary() if plan.diagnosis is not None else "",
    }


def _write(
    rsp: fnv1.RunFunctionResponse,
    xr: Mapping,
    deployment: readers.DeploymentInput,
    plan: Plan,
    own_observed: Mapping[str, dict],
    notes: list[str],
    absences: absence.Absences,
) -> None:
    for replica in plan.replicas:
        key = compose.resource_name(replica.index)
        if replica.change in (Change.STRANDED, Change.HELD) and key in own_observed:
            desired = compose.unchanged(own_observed[key])
        else:
            desired = compose.model_replica(deployment, replica)
        rsp.desired.resources[key].resource.update(desired)
    # Observed resources that are not replicas of ours are kept, never dropped.
    planned = {compose.resource_name(r.index) for r in plan.replicas}
    removed = {compose.resource_name(r.index) for r in plan.removed}
    for key, obj in own_observed.items():
        if key not in planned and key not in removed:
            rsp.desired.resources[key].resource.update(compose.unchanged(obj))
    status = compose.status(plan)
    # Remembered only while a replica still runs there after this pass.
    still_used = {r.cluster for r in plan.replicas}
    status["missingClusters"] = [
        {"name": m.name, "since": format_time(m.since)}
        for m in absences.missing
        if m.name in still_used
    ]
    _set_status(rsp, status)
    _conditions(rsp, xr, plan, notes)
    _events(rsp, xr, plan, notes)


def _judge_readiness(xr: Mapping, plan: Plan) -> readiness.Readiness:
    if not plan.held:
        return readiness.of_replicas(plan.desired, plan.ready)
    held_ready = sum(1 for r in plan.held if r.previous is not None and r.previous.ready)
    return readiness.while_held(
        readers.was_ready(xr), plan.desired, plan.ready, len(plan.held), held_ready
    )


def _why_unplaced(plan: Plan) -> str:
    """The plan's no-fit diagnosis as text, formatted here and nowhere else."""
    return (plan.diagnosis or NOTHING_CHECKED).summary()


def _shortfall(plan: Plan) -> str:
    """`ReplicasScheduled`'s message and its event when capacity is short."""
    return f"{plan.scheduled} of {plan.desired} replicas placed: {_why_unplaced(plan)}"[:1024]


def _conditions(rsp: fnv1.RunFunctionResponse, xr: Mapping, plan: Plan, notes: list[str]) -> None:
    if plan.held:
        whys = sorted({r.why for r in plan.held})
        unplaced = plan.missing - len(plan.held)
        capacity = (
            f"; {unplaced} more could not be placed: {_why_unplaced(plan)}" if unplaced > 0 else ""
        )
        scheduled = resource.Condition(
            SCHEDULED,
            "False",
            "ClusterUnavailable",
            f"{len(plan.held)} replica(s) kept where they are, not counted as scheduled: "
            f"{'; '.join(whys)}; {plan.scheduled} of {plan.desired} placed{capacity}"[:1024],
        )
    elif plan.missing:
        scheduled = resource.Condition(
            SCHEDULED,
            "False",
            "InsufficientCapacity",
            _shortfall(plan),
        )
    else:
        scheduled = resource.Condition(
            SCHEDULED,
            "True",
            "AllReplicasScheduled",
            f"{plan.scheduled} of {plan.desired} replicas placed",
        )
    ready = _ready(rsp, _judge_readiness(xr, plan))
    if notes:
        inputs = resource.Condition(
            INPUTS, "False", "DegradedInputs", f"{len(notes)} problem(s): " + "; ".join(notes)[:990]
        )
    else:
        inputs = resource.Condition(INPUTS, "True", "InputsValid", "")
    response.set_conditions(rsp, scheduled, ready, inputs)


def _where(cluster: str, pools: tuple[str, ...]) -> str:
    return f"{cluster}/{','.join(pools)}"


def _events(rsp: fnv1.RunFunctionResponse, xr: Mapping, plan: Plan, notes: list[str]) -> None:
    for healed in plan.healed:
        response.warning(
            rsp,
            f"replica {healed.replica} {healed.why}; avoiding "
            f"{_where(healed.cluster, healed.pools)}"
            " and re-placing it",
        )
    for r in plan.replicas:
        if r.change is Change.PLACED:
            response.normal(rsp, f"placed replica {r.name} on {_where(r.cluster, r.pools)}")
        elif r.change is Change.MOVED and r.previous is not None:
            response.normal(
                rsp,
                f"moved replica {r.name} from {_where(r.previous.cluster, r.previous.pools)} to "
                f"{_where(r.cluster, r.pools)}: {r.why}",
            )
        elif r.change is Change.RESHAPED and r.previous is not None:
            response.normal(
                rsp,
                f"updated replica {r.name} on {_where(r.cluster, r.pools)} "
                "for the edited engine shape",
            )
        elif r.change is Change.HELD:
            response.warning(rsp, f"replica {r.name} is kept on {r.cluster}: {r.why}")
        elif r.change is Change.STRANDED:
            response.warning(
                rsp,
                f"replica {r.name} must move ({r.why}) but no other cluster "
                "fits it; it is left where it is",
            )
    for gone in plan.removed:
        response.normal(rsp, f"removed replica {gone.name} from {gone.cluster} (scale down)")
    status = xr.get("status") if isinstance(xr.get("status"), Mapping) else {}
    replicas = status.get("replicas") if isinstance(status, Mapping) else None
    previous = replicas.get("scheduled") if isinstance(replicas, Mapping) else None
    if plan.missing > len(plan.held) and previous != plan.scheduled:
        response.warning(rsp, f"InsufficientCapacity: {_shortfall(plan)}")
    for note in notes[:MAX_NOTE_EVENTS]:
        response.warning(rsp, note)
    if len(notes) > MAX_NOTE_EVENTS:
        response.warning(rsp, f"and {len(notes) - MAX_NOTE_EVENTS} more input problem(s)")


class FunctionRunner(grpcv1.FunctionRunnerServiceServicer):
    """The gRPC servicer: the clock and the matcher are the only things injected."""

    def __init__(
        self,
        matcher: Matcher | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.log = logging.get_logger()
        self._matcher = matcher
        self._clock = clock

    async def RunFunction(
        self, req: fnv1.RunFunctionRequest, _: grpc.aio.ServicerContext
    ) -> fnv1.RunFunctionResponse:
        matcher = self._matcher or default_matcher()
        log = logs.for_request(self.log, req)
        return guarded(req, lambda: run_function(req, self._clock(), matcher, log=log), log)
