"""The wire shell of compose-model-deployment.

Reads the RunFunctionRequest, resolves the required resources (three states:
not fetched yet, fetched and empty, present), hands typed inputs and `now`
to the pure core (`placement.plan`), and writes the desired ModelReplicas,
the deployment's status, and the conditions and events the pure `report`
returns as values. No scheduling arithmetic lives here, and no readiness
rule either: `readiness` decides whether the deployment is Ready, `report`
says it as `ReplicasReady`, and this shell also writes it as
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
from modelplane_common.outcome import emit
from modelplane_common.timeutil import format_time

from compose_model_deployment import absence, placement, readers, report, writer
from compose_model_deployment.placement import Change, Inputs, InvalidSelector, Matcher, Plan

CLUSTERS = "inference-clusters"
REPLICAS = "model-replicas"
SCHEDULED = report.SCHEDULED
READY = report.READY
INPUTS = report.INPUTS


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


def _emit(rsp: fnv1.RunFunctionResponse, said: report.Report) -> None:
    """Write a report: its conditions and events, and its verdict as the XR's own Ready."""
    rsp.desired.composite.ready = fnv1.READY_TRUE if said.ready else fnv1.READY_FALSE
    emit(rsp, said.conditions, said.events)


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
        rsp.desired.resources[key].resource.update(writer.unchanged(obj))
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
    _emit(
        rsp,
        report.kept_as_is(
            desired=desired,
            kept=len(own),
            kept_ready=ready,
            was_ready=readers.was_ready(xr),
            status=status,
            reason=reason,
            message=message,
            warn=warn,
        ),
    )
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

    try:
        read = readers.read_inputs(
            xr,
            spec,
            (readers.integral(resource.struct_to_dict(item.resource)) for item in cluster_items),
            own_observed,
            (item.resource for item in req.required_resources[REPLICAS].items),
        )
    except readers.InvalidOwnReplica as err:
        return _pass_through(
            rsp,
            xr,
            own_observed,
            desired=spec.replicas,
            status="False",
            reason="InvalidReplica",
            message=f"{err}; every replica is kept as it is"[:1024],
            warn=True,
            log=log,
        )
    notes = list(read.notes)
    absences = absence.judge(
        (r.cluster for r in read.own),
        (c.name for c in read.clusters),
        read.unreadable,
        read.remembered,
        now,
        spec.missing_cluster_grace,
    )
    index = read.index
    laps.lap("read")

    try:
        plan = placement.plan(
            Inputs(spec, read.clusters, read.own, read.failed, now, absences.held),
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
        key = writer.resource_name(replica.index)
        if replica.change in (Change.STRANDED, Change.HELD) and key in own_observed:
            desired = writer.unchanged(own_observed[key])
        else:
            desired = writer.model_replica(deployment, replica)
        rsp.desired.resources[key].resource.update(desired)
    # Observed resources that are not replicas of ours are kept, never dropped.
    planned = {writer.resource_name(r.index) for r in plan.replicas}
    removed = {writer.resource_name(r.index) for r in plan.removed}
    for key, obj in own_observed.items():
        if key not in planned and key not in removed:
            rsp.desired.resources[key].resource.update(writer.unchanged(obj))
    status = writer.status(plan)
    # Remembered only while a replica still runs there after this pass.
    still_used = {r.cluster for r in plan.replicas}
    status["missingClusters"] = [
        {"name": m.name, "since": format_time(m.since)}
        for m in absences.missing
        if m.name in still_used
    ]
    _set_status(rsp, status)
    observed_status = xr.get("status") if isinstance(xr.get("status"), Mapping) else {}
    replicas = observed_status.get("replicas") if isinstance(observed_status, Mapping) else None
    _emit(
        rsp,
        report.of_plan(
            plan,
            previous_scheduled=replicas.get("scheduled") if isinstance(replicas, Mapping) else None,
            was_ready=readers.was_ready(xr),
            notes=notes,
        ),
    )


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
