"""Wire to domain: read the request's resources into the core's small types.

`read_request` is the one entry: it reads the RunFunctionRequest, and each
round of required resources Crossplane fetched, into a `request.Request`
that the phases of `decision.plan` read and nothing else re-reads.

Small inputs (the deployment, its own replicas, the selected clusters) are
converted to dicts first (`as_object`); the deployment and its own replicas
are then validated against their generated models (modelplane_schemas,
design/tooling.md), the clusters read by `capacity.readers.read_cluster`.
The required ModelReplicas can number thousands (an 11 MB request at
8,000), and `struct_to_dict` on them costs seconds, so `OtherReplicas`
reads them straight from the protobuf Structs: one pass reads only
`spec.clusterName` and groups the Structs by cluster; a cluster's replicas
are read further (identity, PodsScheduled, scheduledAt, engines) only when
placement first looks that cluster up.

`read_request` raises only when the composite is not an object with
metadata and spec (InvalidInput: a Fatal result). Every other defect is
read into the Request: a deployment that breaks its schema as
`InvalidDeployment` (`read_deployment` raises ValueError naming each
defect), an unreadable own replica as `Own.invalid` (`read_own_replicas`
raises InvalidOwnReplica), and malformed memories, clusters and other
replicas as notes, which the report turns into the InputsValid condition
and warnings.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from google.protobuf import struct_pb2
from modelplane_common import (
    labels,
    nesting,
    pod_template,
    pods_created,
    requeue,
    workload_namespace,
)
from modelplane_common.capacity import admission
from modelplane_common.capacity.fleet import (
    ENGINE_SHAPE_RULE,
    Charge,
    Cluster,
    Role,
    has_engine_shape,
    pods_per_copy,
)
from modelplane_common.capacity.quota import devices_of
from modelplane_common.capacity.readers import (
    UnreadableCluster,
    get_str,
    get_struct,
    read_charge,
    read_cluster,
    read_engines,
)
from modelplane_common.devices import DeviceRequest, claim_limit_problem
from modelplane_common.inputs import (
    InvalidInput,
    bounded_duration,
    find_condition,
    mapping,
    problem,
    status_of,
    struct_object,
    validation_problems,
)
from modelplane_common.timeutil import parse_time_or_none
from modelplane_common.tolerations import Toleration
from modelplane_schemas import modeldeployment as schema
from modelplane_schemas.modeldeployment import ModelDeployment
from modelplane_schemas.modelreplica import Spec as ModelReplicaSpec
from pydantic import ValidationError

from compose_model_deployment import fleet_reads, in_flight, namespaces, steady, tenancy
from compose_model_deployment.model import (
    LONGEST_HEALING,
    MISSING_PODS_GRACE,
    UNSCHEDULABLE_GRACE,
    DeploymentInput,
    DeploymentSpec,
    EngineShape,
    FailedPlacement,
    MemberShape,
    MissingCluster,
    OwnReplica,
    ReplicaCondition,
    Reported,
    healing_default,
)
from compose_model_deployment.placement import OthersOnCluster
from compose_model_deployment.request import Fleet, Footprint, InvalidDeployment, Own, Request, View

# Not a label: when the replica's current cluster and pools were chosen, on the
# control plane's clock, so a PodsScheduled condition older than the placement
# is not mistaken for a failure of it.
PLACED_AT = labels.PLACED_AT
RESOURCE_PREFIX = "replica-"
_INDEX = re.compile(r"^replica-(0|[1-9][0-9]{0,5})$")
# The status fields a pass that plans nothing passes through as they are.
MEMORIES = ("failedPlacements", "missingClusters")


def as_object(struct: struct_pb2.Struct) -> dict:
    """A Struct from the request as a dict, its whole numbers ints again
    (CEL selectors compare `int` attributes with int literals, where 200.0
    would be a double and fail to compare)."""
    return struct_object(struct)


@dataclass(frozen=True, slots=True)
class Observed:
    """One of the deployment's observed composed resources: as a dict, and its
    spec as the Struct it came in (capacity.readers.read_engines reads that)."""

    obj: dict
    spec: struct_pb2.Struct | None

    @classmethod
    def of(cls, struct: struct_pb2.Struct) -> Observed:
        return cls(as_object(struct), get_struct(struct, "spec"))


# --- the deployment ---------------------------------------------------------------------------


def _member_shape(member: schema.Member, where: str) -> MemberShape:
    devices = member.nodeSelector.devices if member.nodeSelector else None
    requests = tuple(
        DeviceRequest(
            name=d.name,
            count=d.count,
            selectors=tuple(s.cel.expression for s in d.selectors or ()),
        )
        for d in devices or ()
    )
    # Never placed nor charged: no cluster binds its pods (the XRD's rule, for a
    # deployment written before it).
    over_limit = claim_limit_problem(requests, f"{where}.nodeSelector.devices")
    if over_limit is not None:
        raise ValueError(over_limit)
    role = member.role.value
    _, pod_spec = pod_template.split(member.template or {})
    return MemberShape(
        Role(role),
        requests,
        pods_per_copy(role, member.worker.nodes if member.worker else None),
        priority_class_name=pod_spec.get("priorityClassName"),
    )


def _engine_shape(position: int, engine: schema.Engine) -> EngineShape:
    roles = [m.role.value for m in engine.members]
    if not has_engine_shape(roles):
        raise ValueError(
            problem(f"spec.template.spec.engines[{position}].members", ENGINE_SHAPE_RULE, roles)
        )
    where = f"spec.template.spec.engines[{position}].members"
    members = tuple(_member_shape(m, f"{where}[{i}]") for i, m in enumerate(engine.members))
    return EngineShape(engine.name, engine.copies or 1, members)


def _template_problems(engines: object) -> list[str]:
    """Every pod template defect (`modelplane_common.pod_template`, the rule the
    replicas apply too), so that no replica of a template that cannot run, or
    would bypass the cluster's scheduler, is placed or charged."""
    found: list[str] = []
    for e, engine in enumerate(engines if isinstance(engines, list | tuple) else ()):
        members = engine.get("members") if isinstance(engine, Mapping) else None
        for m, member in enumerate(members if isinstance(members, list) else ()):
            if isinstance(member, Mapping):
                where = f"spec.template.spec.engines[{e}].members[{m}]"
                found.extend(pod_template.read(member.get("template"), where)[2])
    return found


