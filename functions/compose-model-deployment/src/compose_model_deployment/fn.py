"""The wire shell of compose-model-deployment.

Reads the RunFunctionRequest (the composite, its observed replicas, the
required resources in three states: not fetched yet, fetched and empty,
present), hands them and `now` to `decision.decide`, and translates the
outcome it returns to the wire:

    Planned  the desired ModelReplicas, the deployment's status, and the
             conditions and events `report.of_plan` returns as values;
    Kept     every observed ModelReplica re-emitted unchanged, the status
             they imply, and `report.kept_as_is`: bad or missing input never
             deletes running work, and readiness is judged on the kept replicas.

No scheduling arithmetic lives here, and no readiness rule either:
`readiness` decides whether the deployment is Ready, `report` says it as
`ReplicasReady`, and this shell also writes it as `desired.composite.ready`,
which Crossplane turns into the XR's `Ready`.
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
from modelplane_common import labels, logs
from modelplane_common.guard import guarded
from modelplane_common.inputs import status_of
from modelplane_common.respond import emit
from modelplane_common.timeutil import format_time

from compose_model_deployment import readers, report, writer
from compose_model_deployment.decision import CLUSTERS, REPLICAS, Fetched, Kept, Planned, decide
from compose_model_deployment.placement import Change, Matcher, Plan

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


def _fetched(req: fnv1.RunFunctionRequest) -> Fetched:
    """The required resources; a kind Crossplane has not fetched yet is None."""
    required = req.required_resources
    clusters = required[CLUSTERS].items if CLUSTERS in required else None
    replicas = required[REPLICAS].items if REPLICAS in required else None
    return Fetched(
        clusters=(
            (readers.integral(resource.struct_to_dict(item.resource)) for item in clusters)
            if clusters is not None
            else None
        ),
        replicas=(item.resource for item in replicas) if replicas is not None else None,
        no_clusters=clusters is not None and not clusters,
    )


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
    own_observed = _own_observed(req)
    outcome = decide(xr, own_observed, _fetched(req), now, matcher, laps)
    if outcome.cluster_labels is not None:
        _require(rsp, CLUSTERS, "InferenceCluster", outcome.cluster_labels)
        _require(rsp, REPLICAS, "ModelReplica", {})
    if isinstance(outcome, Kept):
        _write_kept(rsp, xr, own_observed, outcome)
        log.debug(
            "nothing planned, every replica kept",
            reason=outcome.reason,
            message=outcome.message,
            kept=len(own_observed),
        )
        return rsp
    _write_plan(rsp, xr, own_observed, outcome)
    laps.lap("write")
    if timings is not None:
        timings.update(laps.seconds)
    log.debug(
        "planned",
        **_summary(outcome.plan),
        input_problems=len(outcome.notes),
        **laps.as_fields(),
    )
    return rsp


def _write_kept(
    rsp: fnv1.RunFunctionResponse, xr: Mapping, own_observed: Mapping[str, dict], kept: Kept
) -> None:
    """Every observed replica exactly as it is, the status they imply, and why."""
    ready = 0
    for key, obj in own_observed.items():
        rsp.desired.resources[key].resource.update(writer.unchanged(obj))
        ready += 1 if readers.replica_ready(obj) else 0
    _set_status(rsp, writer.kept_status(status_of(xr), kept.desired, len(own_observed), ready))
    _emit(
        rsp,
        report.kept_as_is(
            desired=kept.desired,
            kept=len(own_observed),
            kept_ready=ready,
            was_ready=readers.was_ready(xr),
            status=kept.status,
            reason=kept.reason,
            message=kept.message,
            warn=kept.warn,
        ),
    )


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


def _write_plan(
    rsp: fnv1.RunFunctionResponse, xr: Mapping, own_observed: Mapping[str, dict], planned: Planned
) -> None:
    """The planned replicas, every other observed resource kept, the status and the report."""
    deployment, plan, absences = planned.deployment, planned.plan, planned.absences
    for replica in plan.replicas:
        key = writer.resource_name(replica.index)
        if replica.change in (Change.STRANDED, Change.HELD) and key in own_observed:
            desired = writer.unchanged(own_observed[key])
        else:
            desired = writer.model_replica(deployment, replica)
        rsp.desired.resources[key].resource.update(desired)
    # Observed resources that are not replicas of ours are kept, never dropped.
    written = {writer.resource_name(r.index) for r in plan.replicas}
    removed = {writer.resource_name(r.index) for r in plan.removed}
    for key, obj in own_observed.items():
        if key not in written and key not in removed:
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
    replicas = status_of(xr).get("replicas")
    _emit(
        rsp,
        report.of_plan(
            plan,
            previous_scheduled=replicas.get("scheduled") if isinstance(replicas, Mapping) else None,
            was_ready=readers.was_ready(xr),
            notes=list(planned.notes),
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
