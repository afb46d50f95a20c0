"""Wire to model: read a RunFunctionRequest once into the core's typed inputs (model.py).

One reader per kind:

    ModelReplica     the XR itself (`read_replica`): metadata, spec (spec.py
                     parses it engine by engine) and status read from the
                     dict; itself and its fellow replicas (`read_fellows`)
                     read straight from their Structs by
                     `capacity.admission.read_queued`, the reader the
                     scheduler uses, so every replica of a cluster sees the
                     same queue;
    InferenceCluster `read_cluster_input`: validated against the model
                     generated from its XRD and read into the capacity types
                     by `capacity.readers.read_cluster`, plus what only the
                     replica needs (provider config, agent presence);
    ModelDeployment  `read_deployment_input`: only its members' templates, by
                     engine name and member position, as the tenant wrote them
                     (templates.py uses one only when its digest is the replica's);
    Object           `read_observed`: its Ready and Synced conditions and the
                     remote object provider-kubernetes last saw.

Readers raise only `InvalidInput`, when the composite is not an object with
metadata.name and spec (guard.py makes that a Fatal result); everything
else malformed is read as what it is and judged by the core.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from google.protobuf import struct_pb2
from modelplane_common import (
    cluster_tenancy,
    currency,
    inputs,
    labels,
    orphans,
    remote_object,
    requeue,
)
from modelplane_common.capacity.admission import (
    Queued,
    placement_annotation,
    read_placement_time,
    read_queued,
    record_from_status,
)
from modelplane_common.capacity.fleet import Cluster
from modelplane_common.capacity.quota import DeviceQuota, read_device_quota
from modelplane_common.capacity.readers import (
    UnreadableCluster,
    get_str,
    get_struct,
    read_cluster,
    read_engines,
)
from modelplane_common.composed import ObservedObject, observed_object
from modelplane_common.timeutil import parse_time_or_none

from compose_model_replica.model import (
    Absent,
    ClusterFacts,
    ClusterInput,
    DeploymentInput,
    DeploymentTemplates,
    Found,
    Inputs,
    Invalid,
    NotFetched,
    ReplicaInput,
)
from compose_model_replica.pods_scheduled import Previous
from compose_model_replica.spec import ParsedSpec, parse_spec

CLUSTER_REQUIREMENT = "cluster"
# The cluster's ModelReplicas (label modelplane.ai/cluster), for admission: all of them,
# or only those whose charge is pending (modelplane_common.capacity.charge_label).
REPLICAS_REQUIREMENT = "cluster-replicas"
PENDING_REPLICAS_REQUIREMENT = "cluster-pending-replicas"
# The namespace's ResourceQuotas and, under a device quota, its ModelReplicas (quota_gate.py).
QUOTAS_REQUIREMENT = "resource-quotas"
NAMESPACE_REPLICAS_REQUIREMENT = "namespace-replicas"
# The replica's ModelDeployment, by name in its namespace, for templates named by digest.
DEPLOYMENT_REQUIREMENT = "deployment"


def read_request(req: fnv1.RunFunctionRequest, now: datetime) -> Inputs:
    """Every input of one pass. Raises InvalidInput when the composite cannot be read."""
    replica = read_replica(req.observed.composite.resource, now)
    cluster_name = replica.spec.cluster
    return Inputs(
        replica=replica,
        cluster=read_cluster_input(req),
        fellows=read_fellows(req, REPLICAS_REQUIREMENT, cluster_name, now),
        pending_fellows=read_fellows(req, PENDING_REPLICAS_REQUIREMENT, cluster_name, now),
        observed={name: read_observed(r) for name, r in req.observed.resources.items()},
        now=now,
        quota=read_quota(req, replica.namespace),
        namespace_replicas=read_namespace_replicas(req, replica.namespace, now),
        deployment=read_deployment_input(req),
    )


def read_deployment_input(req: fnv1.RunFunctionRequest) -> DeploymentInput:
    """Not fetched (no entry yet), fetched and absent (an empty entry), or its members'
    templates. Lenient: an engine without a name, or a member whose template is not an
    object, gives no template (a replica that names one by digest then waits)."""
    if DEPLOYMENT_REQUIREMENT not in req.required_resources:
        return NotFetched()
    items = req.required_resources[DEPLOYMENT_REQUIREMENT].items
    if not items:
        return Absent()
    body = resource.struct_to_dict(items[0].resource)
    spec = body.get("spec")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    inner = template.get("spec") if isinstance(template, Mapping) else None
    engines = inner.get("engines") if isinstance(inner, Mapping) else None
    found: dict[tuple[str, int], Mapping] = {}
    for engine in engines if isinstance(engines, list) else ():
        name = engine.get("name") if isinstance(engine, Mapping) else None
        members = engine.get("members") if isinstance(engine, Mapping) else None
        for position, member in enumerate(members if isinstance(members, list) else ()):
            raw = member.get("template") if isinstance(member, Mapping) else None
            if isinstance(name, str) and isinstance(raw, Mapping):
                found[(name, position)] = raw
    return DeploymentTemplates(found)


def read_quota(req: fnv1.RunFunctionRequest, namespace: str) -> DeviceQuota | None:
    """The namespace's device quota; None while its ResourceQuotas are not fetched.
    A malformed hard value is skipped (capacity/quota.py), so it limits nothing."""
    if QUOTAS_REQUIREMENT not in req.required_resources:
        return None
    quotas = [
        inputs.integral_object(resource.struct_to_dict(item.resource))
        for item in req.required_resources[QUOTAS_REQUIREMENT].items
    ]
    quota, _ = read_device_quota(namespace, quotas)
    return quota


def read_namespace_replicas(
    req: fnv1.RunFunctionRequest, namespace: str, now: datetime
) -> tuple[Queued, ...] | None:
    """The namespace's ModelReplicas, fleet-wide, as admission queues them; None while
    not fetched. Each is charged on the cluster its spec names."""
    if NAMESPACE_REPLICAS_REQUIREMENT not in req.required_resources:
        return None
    return tuple(
        read_queued(item.resource, get_str(get_struct(item.resource, "spec"), "clusterName"), now)
        for item in req.required_resources[NAMESPACE_REPLICAS_REQUIREMENT].items
        if get_str(get_struct(item.resource, "metadata"), "namespace") == namespace
    )


def read_replica(composite: struct_pb2.Struct, now: datetime) -> ReplicaInput:
    """The XR. Raises InvalidInput when it has no metadata.name, or metadata or spec
    is not an object: a composite that is not even that cannot be reasoned about."""
    xr = resource.struct_to_dict(composite)
    metadata = inputs.mapping(xr.get("metadata"), "metadata")
    name = inputs.name(metadata.get("name"))
    spec = parse_spec(inputs.mapping(xr.get("spec"), "spec"))
    status = inputs.status_of(xr)
    placement = placement_annotation(metadata)
    deployment, deployment_problem = _deployment_of(metadata, spec)
    return ReplicaInput(
        name=name,
        namespace=str(metadata.get("namespace") or ""),
        spec=spec,
        previous_pods=Previous.from_status(status),
        previous_missing_since=_missing_since(status),
        previous_admission=record_from_status(status),
        placement=placement,
        placement_problem=_placement_problem(placement),
        placement_replaced=read_placement_time(composite, now).replaced,
        cluster_label_problem=_cluster_label_problem(metadata, spec.cluster),
        queued=read_queued(composite, spec.cluster, now),
        shape=read_engines(get_struct(composite, "spec")),
        dropping_events=requeue.dropping_events(status, now),
        deployment=deployment,
        deployment_problem=deployment_problem,
        orphaned=orphans.orphaned(metadata),
    )


def _deployment_of(metadata: Mapping, spec: ParsedSpec) -> tuple[str, str | None]:
    """The ModelDeployment the labels name in the replica's own namespace (never in
    another: templates are read from the tenant's own deployment only), or "" and why
    they name none. Asked only when a member names its template by digest."""
    if not spec.templates_by_digest:
        return "", None
    found = metadata.get("labels")
    found = found if isinstance(found, Mapping) else {}
    name, namespace = found.get(labels.DEPLOYMENT), found.get(labels.DEPLOYMENT_NAMESPACE)
    own = str(metadata.get("namespace") or "")
    if not isinstance(name, str) or not name:
        return "", inputs.problem(
            f'metadata.labels["{labels.DEPLOYMENT}"]',
            "must name the ModelDeployment whose templates the replica names by digest",
            name,
        )
    if namespace != own:
        return "", inputs.problem(
            f'metadata.labels["{labels.DEPLOYMENT_NAMESPACE}"]',
            f"must be the replica's own namespace {own!r}, where its ModelDeployment is",
            namespace,
        )
    return name, None


def _missing_since(status: Mapping) -> datetime | None:
    pods = status.get("pods")
    return parse_time_or_none(pods.get("missingSince")) if isinstance(pods, Mapping) else None


def _placement_problem(placement: str) -> str | None:
    if placement and parse_time_or_none(placement) is None:
        return inputs.problem(
            f'metadata.annotations["{labels.PLACED_AT}"]', "must be an RFC 3339 time", placement
        )
    return None


def _cluster_label_problem(metadata: Mapping, cluster: str) -> str | None:
    """The cluster label selects a replica into its cluster's queue (every fellow reads
    `modelplane.ai/cluster`); one that names another cluster than spec.clusterName
    would be charged by neither cluster's replicas."""
    found = metadata.get("labels")
    label = found.get(labels.CLUSTER) if isinstance(found, Mapping) else None
    if not cluster or label == labels.label_value(cluster):
        return None  # no clusterName: the spec's own defect says so
    return inputs.problem(
        f'metadata.labels["{labels.CLUSTER}"]',
        f"must equal spec.clusterName {cluster!r}, the cluster whose queue it is judged in",
        label,
    )