def _healing(healing: schema.Healing | None, field: str, notes: list[str]) -> timedelta:
    """A healing duration; absent (or null) it is the generated model's default, longer than
    its maximum (LONGEST_HEALING) that maximum, with a note."""
    value = getattr(healing, field) if healing is not None else None
    duration, clamped = bounded_duration(
        value or None,
        f"spec.healing.{field}",
        default=healing_default(field),
        longest=LONGEST_HEALING[field],
    )
    notes.extend([clamped] if clamped else [])
    return duration


def _toleration(t: schema.Toleration) -> Toleration:
    return Toleration(
        key=t.key or "",
        operator=str(getattr(t.operator, "value", t.operator) or "Equal"),
        value=t.value or "",
        effect=t.effect.value if t.effect else "",
    )


def _identity(xr: Mapping) -> tuple[str, str]:
    meta = xr.get("metadata") or {}
    name, namespace = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not name:
        raise ValueError(problem("metadata.name", "must be a non-empty string", name))
    if not isinstance(namespace, str) or not namespace:
        raise ValueError(problem("metadata.namespace", "must be a non-empty string", namespace))
    return namespace, name


def _nesting_problems(xr: Mapping) -> list[str]:
    """Every member template nested deeper than `nesting.MAX_TEMPLATE_DEPTH`: checked
    first, before anything walks the template, so that no replica of it is composed."""
    spec = xr.get("spec")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    inner = template.get("spec") if isinstance(template, Mapping) else None
    engines = inner.get("engines") if isinstance(inner, Mapping) else None
    found: list[str] = []
    for e, engine in enumerate(engines if isinstance(engines, list) else ()):
        members = engine.get("members") if isinstance(engine, Mapping) else None
        for m, member in enumerate(members if isinstance(members, list) else ()):
            depth = nesting.depth(member.get("template") if isinstance(member, Mapping) else None)
            if depth > nesting.MAX_TEMPLATE_DEPTH:
                found.append(
                    problem(
                        f"spec.template.spec.engines[{e}].members[{m}].template",
                        f"nests more than {nesting.MAX_TEMPLATE_DEPTH} maps and lists deep",
                        depth,
                    )
                )
    return found


