"""The wire shell of compose-model-deployment.

Reads the RunFunctionRequest once into typed inputs (`readers.read_request`:
the composite, its observed replicas, the required resources in three
states: not fetched yet, fetched and empty, present), hands them to
`decision.plan`, and translates the outcome it returns to the wire: the requirements (the fleet by
`cluster_labels`, or the footprint's clusters by name, steady.py), the
desired composed resources, the deployment's status, and the report's
conditions and events (`modelplane_common.respond.emit`), its readiness
also as `desired.composite.ready`, which Crossplane turns into the XR's
`Ready`, and when to be called again (`meta.ttl`). Nothing is decided
here: the outcome carries all of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, MutableMapping
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
from crossplane.function import logging, resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane_common import labels, logs, metrics
from modelplane_common.guard import DEADLINE, served
from modelplane_common.requirements import ResourceRequirement, require
from modelplane_common.respond import emit

from compose_model_deployment import fleet_reads, readers, report, steady
from compose_model_deployment.decision import (
    CLUSTERS,
    PENDING_REPLICAS,
    Outcome,
    Unplanned,
    plan,
)
from compose_model_deployment.placement import PODS_NOT_CREATED, Matcher, Plan

NAME = "compose-model-deployment"
SCHEDULED = report.SCHEDULED
READY = report.READY
INPUTS = report.INPUTS


def default_matcher() -> Matcher:
    from modelplane_common.cel.devices import match_requests

    return match_requests


def _require(rsp: fnv1.RunFunctionResponse, name: str, kind: str, match: Mapping[str, str]) -> None:
    require(rsp, ResourceRequirement.by_labels(name, labels.API_VERSION, kind, match))


def _require_footprint(rsp: fnv1.RunFunctionResponse, clusters: tuple[str, ...]) -> None:
    """Each cluster the deployment's replicas run on, by name (steady.py)."""
    for cluster in clusters:
        name = steady.requirement_name(cluster)
        require(
            rsp, ResourceRequirement.by_name(name, labels.API_VERSION, "InferenceCluster", cluster)
        )


def _require_replicas(rsp: fnv1.RunFunctionResponse, reads: fleet_reads.Reads) -> None:
    """The pending ModelReplicas fleet-wide, every one of each cluster read whole, and,
    under a quota, every one of the namespace (fleet_reads.py)."""
    _require(rsp, PENDING_REPLICAS, "ModelReplica", {labels.CHARGE: labels.CHARGE_PENDING})
    for cluster in reads.whole:
        _require(
            rsp,
            fleet_reads.whole_requirement(cluster),
            "ModelReplica",
            {labels.CLUSTER: labels.label_value(cluster)},
        )
    if reads.namespace is not None:
        every = ResourceRequirement.by_labels(
            fleet_reads.NAMESPACE_REPLICAS,
            labels.API_VERSION,
            "ModelReplica",
            {},
            namespace=reads.namespace,
        )
        require(rsp, every)


def _write(rsp: fnv1.RunFunctionResponse, outcome: Outcome) -> None:
    """The outcome on the response, translated and nothing more."""
    if outcome.footprint is not None:
        _require_footprint(rsp, outcome.footprint)
    elif outcome.cluster_labels is not None:
        _require(rsp, CLUSTERS, "InferenceCluster", outcome.cluster_labels)
        _require_replicas(rsp, outcome.reads)
    require(rsp, *outcome.tenancy)
    for key, desired in outcome.resources.items():
        rsp.desired.resources[key].resource.update(desired)
    resource.update(rsp.desired.composite, {"status": outcome.status})
    rsp.desired.composite.ready = fnv1.READY_TRUE if outcome.said.ready else fnv1.READY_FALSE
    emit(rsp, outcome.said.conditions, outcome.said.events)
    rsp.meta.ttl.FromTimedelta(outcome.requeue_after)


# A healed replica's cause, by how placement.remember's `why` begins (unschedulable_too_long,
# overcommitted, pods_not_created): the condition of the replica that made it move.
_HEALING_CAUSES = (
    ("unschedulable since", "Unschedulable"),
    ("was not admitted on its cluster", "Overcommitted"),
    (PODS_NOT_CREATED, "NotCreated"),
)


def healing_cause(why: str) -> str:
    """Unschedulable, Overcommitted or NotCreated; `Other` for a reason none begins."""
    return next((cause for prefix, cause in _HEALING_CAUSES if why.startswith(prefix)), "Other")


def measured(outcome: Outcome) -> metrics.Decided:
    """What the pass decided, for the metrics: its conditions and, when it planned, each
    replica it placed, moved, reshaped or stranded, each pool the last replica without a
    place was refused, and each replica healed."""
    conditions = outcome.said.conditions
    if isinstance(outcome, Unplanned):
        return metrics.Decided(conditions=conditions)
    plan = outcome.plan
    return metrics.Decided(
        conditions=conditions,
        placements=tuple(
            (r.cluster, str(r.change))
            for r in plan.replicas
            if str(r.change) in metrics.PLACEMENT_CHANGES
        ),
        refusals=tuple((r.cluster, r.cause) for r in plan.diagnosis.refusals)
        if plan.diagnosis is not None
        else (),
        healed=tuple((h.cluster, healing_cause(h.why)) for h in plan.healed),
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
    outcome = decide(req, now, matcher, laps)
    _write(rsp, outcome)
    metrics.record(NAME, measured(outcome))
    if isinstance(outcome, Unplanned):
        log.debug(
            "nothing planned, every replica kept",
            requires=_next_inputs(outcome),
            reason=outcome.why.reason,
            message=outcome.why.message,
            kept=sum(1 for key in outcome.resources if key.startswith(readers.RESOURCE_PREFIX)),
        )
        return rsp
    laps.lap("write")
    if timings is not None:
        timings.update(laps.seconds)
    log.debug(
        "planned",
        requires=_next_inputs(outcome),
        **_summary(outcome.plan),
        input_problems=len(outcome.notes),
        **laps.as_fields(),
    )
    return rsp


def decide(
    req: fnv1.RunFunctionRequest, now: datetime, matcher: Matcher, laps: logs.Laps | None = None
) -> Outcome:
    """The request read once (readers.read_request), then planned on (decision.plan).
    Raises InvalidInput only when the composite is not an object with metadata and spec."""
    return plan(readers.read_request(req, now), matcher, laps)


def _next_inputs(outcome: Outcome) -> str:
    """What the response requires, for the log: the footprint, the fleet or nothing."""
    if outcome.footprint is not None:
        return "footprint"
    return "fleet" if outcome.cluster_labels is not None else "nothing"


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


class FunctionRunner(grpcv1.FunctionRunnerServiceServicer):
    """The gRPC servicer: the clock, the matcher and the deadline are the things injected."""

    def __init__(
        self,
        matcher: Matcher | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        deadline: timedelta = DEADLINE,
    ) -> None:
        self.log = logging.get_logger()
        self._matcher = matcher
        self._clock = clock
        self.deadline = deadline

    async def RunFunction(
        self, req: fnv1.RunFunctionRequest, _: grpc.aio.ServicerContext
    ) -> fnv1.RunFunctionResponse:
        matcher = self._matcher or default_matcher()
        log = logs.for_request(self.log, req)
        return await served(
            req,
            lambda: run_function(req, self._clock(), matcher, log=log),
            log,
            self.deadline,
            function=NAME,
        )
