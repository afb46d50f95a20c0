"""The wire shell of compose-model-replica.

Reads the RunFunctionRequest once into the core's typed inputs
(readers.py), hands them to `core.decide`, and writes the Outcome it returns
back: the resources to fetch next, the desired resources, the XR's status
and Ready, conditions, events and the requeue time, and counts it
(`measured`, modelplane_common.metrics). No decisions are made here; see
core.py for the model.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
from crossplane.function import logging, resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane_common import labels, logs, metrics
from modelplane_common.guard import DEADLINE, served
from modelplane_common.outcome import log_fields
from modelplane_common.requirements import ResourceRequirement, require
from modelplane_common.respond import emit

from compose_model_replica import core, readers
from compose_model_replica.readers import (
    CLUSTER_REQUIREMENT,
    DEPLOYMENT_REQUIREMENT,
    NAMESPACE_REPLICAS_REQUIREMENT,
    PENDING_REPLICAS_REQUIREMENT,
    QUOTAS_REQUIREMENT,
    REPLICAS_REQUIREMENT,
)

NAME = "compose-model-replica"

__all__ = [
    "CLUSTER_REQUIREMENT",
    "PENDING_REPLICAS_REQUIREMENT",
    "REPLICAS_REQUIREMENT",
    "FunctionRunner",
]


def _requirements(wanted: core.Requirements) -> tuple[ResourceRequirement, ...]:
    """What the core asks for, as the resources Crossplane fetches for the next call: the
    cluster by name, its ModelReplicas (only those still charged as pending, or all of
    them) by label, the ModelDeployment by name, and every ResourceQuota and, under a
    device quota, every ModelReplica of the namespace."""
    api, replica = labels.API_VERSION, labels.MODEL_REPLICA_KIND
    found: list[ResourceRequirement] = []
    if wanted.cluster:
        cluster = labels.INFERENCE_CLUSTER_KIND
        found.append(ResourceRequirement.by_name(CLUSTER_REQUIREMENT, api, cluster, wanted.cluster))
    if wanted.replicas_of:
        on_cluster = {labels.CLUSTER: labels.label_value(wanted.replicas_of)}
        if wanted.pending_only:
            pending = {**on_cluster, labels.CHARGE: labels.CHARGE_PENDING}
            found.append(
                ResourceRequirement.by_labels(PENDING_REPLICAS_REQUIREMENT, api, replica, pending)
            )
        else:
            found.append(
                ResourceRequirement.by_labels(REPLICAS_REQUIREMENT, api, replica, on_cluster)
            )
    if wanted.deployment:
        found.append(
            ResourceRequirement.by_name(
                DEPLOYMENT_REQUIREMENT,
                api,
                labels.MODEL_DEPLOYMENT_KIND,
                wanted.deployment,
                namespace=wanted.deployment_namespace,
            )
        )
    if wanted.quotas_of:
        found.append(
            ResourceRequirement.by_labels(
                QUOTAS_REQUIREMENT, "v1", "ResourceQuota", {}, namespace=wanted.quotas_of
            )
        )
        if wanted.namespace_replicas:
            found.append(
                ResourceRequirement.by_labels(
                    NAMESPACE_REPLICAS_REQUIREMENT, api, replica, {}, namespace=wanted.quotas_of
                )
            )
    return tuple(found)


def _write(rsp: fnv1.RunFunctionResponse, outcome: core.Outcome) -> None:
    require(rsp, *_requirements(outcome.requirements))
    for name, wanted in outcome.resources.items():
        desired = rsp.desired.resources[name]
        resource.update(desired, dict(wanted.body))
        if wanted.ready:
            desired.ready = fnv1.READY_TRUE
    resource.update(rsp.desired.composite, {"status": dict(outcome.status)})
    rsp.desired.composite.ready = fnv1.READY_TRUE if outcome.ready else fnv1.READY_FALSE
    emit(rsp, outcome.conditions, outcome.events)
    rsp.meta.ttl.FromTimedelta(outcome.requeue_after)


def measured(previous_status: object, outcome: core.Outcome) -> metrics.Decided:
    """What the pass decided, for the metrics: its conditions and, when it reached one,
    its admission verdict on its cluster (`previous_status` is the XR's as observed)."""
    before = previous_status.get("admission") if isinstance(previous_status, dict) else None
    return metrics.Decided(
        conditions=outcome.conditions,
        admission=metrics.reached_admission(
            outcome.requirements.cluster,
            before,
            outcome.status.get("admission"),
            outcome.conditions,
        ),
    )


class FunctionRunner(grpcv1.FunctionRunnerServiceServicer):
    """Runs compose-model-replica."""

    def __init__(
        self,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        deadline: timedelta = DEADLINE,
    ) -> None:
        self.log = logging.get_logger()
        self.clock = clock
        self.deadline = deadline

    async def RunFunction(
        self, req: fnv1.RunFunctionRequest, _: grpc.aio.ServicerContext | None = None
    ) -> fnv1.RunFunctionResponse:
        log = logs.for_request(self.log, req)
        return await served(req, lambda: self._run(req, log), log, self.deadline, function=NAME)

    def _run(self, req: fnv1.RunFunctionRequest, log: Any) -> fnv1.RunFunctionResponse:
        laps = logs.Laps()
        rsp = response.to(req)
        given = readers.read_request(req, self.clock())
        laps.lap("read")
        outcome = core.decide(given)
        laps.lap("decide")
        _write(rsp, outcome)
        for name in outcome.kept_unchanged:
            log.info("keeping composed resource despite a missing input", name=name)
        xr = resource.struct_to_dict(req.observed.composite.resource)
        metrics.record(NAME, measured(xr.get("status"), outcome))
        laps.lap("write")
        log.debug(
            "decided",
            **log_fields(outcome.conditions, outcome.events),
            kept=len(outcome.kept_unchanged),
            **laps.as_fields(),
        )
        return rsp