def read_deployment(xr: Mapping) -> DeploymentInput:
    """Validate the ModelDeployment against its generated model. Raises ValueError
    whose message is one `field.path: reason (got value)` per defect."""
    too_deep = _nesting_problems(xr)
    if too_deep:
        raise ValueError("; ".join(too_deep))
    try:
        # Only what the user wrote: status is ours and never invalidates the spec.
        model = ModelDeployment.model_validate({k: v for k, v in xr.items() if k != "status"})
    except ValidationError as err:
        raise ValueError("; ".join(validation_problems(err))) from err
    if model.spec is None:
        raise ValueError("spec: is required (got no value)")
    namespace, name = _identity(xr)
    reserved = workload_namespace.reserved_problem(namespace)
    if reserved is not None:
        raise ValueError(reserved)
    template = model.spec.template
    engines = tuple(_engine_shape(i, e) for i, e in enumerate(template.spec.engines))
    healing = model.spec.healing
    raw_spec = ((xr.get("spec") or {}).get("template") or {}).get("spec") or {}
    template_problems = _template_problems(raw_spec.get("engines") or ())
    if template_problems:
        raise ValueError("; ".join(template_problems))
    selector = template.spec.clusterSelector
    notes: list[str] = []
    return DeploymentInput(
        spec=DeploymentSpec(
            namespace=namespace,
            name=name,
            replicas=model.spec.replicas if model.spec.replicas is not None else 1,
            engines=engines,
            tolerations=tuple(_toleration(t) for t in template.spec.tolerations or ()),
            unschedulable_grace=_healing(healing, "unschedulableGracePeriod", notes)
            # A zero period reads as the default, like an absent one.
            or UNSCHEDULABLE_GRACE,
            avoid_for=_healing(healing, "avoidFor", notes),
            missing_cluster_grace=_healing(healing, "missingClusterGracePeriod", notes),
            missing_pods_grace=_healing(healing, "missingPodsGracePeriod", notes)
            or MISSING_PODS_GRACE,
            # The model keeps the schema's default as written ("Spread"), not as the enum.
            cluster_spreading=schema.ClusterSpreading(model.spec.clusterSpreading or "Spread"),
        ),
        cluster_labels=dict(selector.matchLabels or {}) if selector else {},
        template_labels=dict((template.metadata.labels or {}) if template.metadata else {}),
        raw_engines=tuple(raw_spec.get("engines") or ()),
        raw_tolerations=tuple(raw_spec.get("tolerations") or ()),
        notes=tuple(notes),
    )


def replica_count(xr: Mapping) -> int | None:
    """spec.replicas when it is a readable count, read without the rest of the spec
    (a deployment that breaks its schema still says how many replicas it wants)."""
    spec = xr.get("spec")
    raw = spec.get("replicas") if isinstance(spec, Mapping) else None
    # bool is an int to Python, not to us.
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else None


# --- what the deployment's status remembers ------------------------------------------------------


