"""The wire shell of compose-model-replica.

Translates a RunFunctionRequest into `core.decide` inputs (the XR, the
required InferenceCluster in one of three states, the observed Objects with
their remote status, and `now`) and its Decision back into desired
resources, status, conditions and events. No decisions are made here; see
core.py for the model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
from crossplane.function import logging, resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from google.protobuf import struct_pb2
from modelplane_common import inputs, labels, logs
from modelplane_common.capacity.admission import (
    current_verdict,
    placement_annotation,
    read_queued,
)
from modelplane_common.capacity.fleet import Cluster
from modelplane_common.capacity.readers import UnreadableCluster, get_str, get_struct, read_cluster
from modelplane_common.guard import guarded
from modelplane_common.outcome import log_fields
from modelplane_common.respond import emit
from modelplane_common.timeutil import parse_time_or_none

from compose_model_replica import core

CLUSTER_REQUIREMENT = "cluster"
# The cluster's ModelReplicas (label modelplane.ai/cluster), for admission.
REPLICAS_REQUIREMENT = "cluster-replicas"


def cluster_input(req: fnv1.RunFunctionRequest) -> core.ClusterInput:
    """Not fetched (no entry yet), fetched and absent (an empty entry), or found."""
    if CLUSTER_REQUIREMENT not in req.required_resources:
        return core.NotFetched()
    items = req.required_resources[CLUSTER_REQUIREMENT].items
    if not items:
        return core.Absent()
    return core.Found(resource.struct_to_dict(items[0].resource))


def decided(status: Mapping, metadata: Mapping) -> bool:
    """Whether the replica's verdict for its current placement is recorded (sticky)."""
    return current_verdict(status, metadata) is not None


def admission_input(
    req: fnv1.RunFunctionRequest, metadata: Mapping, cluster_name: str, cluster: core.ClusterInput
) -> core.AdmissionInput:
    """What admission reads, straight from the request (design/admission.md)."""
    composite: struct_pb2.Struct = req.observed.composite.resource
    mine = read_queued(composite, cluster_name)
    placement = placement_annotation(metadata)
    problem = None
    if placement and parse_time_or_none(placement) is None:
        problem = inputs.problem(
            f'metadata.annotations["{labels.PLACED_AT}"]', "must be an RFC 3339 time", placement
        )
    fleet_cluster: Cluster | None = None
    if isinstance(cluster, core.Found):
        try:
            fleet_cluster, _ = read_cluster(inputs.integral_object(cluster.cluster))
        except (UnreadableCluster, inputs.InvalidInput):
            fleet_cluster = None  # reported as ClusterInvalid; admission waits
    others = None
    if REPLICAS_REQUIREMENT in req.required_resources:
        others = tuple(
            read_queued(item.resource, cluster_name)
            for item in req.required_resources[REPLICAS_REQUIREMENT].items
            # The label selected them; the spec is what pins them to the cluster.
            if get_str(get_struct(item.resource, "spec"), "clusterName") == cluster_name
        )
    return core.AdmissionInput(mine, placement, fleet_cluster, others, problem)


def observed_object(observed: fnv1.Resource) -> core.ObservedObject:
    body = resource.struct_to_dict(observed.resource)
    status = body.pop("status", None)
    status = status if isinstance(status, dict) else {}
    synced = inputs.find_condition({"status": status}, "Synced")
    at_provider = status.get("atProvider")
    remote = at_provider.get("manifest") if isinstance(at_provider, dict) else None
    return core.ObservedObject(
        body=body,
        ready=inputs.condition_status({"status": status}, "Ready") == "True",
        synced={"True": True, "False": False}.get(str(synced.get("status"))),
        synced_message=str(synced.get("message") or ""),
        remote=remote if isinstance(remote, dict) and remote else None,
    )


class FunctionRunner(grpcv1.FunctionRunnerServiceServicer):
    """Runs compose-model-replica."""

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
        metadata = inputs.mapping(xr.get("metadata"), "metadata")
        inputs.name(metadata.get("name"))
        spec = inputs.mapping(xr.get("spec"), "spec")
        status = inputs.status_of(xr)
        cluster_name = spec.get("clusterName")
        if isinstance(cluster_name, str) and cluster_name:
            response.require_resources(
                rsp,
                CLUSTER_REQUIREMENT,
                labels.API_VERSION,
                labels.INFERENCE_CLUSTER_KIND,
                match_name=cluster_name,
            )
        if isinstance(cluster_name, str) and cluster_name and not decided(status, metadata):
            # Only until the verdict for this placement is reached: a decided replica
            # never reads its cluster's replicas again (design/admission.md, "Cost").
            response.require_resources(
                rsp,
                REPLICAS_REQUIREMENT,
                labels.API_VERSION,
                labels.MODEL_REPLICA_KIND,
                match_labels={labels.CLUSTER: cluster_name},
            )

        cluster = cluster_input(req)
        observed = {name: observed_object(r) for name, r in req.observed.resources.items()}
        admission = admission_input(
            req, metadata, cluster_name if isinstance(cluster_name, str) else "", cluster
        )
        laps.lap("read")
        decision = core.decide(
            str(metadata.get("name") or ""),
            str(metadata.get("namespace") or ""),
            spec,
            status,
            cluster,
            observed,
            self.clock(),
            admission,
        )
        laps.lap("decide")

        for name, wanted in decision.desired.items():
            desired = rsp.desired.resources[name]
            resource.update(desired, dict(wanted.body))
            if wanted.ready:
                desired.ready = fnv1.READY_TRUE
        for name in decision.kept:
            log.info("keeping composed resource despite a missing input", name=name)

        resource.update(rsp.desired.composite, {"status": decision.status})
        rsp.desired.composite.ready = fnv1.READY_TRUE if decision.ready else fnv1.READY_FALSE
        emit(rsp, decision.conditions, decision.events)
        if decision.retry_after is not None:
            # Honoured where realtime compositions requeue on the TTL; else the poll interval.
            rsp.meta.ttl.FromTimedelta(max(decision.retry_after, timedelta(seconds=1)))
        laps.lap("write")
        log.debug(
            "decided",
            **log_fields(decision.conditions, decision.events),
            kept=len(decision.kept),
            **laps.as_fields(),
        )
        return rsp
