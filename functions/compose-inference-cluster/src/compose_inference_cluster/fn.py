"""The wire shell of compose-inference-cluster.

Translates a RunFunctionRequest into `core.decide` inputs and its Decision
back into desired resources, status, conditions and events. No decisions are
made here; see core.py for the model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import grpc
from crossplane.function import logging, resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane_common import inputs, logs
from modelplane_common.guard import guarded
from modelplane_common.outcome import log_fields, unchanged
from modelplane_common.respond import emit

from compose_inference_cluster import core


def _remote(observed: fnv1.Resource) -> dict | None:
    """The workload-cluster object a provider-kubernetes Object last saw, if any."""
    status = resource.struct_to_dict(observed.resource).get("status")
    at_provider = status.get("atProvider") if isinstance(status, dict) else None
    manifest = at_provider.get("manifest") if isinstance(at_provider, dict) else None
    return manifest if isinstance(manifest, dict) and manifest else None


def _is_ready(observed: fnv1.Resource) -> bool:
    return inputs.condition_status(resource.struct_to_dict(observed.resource), "Ready") == "True"


def observed_state(req: fnv1.RunFunctionRequest) -> core.ObservedState:
    resources = req.observed.resources
    reports: dict[str, dict | None] = {}
    for name, observed in resources.items():
        if name.startswith(core.POOL_PREFIX):
            remote = _remote(observed)
            status = remote.get("status") if remote else None
            reports[name[len(core.POOL_PREFIX) :]] = status if isinstance(status, dict) else None
    agent = resources.get(core.AGENT_CRD)
    return core.ObservedState(
        agent_crd_seen=agent is not None and _remote(agent) is not None,
        pool_reports=reports,
    )


def _summary(decision: core.Decision) -> dict[str, object]:
    """The decision in a few log fields: pools by how their capacity is read."""
    pools = Counter(v.reason for v in decision.verdicts)
    return {
        "pools": dict(sorted(pools.items())),
        **log_fields(decision.conditions, decision.events),
    }


class FunctionRunner(grpcv1.FunctionRunnerServiceServicer):
    """Runs compose-inference-cluster."""

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.log = logging.get_logger()
        self.clock = clock

    async def RunFunction(
        self, req: fnv1.RunFunctionRequest, _: grpc.aio.ServicerContext | None = None
    ) -> fnv1.RunFunctionResponse:
        log = logs.for_request(self.log, req)
        return guarded(req, lambda: self._run(req, log), log)

    def _run(self, req: fnv1.RunFunctionRequest, log: Any) -> fnv1.RunFunctionResponse:
        laps = logs.Laps()
        rsp = response.to(req)
        xr = resource.struct_to_dict(req.observed.composite.resource)
        # A composite that is not even an object cannot be reasoned about: Fatal.
        name = inputs.name(inputs.mapping(xr.get("metadata"), "metadata").get("name"))
        spec = inputs.mapping(xr.get("spec"), "spec")
        previous = inputs.status_of(xr)
        state = observed_state(req)
        laps.lap("read")
        decision = core.decide(name, spec, state, previous, self.clock())
        laps.lap("decide")

        for resource_name, body in core.desired_items(decision):
            desired = rsp.desired.resources[resource_name]
            resource.update(desired, body)
            observed = req.observed.resources.get(resource_name)
            if resource_name in (core.PROVIDER_CONFIG, core.AGENT_CRD):
                # Neither has a workload to wait for; a missing agent CRD is
                # a legitimate state (pools counted by their fallback), not an outage.
                desired.ready = fnv1.READY_TRUE
            elif observed is not None and _is_ready(observed):
                desired.ready = fnv1.READY_TRUE

        for resource_name in sorted(
            core.kept_for_safety(set(req.observed.resources), decision, spec)
        ):
            kept = resource.struct_to_dict(req.observed.resources[resource_name].resource)
            resource.update(rsp.desired.resources[resource_name], unchanged(kept))
            log.info("keeping composed resource despite missing input", name=resource_name)

        resource.update(rsp.desired.composite, {"status": decision.status})
        pools_ready = {
            name: name in req.observed.resources and _is_ready(req.observed.resources[name])
            for name in rsp.desired.resources
            if name.startswith(core.POOL_PREFIX)
        }
        ready = core.ready(decision, pools_ready)
        rsp.desired.composite.ready = fnv1.READY_TRUE if ready else fnv1.READY_FALSE
        emit(rsp, decision.conditions, decision.events)
        laps.lap("write")
        log.debug("decided", **_summary(decision), **laps.as_fields())
        return rsp