def read_reported(xr: Mapping, now: datetime) -> Reported:
    status = status_of(xr)
    replicas = status.get("replicas")
    return Reported(
        was_ready=find_condition(xr, "Ready").get("status") == "True",
        scheduled=replicas.get("scheduled") if isinstance(replicas, Mapping) else None,
        memories={m: list(status[m]) for m in MEMORIES if isinstance(status.get(m), list)},
        dropping_events=requeue.dropping_events(status, now),
    )


def _entries(xr: Mapping, field: str) -> list:
    entries = status_of(xr).get(field)
    return entries if isinstance(entries, list) else []


def _failed_placement(entry: object) -> FailedPlacement | None:
    if not isinstance(entry, Mapping):
        return None
    expires = parse_time_or_none(entry.get("expiresAt"))
    if expires is None or not entry.get("cluster") or not entry.get("pool"):
        return None
    return FailedPlacement(
        cluster=str(entry["cluster"]),
        pool=str(entry["pool"]),
        expires_at=expires,
        replica=str(entry.get("replica", "")),
        reason=str(entry.get("reason", "")),
    )


def read_failed_placements(xr: Mapping) -> tuple[tuple[FailedPlacement, ...], list[str]]:
    """status.failedPlacements: the pools avoided, and until when."""
    notes: list[str] = []
    found: list[FailedPlacement] = []
    for i, entry in enumerate(_entries(xr, "failedPlacements")):
        failure = _failed_placement(entry)
        if failure is None:
            notes.append(
                problem(f"status.failedPlacements[{i}]", "is malformed and was dropped", entry)
            )
            continue
        found.append(failure)
    return tuple(found), notes


def read_missing_clusters(xr: Mapping) -> tuple[tuple[MissingCluster, ...], list[str]]:
    """status.missingClusters: since when each cluster has been missing."""
    notes: list[str] = []
    found: list[MissingCluster] = []
    for i, entry in enumerate(_entries(xr, "missingClusters")):
        since = parse_time_or_none(entry.get("since")) if isinstance(entry, Mapping) else None
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if since is None or not isinstance(name, str) or not name:
            notes.append(
                problem(f"status.missingClusters[{i}]", "is malformed and was dropped", entry)
            )
            continue
        found.append(MissingCluster(name, since))
    return tuple(found), notes


# --- replicas ---------------------------------------------------------------------------------


def replica_ready(obj: Mapping) -> bool:
    """Ready: every pod scheduled (PodsScheduled) and the workloads ready (Ready)."""
    return (
        find_condition(obj, "PodsScheduled").get("status") == "True"
        and find_condition(obj, "Ready").get("status") == "True"
    )


def _validated_spec(key: str, obj: Mapping) -> ModelReplicaSpec:
    try:
        return ModelReplicaSpec.model_validate(obj.get("spec"))
    except ValidationError as err:
        raise ValueError(
            "; ".join(f"{key}.spec.{line}" for line in validation_problems(err))
        ) from err


def _label_notes(name: str, found: Mapping, expected: Mapping[str, str]) -> list[str]:
    return [
        f"replica {name}: label {k}={found.get(k)!r} contradicts {v!r}; relabelled"
        for k, v in expected.items()
        if found.get(k) != v
    ]


def _replica_condition(obj: Mapping, type_: str) -> ReplicaCondition:
    condition = find_condition(obj, type_)
    return ReplicaCondition(
        status=str(condition.get("status", "Unknown")),
        reason=str(condition.get("reason", "")),
        message=str(condition.get("message", "")),
        since=parse_time_or_none(condition.get("lastTransitionTime")),
    )


