"""The wire shell of compose-inference-cluster.

Translates a RunFunctionRequest into `core.decide` inputs (the XR's name,
spec and status, every observed composed resource read once, `now` and the
function's own version) and its Decision back into desired resources with
their readiness, the XR's status and readiness, conditions, events and
when to be called again (`meta.ttl`), and counts it (`measured`,
modelplane_common.metrics). No decisions are made here; see core.py for
the model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from importlib import metadata
from typing import Any

import grpc
from crossplane.function import logging, resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane_common import inputs, logs, metrics
from modelplane_common.composed import ObservedObject, observed_object
from modelplane_common.guard import DEADLINE, served
from modelplane_common.outcome import log_fields
from modelplane_common.respond import emit

from compose_inference_cluster import core

# The function's own version, the workspace's (modelplane_devtools.version keeps every
# member's pyproject.toml equal to it): the tag of the agent image it installs.
VERSION = metadata.version("compose-inference-cluster")
NAME = "compose-inference-cluster"


def observed(req: fnv1.RunFunctionRequest) -> dict[str, ObservedObject]:
    """Every observed composed resource, read once."""
    return {
        name: observed_object(resource.struct_to_dict(r.resource))
        for name, r in req.observed.resources.items()
    }


def _summary(decision: core.Decision) -> dict[str, object]:
    """The decision in a few log fields: pools by how their capacity is read."""
    pools = Counter(v.reason for v in decision.verdicts)
    return {
        "pools": dict(sorted(pools.items())),
        **log_fields(decision.conditions, decision.events),
    }


def measured(name: str, decision: core.Decision) -> metrics.Decided:
    """What the pass decided, for the metrics: its conditions and each pool's verdict."""
    return metrics.Decided(
        conditions=decision.conditions,
        pools=tuple((name, v.reason) for v in decision.verdicts),
    )


class FunctionRunner(grpcv1.FunctionRunnerServiceServicer):
    """Runs compose-inference-cluster."""

    def __init__(
        self,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        version: str = VERSION,
        deadline: timedelta = DEADLINE,
    ) -> None:
        self.log = logging.get_logger()
        self.clock = clock
        self.version = version
        self.deadline = deadline

    async def RunFunction(
        self, req: fnv1.RunFunctionRequest, _: grpc.aio.ServicerContext | None = None
    ) -> fnv1.RunFunctionResponse:
        log = logs.for_request(self.log, req)
        return await served(req, lambda: self._run(req, log), log, self.deadline, function=NAME)

    def _run(self, req: fnv1.RunFunctionRequest, log: Any) -> fnv1.RunFunctionResponse:
        laps = logs.Laps()
        rsp = response.to(req)
        xr = resource.struct_to_dict(req.observed.composite.resource)
        # A composite that is not even an object cannot be reasoned about: Fatal.
        name = inputs.name(inputs.mapping(xr.get("metadata"), "metadata").get("name"))
        spec = inputs.mapping(xr.get("spec"), "spec")
        previous = inputs.status_of(xr)
        resources = observed(req)
        laps.lap("read")
        decision = core.decide(name, spec, resources, previous, self.clock(), self.version)
        laps.lap("decide")

        for resource_name, wanted in decision.desired.items():
            desired = rsp.desired.resources[resource_name]
            resource.update(desired, dict(wanted.body))
            if wanted.ready:
                desired.ready = fnv1.READY_TRUE
        for resource_name in decision.kept:
            log.info("keeping composed resource despite missing input", name=resource_name)
        resource.update(rsp.desired.composite, {"status": decision.status})
        rsp.desired.composite.ready = fnv1.READY_TRUE if decision.ready else fnv1.READY_FALSE
        emit(rsp, decision.conditions, decision.events)
        rsp.meta.ttl.FromTimedelta(decision.requeue_after)
        metrics.record(NAME, measured(name, decision))
        laps.lap("write")
        log.debug("decided", **_summary(decision), **laps.as_fields())
        return rsp