def read_cluster_input(req: fnv1.RunFunctionRequest) -> ClusterInput:
    """Not fetched (no entry yet), fetched and absent (an empty entry), invalid, or found."""
    if CLUSTER_REQUIREMENT not in req.required_resources:
        return NotFetched()
    items = req.required_resources[CLUSTER_REQUIREMENT].items
    if not items:
        return Absent()
    body = inputs.integral_object(resource.struct_to_dict(items[0].resource))
    try:
        fleet, _ = read_cluster(body)
    except UnreadableCluster as err:
        return Invalid(str(err))
    except inputs.InvalidInput:
        # No name: admission cannot count it, but its spec still says what to compose.
        defects = inputs.inference_cluster_problems(body.get("spec"))
        if defects:
            return Invalid("; ".join(defects))
        fleet = None
    return Found(_cluster_facts(body, fleet))


def _cluster_facts(body: Mapping, fleet: Cluster | None) -> ClusterFacts:
    """The facts of an InferenceCluster whose spec passed its schema."""
    spec = body.get("spec")
    assert isinstance(spec, Mapping)  # the schema check requires an object
    status = inputs.status_of(body)
    agent = status.get("agent")
    max_age, max_age_problem = inputs.max_age(
        spec.get("observation"), "the cluster's spec.observation"
    )
    return ClusterFacts(
        fleet=fleet,
        pools=frozenset(
            name
            for p in spec.get("nodePools") or []
            if isinstance(p, Mapping) and isinstance(name := p.get("name"), str)
        ),
        mode=inputs.observation_mode(spec.get("observation")),
        max_age=max_age,
        max_age_problem=max_age_problem,
        provider_config=remote_object.provider_config_of(body),
        agent_present=isinstance(agent, Mapping) and agent.get("present") is True,
        replicas_current_until=currency.replicas_current_until(status),
        tenancy=cluster_tenancy.read(spec),
    )


def read_fellows(
    req: fnv1.RunFunctionRequest, requirement: str, cluster_name: str, now: datetime
) -> tuple[Queued, ...] | None:
    """The cluster's ModelReplicas fetched under `requirement`, as admission queues them;
    None while not fetched."""
    if requirement not in req.required_resources:
        return None
    return tuple(
        read_queued(item.resource, cluster_name, now)
        for item in req.required_resources[requirement].items
        # The label selected them; the spec is what pins them to the cluster.
        if get_str(get_struct(item.resource, "spec"), "clusterName") == cluster_name
    )


def read_observed(observed: fnv1.Resource) -> ObservedObject:
    return observed_object(resource.struct_to_dict(observed.resource))