def read_own_replica(
    key: str, observed: Observed, spec: DeploymentSpec
) -> tuple[OwnReplica | None, list[str]]:
    """One of our observed composed ModelReplicas; the composition resource name
    `replica-<index>` is the identity, labels are checked against it.

    Its spec must pass the generated model (else ValueError: nothing may be
    planned on a replica that cannot be read); its engines are then read by
    the one reader of a ModelReplica's engines, `capacity.readers.read_engines`.
    """
    match = _INDEX.match(key)
    if match is None:
        return None, [f"composed resource {key} is not a replica of this deployment; left as is"]
    index = int(match.group(1))
    obj = observed.obj
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise InvalidInput(f"{key}.metadata", "must be an object", meta)
    cluster = _validated_spec(key, obj).clusterName
    name = str(meta.get("name") or spec.replica_name(index))
    found: Mapping = meta["labels"] if isinstance(meta.get("labels"), Mapping) else {}
    expected = {
        labels.DEPLOYMENT: spec.name,
        labels.DEPLOYMENT_NAMESPACE: spec.namespace,
        labels.CLUSTER: labels.label_value(cluster),
        labels.REPLICA_INDEX: str(index),
    }
    annotations = meta.get("annotations")
    state, message, decided_at = admission_of(obj)
    return OwnReplica(
        index=index,
        name=name,
        cluster=cluster,
        engines=read_engines(observed.spec),
        pods_scheduled=_replica_condition(obj, "PodsScheduled"),
        pods_created=_replica_condition(obj, pods_created.TYPE),
        scheduled_at=parse_time_or_none(status_of(obj).get("scheduledAt")),
        ready=replica_ready(obj),
        placed_at=parse_time_or_none(
            annotations.get(PLACED_AT) if isinstance(annotations, Mapping) else None
        ),
        created_at=parse_time_or_none(meta.get("creationTimestamp")),
        admission=state,
        admission_message=message,
        admission_at=decided_at,
    ), _label_notes(name, found, expected)


def admission_of(obj: Mapping) -> tuple[str | None, str, datetime | None]:
    """A replica's admission for its current placement: the recorded verdict if it names
    the placement (a replica whose growth is judged again still holds its Admitted
    verdict: it runs at the shape that verdict charged), else WaitingForAdmission if its
    Admitted condition says so."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    record = admission.record_from_status(status_of(obj))
    if record is not None and record.names(admission.placement_annotation(meta)):
        return record.verdict, record.message, record.decided_at
    condition = find_condition(obj, admission.CONDITION)
    if condition.get("status") == "False" and condition.get("reason") == admission.WAITING:
        return admission.WAITING, str(condition.get("message", "")), None
    return None, "", None


# --- the fleet's other replicas, straight from the Structs --------------------------------------


class OtherReplicas(Mapping[str, OthersOnCluster]):
    """The fetched ModelReplicas that are not ours, by spec.clusterName; a cluster's
    are read (`capacity.readers.read_charge`) the first time it is looked up.

    A cluster read whole (fleet_reads.py) takes its replicas from its whole
    set, every other one from the pending set, so none is charged twice."""

    def __init__(
        self,
        replicas: fleet_reads.Replicas,
        clusters: Iterable[str],
        own: set[tuple[str, str]],
        deployment: tuple[str, str],
        quota_namespace: str | None = None,
    ) -> None:
        wanted = set(clusters)
        self._own = own
        self._deployment = deployment  # (namespace, name)
        self._by_cluster: dict[str, list[struct_pb2.Struct]] = {}
        self._read: dict[str, OthersOnCluster] = {}
        # The namespace's other replicas, fleet-wide, when its devices are limited.
        self._namespace: list[struct_pb2.Struct] = []
        for resource in replicas.pending:
            cluster = get_str(get_struct(resource, "spec"), "clusterName")
            if cluster in wanted and cluster not in replicas.whole:
                self._by_cluster.setdefault(cluster, []).append(resource)
        for cluster, resources in sorted(replicas.whole.items()):
            for resource in resources if cluster in wanted else ():
                # The label selected it; the spec is what pins it to the cluster.
                if get_str(get_struct(resource, "spec"), "clusterName") == cluster:
                    self._by_cluster.setdefault(cluster, []).append(resource)
        if quota_namespace is not None:
            for resource in replicas.namespace or ():
                self._collect_namespace(resource, quota_namespace)

    def _collect_namespace(self, resource: struct_pb2.Struct, namespace: str) -> None:
        meta = get_struct(resource, "metadata")
        identity = (get_str(meta, "namespace"), get_str(meta, "name"))
        if identity[0] == namespace and identity not in self._own:
            self._namespace.append(resource)

    def namespace_claims(self) -> Counter[str]:
        """What the namespace's other replicas claim per DeviceClass, fleet-wide; an
        Overcommitted one holds nothing (capacity/quota.py), nor does a released one
        (orphaned, or its pods refused: `Charge.released`, as the pool ledgers read it)."""
        claimed: Counter[str] = Counter()
        for resource in self._namespace:
            if admission.recorded_verdict(resource) == admission.OVERCOMMITTED:
                continue
            meta = get_struct(resource, "metadata")
            identity = (get_str(meta, "namespace"), get_str(meta, "name"))
            charge = read_charge(
                resource, identity, get_str(get_struct(resource, "spec"), "clusterName")
            )
            if not charge.released:
                claimed.update(devices_of(charge.engines))
        return claimed

    def __getitem__(self, cluster: str) -> OthersOnCluster:
        if cluster not in self._read:
            resources = self._by_cluster[cluster]  # KeyError: no replica there
            self._read[cluster] = self._read_cluster(resources, cluster)
        return self._read[cluster]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_cluster)

    def __len__(self) -> int:
        return len(self._by_cluster)

    def _read_cluster(self, resources: list[struct_pb2.Struct], cluster: str) -> OthersOnCluster:
        charges: list[Charge] = []
        notes: list[str] = []
        for resource in resources:
            meta = get_struct(resource, "metadata")
            identity = (get_str(meta, "namespace"), get_str(meta, "name"))
            if identity in self._own:
                continue  # ours: charged from the plan, not from the fleet listing
            if self._claims_to_be_ours(meta):
                notes.append(
                    f"ModelReplica {identity[0]}/{identity[1]} carries this deployment's labels "
                    "but is not composed by it; charged as someone else's"
                )
            if admission.recorded_verdict(resource) == admission.OVERCOMMITTED:
                continue  # it holds nothing and its deployment re-places it (admission.md)
            charges.append(read_charge(resource, identity, cluster))
        charges.sort(key=lambda c: (c.namespace, c.name))
        return OthersOnCluster(tuple(charges), tuple(notes))

    def _claims_to_be_ours(self, meta: struct_pb2.Struct | None) -> bool:
        found = get_struct(meta, "labels") if meta is not None else None
        namespace, name = self._deployment
        return get_str(found, labels.DEPLOYMENT) == name and get_str(
            found, labels.DEPLOYMENT_NAMESPACE
        ) in ("", namespace)


class InvalidOwnReplica(ValueError):
    """One of the deployment's own ModelReplicas cannot be read: nothing may be planned."""


# The selected clusters, those whose spec cannot be read (and why), and the notes.
ReadClusters = tuple[list[Cluster], dict[str, str], list[str]]


def read_clusters(cluster_objects: Iterable[Mapping]) -> ReadClusters:
    """The selected clusters, those whose spec cannot be read (and why), and the notes."""
    notes: list[str] = []
    clusters: list[Cluster] = []
    unreadable: dict[str, str] = {}
    for obj in cluster_objects:
        try:
            cluster, cluster_notes = read_cluster(obj)
        except UnreadableCluster as err:
            unreadable[err.name] = str(err)
            notes.append(f"InferenceCluster {err.name} is invalid: {err}")
            continue
        except InvalidInput as err:
            notes.append(str(err))
            continue
        clusters.append(cluster)
        notes.extend(cluster_notes)
    return clusters, unreadable, notes


def read_own_replicas(
    own_observed: Mapping[str, Observed], spec: DeploymentSpec
) -> tuple[list[OwnReplica], list[str]]:
    """The deployment's own replicas. Raises InvalidOwnReplica when one is unreadable."""
    own: list[OwnReplica] = []
    notes: list[str] = []
    for key, observed in own_observed.items():
        try:
            replica, replica_notes = read_own_replica(key, observed, spec)
        except ValueError as err:
            raise InvalidOwnReplica(str(err)) from err
        notes.extend(replica_notes)
        if replica is not None:
            own.append(replica)
    return own, notes


# --- the request, read once ---------------------------------------------------------------------


def read_request(req: fnv1.RunFunctionRequest, now: datetime) -> Request:
    """The request as one pass's typed inputs (request.py), each round of required
    resources as Crossplane fetched it. Raises InvalidInput only when the composite is not
    an object with metadata and spec (guard.py turns that into a Fatal result); every
    other defect is read into the Request, for the pass to report."""
    xr = as_object(req.observed.composite.resource)
    mapping(xr.get("metadata"), "metadata")
    mapping(xr.get("spec"), "spec")
    observed = {
        key: Observed.of(found.resource)
        for key, found in sorted(req.observed.resources.items())
        if key.startswith(RESOURCE_PREFIX)
    }
    base = Request(
        now=now,
        reported=read_reported(xr, now),
        deployment=InvalidDeployment("", None),
        own=_kept_own(observed),
        namespaces={
            key: as_object(found.resource)
            for key, found in sorted(req.observed.resources.items())
            if key.startswith(namespaces.PREFIX)
        },
    )
    try:
        deployment = read_deployment(xr)
    except ValueError as err:
        return replace(base, deployment=InvalidDeployment(str(err), replica_count(xr)))
    return _read_planning_inputs(req, xr, replace(base, deployment=deployment), observed)


def _read_planning_inputs(
    req: fnv1.RunFunctionRequest, xr: Mapping, base: Request, observed: Mapping[str, Observed]
) -> Request:
    """What a readable deployment plans on: its replicas and memories, its tenant and the
    fleet or footprint fetched."""
    assert isinstance(base.deployment, DeploymentInput)
    spec = base.deployment.spec
    own = _read_own(observed, spec, base.own)
    failed, failed_notes = read_failed_placements(xr)
    remembered, missing_notes = read_missing_clusters(xr)
    fetched_tenant = _tenant_fetched(req)
    unfetched = tuple(fetched_tenant.unfetched())
    tenant, tenant_notes = (
        tenancy.read_tenant(spec.namespace, fetched_tenant) if not unfetched else (None, [])
    )
    read = replace(
        base,
        own=own,
        failed=failed,
        remembered=remembered,
        memory_notes=(*failed_notes, *missing_notes),
        tenant=tenant,
        tenant_notes=tuple(tenant_notes),
        tenant_unfetched=unfetched,
        footprint=steady.footprint(spec, own.replicas if own.invalid is None else None),
    )
    fleet = _read_fleet(req, read)
    if fleet is not None:
        return replace(read, fleet=fleet)
    return replace(read, fetched_footprint=_read_footprint(req, read))


def _kept_own(observed: Mapping[str, Observed]) -> Own:
    """The own replicas as observed, before (or without) the deployment's spec to read them."""
    kept = {key: found.obj for key, found in observed.items()}
    return Own(observed=kept, ready=sum(1 for obj in kept.values() if replica_ready(obj)))


def _read_own(observed: Mapping[str, Observed], spec: DeploymentSpec, kept: Own) -> Own:
    try:
        replicas, notes = read_own_replicas(observed, spec)
    except InvalidOwnReplica as err:
        return replace(kept, invalid=str(err))
    return replace(kept, replicas=tuple(replicas), notes=tuple(notes))


def _tenant_fetched(req: fnv1.RunFunctionRequest) -> tenancy.TenantFetched:
    required = req.required_resources

    def items(name: str) -> list[dict] | None:
        if name not in required:
            return None
        return [as_object(item.resource) for item in required[name].items]

    return tenancy.TenantFetched(namespaces=items(tenancy.NAMESPACE), quotas=items(tenancy.QUOTAS))


def _read_fleet(req: fnv1.RunFunctionRequest, read: Request) -> Fleet | None:
    """The fleet as fetched; None when nothing of it is."""
    required = req.required_resources
    has_clusters = fleet_reads.CLUSTERS in required
    has_pending = fleet_reads.PENDING_REPLICAS in required
    if not has_clusters and not has_pending:
        return None
    if not has_clusters:
        return Fleet(unfetched=(fleet_reads.CLUSTERS,))
    if not has_pending:
        return Fleet(unfetched=(fleet_reads.PENDING_REPLICAS,))
    clusters = required[fleet_reads.CLUSTERS].items
    objects = [as_object(item.resource) for item in clusters]
    return Fleet(view=_view(read, objects, _replicas_fetched(req), reads_fleet=True))


def _replicas_fetched(req: fnv1.RunFunctionRequest) -> fleet_reads.Replicas:
    """The fleet's ModelReplicas as fetched (fleet_reads.py), the pending ones among them."""
    required = req.required_resources
    namespace = required.get(fleet_reads.NAMESPACE_REPLICAS)
    return fleet_reads.Replicas(
        pending=[item.resource for item in required[fleet_reads.PENDING_REPLICAS].items],
        whole={
            name.removeprefix(fleet_reads.WHOLE_PREFIX): [item.resource for item in found.items]
            for name, found in required.items()
            if name.startswith(fleet_reads.WHOLE_PREFIX)
        },
        namespace=[item.resource for item in namespace.items] if namespace is not None else None,
    )


def _read_footprint(req: fnv1.RunFunctionRequest, read: Request) -> Footprint | None:
    """The footprint's clusters as fetched (steady.py), read only when they are exactly the
    footprint's; None when none was fetched."""
    fetched = {
        name.removeprefix(steady.CLUSTER_PREFIX): [item.resource for item in required.items]
        for name, required in req.required_resources.items()
        if name.startswith(steady.CLUSTER_PREFIX)
    }
    if not fetched:
        return None
    names = frozenset(fetched)
    if read.footprint is None or names != set(read.footprint):
        return Footprint(names=names, view=None)
    assert isinstance(read.deployment, DeploymentInput)
    objects = steady.footprint_clusters(fetched, read.deployment.cluster_labels, read.footprint)
    return Footprint(names=names, view=_view(read, objects, fleet_reads.Replicas(), False))


def _view(
    read: Request, objects: Sequence[Mapping], replicas: fleet_reads.Replicas, reads_fleet: bool
) -> View:
    """The fetched clusters and replicas as one plan's view of them."""
    assert isinstance(read.deployment, DeploymentInput)
    spec = read.deployment.spec
    clusters, unreadable, notes = read_clusters(objects)
    limited = read.tenant is not None and read.tenant.quota.limited
    others = OtherReplicas(
        replicas,
        clusters=(c.name for c in clusters),
        own={(spec.namespace, r.name) for r in read.own.replicas},
        deployment=(spec.namespace, spec.name),
        quota_namespace=spec.namespace if limited else None,
    )
    return View(
        clusters=tuple(clusters),
        unreadable=unreadable,
        notes=tuple(notes),
        sites=namespaces.read_sites(objects, (c.name for c in clusters)),
        no_clusters=not objects,
        others=others,
        claims=others.namespace_claims(),
        room=in_flight.room(replicas.pending, spec.namespace),
        whole=frozenset(replicas.whole),
        namespace_fetched=replicas.namespace is not None,
        reads_fleet=reads_fleet,
    )
