"""Wire to domain: read the request's resources into the core's small types.

Small inputs (the deployment, its own replicas, the selected clusters) are
converted to dicts first; the deployment and its own replicas are then read
through their generated models (modelplane_schemas, design/tooling.md), the
clusters through `capacity.readers.read_cluster`. The required ModelReplicas can number thousands
(an 11 MB request at 8,000), and `struct_to_dict` on them costs seconds, so
`ReplicaIndex` reads them straight from the protobuf Structs: one pass reads
only `spec.clusterName` and groups the Structs by cluster; a cluster's
replicas are read further (identity, PodsScheduled, scheduledAt, engines)
only when placement first asks for that cluster's capacity.

Readers never raise on malformed input: they return what they could read
plus notes the shell turns into the InputsValid condition and warnings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import overload

from google.protobuf import struct_pb2
from modelplane_common import labels
from modelplane_common.capacity import admission
from modelplane_common.capacity.fleet import (
    Charge,
    Cluster,
    PlacedEngine,
    PlacedMember,
    ResolvedRequest,
    Role,
)
from modelplane_common.capacity.readers import (
    UnreadableCluster,
    get_str,
    get_struct,
    read_charge,
    read_cluster,
)
from modelplane_common.devices import DeviceRequest
from modelplane_common.inputs import (
    InvalidInput,
    find_condition,
    problem,
    status_of,
    validation_problems,
)
from modelplane_common.timeutil import parse_duration, parse_time_or_none
from modelplane_common.tolerations import Toleration
from modelplane_schemas.modeldeployment import ModelDeployment
from modelplane_schemas.modelreplica import Spec as ReplicaSpec
from pydantic import ValidationError

from compose_model_deployment.model import (
    DeploymentSpec,
    EngineShape,
    FailedPlacement,
    MemberShape,
    MissingCluster,
    OwnReplica,
    PodsScheduled,
)

# Not a label: when the replica's current cluster and pools were chosen, on the
# control plane's clock, so a PodsScheduled condition older than the placement
# is not mistaken for a failure of it.
PLACED_AT = labels.PLACED_AT
RESOURCE_PREFIX = "replica-"
_INDEX = re.compile(r"^replica-(0|[1-9][0-9]{0,5})$")


@overload
def integral(value: dict) -> dict: ...
@overload
def integral(value: object) -> object: ...
def integral(value: object) -> object:
    """Undo protobuf's float-only numbers: 8.0 back to 8, recursively.

    struct_to_dict yields every JSON number as a float. Counts are integers
    on the wire, and CEL selectors compare `int` attributes with int
    literals, where 200.0 would be a double and fail to compare.
    """
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral(v) for v in value]
    return value


def _time_or_none(value: object) -> datetime | None:
    return parse_time_or_none(value)


# --- the deployment ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeploymentInput:
    spec: DeploymentSpec
    cluster_labels: dict[str, str]
    template_labels: dict[str, str]
    # Raw engines and tolerations, copied onto every ModelReplica (templates are opaque).
    raw_engines: tuple[Mapping, ...]
    raw_tolerations: tuple[Mapping, ...]


def read_deployment(xr: Mapping) -> DeploymentInput:
    """Validate the ModelDeployment against its generated model. Raises ValueError
    whose message is one `field.path: reason (got value)` per defect."""
    try:
        # Only what the user wrote: status is ours and never invalidates the spec.
        model = ModelDeployment.model_validate({k: v for k, v in xr.items() if k != "status"})
    except ValidationError as err:
        raise ValueError("; ".join(validation_problems(err))) from err
    if model.spec is None:
        raise ValueError("spec: is required (got no value)")
    meta = xr.get("metadata") or {}
    name, namespace = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not name:
        raise ValueError(problem("metadata.name", "must be a non-empty string", name))
    if not isinstance(namespace, str) or not namespace:
        raise ValueError(problem("metadata.namespace", "must be a non-empty string", namespace))
    template = model.spec.template
    engines: list[EngineShape] = []
    for position, engine in enumerate(template.spec.engines):
        roles = sorted(m.role.value for m in engine.members)
        if roles not in (["Standalone"], ["Leader", "Worker"]):
            raise ValueError(
                problem(
                    f"spec.template.spec.engines[{position}].members",
                    "must be one Standalone member, or one Leader and one Worker member",
                    roles,
                )
            )
        members = []
        for member in engine.members:
            devices = member.nodeSelector.devices if member.nodeSelector else None
            requests = tuple(
                DeviceRequest(
                    name=d.name,
                    count=d.count,
                    selectors=tuple(s.cel.expression for s in d.selectors or ()),
                )
                for d in devices or ()
            )
            pods = member.worker.nodes if member.role.value == "Worker" and member.worker else 1
            members.append(MemberShape(Role(member.role.value), requests, pods))
        engines.append(EngineShape(engine.name, engine.copies or 1, tuple(members)))
    healing = model.spec.healing
    grace = parse_duration((healing.unschedulableGracePeriod if healing else None) or "2m")
    avoid = parse_duration((healing.avoidFor if healing else None) or "30m")
    missing_grace = parse_duration((healing.missingClusterGracePeriod if healing else None) or "5m")
    tolerations = tuple(
        Toleration(
            key=t.key or "",
            operator=str(getattr(t.operator, "value", t.operator) or "Equal"),
            value=t.value or "",
            effect=t.effect.value if t.effect else "",
        )
        for t in template.spec.tolerations or ()
    )
    raw_template = (xr.get("spec") or {}).get("template") or {}
    raw_spec = raw_template.get("spec") or {}
    selector = template.spec.clusterSelector
    return DeploymentInput(
        spec=DeploymentSpec(
            namespace=namespace,
            name=name,
            replicas=model.spec.replicas if model.spec.replicas is not None else 1,
            engines=tuple(engines),
            tolerations=tolerations,
            unschedulable_grace=grace if grace else timedelta(minutes=2),
            avoid_for=avoid,
            missing_cluster_grace=missing_grace,
        ),
        cluster_labels=dict(selector.matchLabels or {}) if selector else {},
        template_labels=dict((template.metadata.labels or {}) if template.metadata else {}),
        raw_engines=tuple(raw_spec.get("engines") or ()),
        raw_tolerations=tuple(raw_spec.get("tolerations") or ()),
    )


def _status(obj: Mapping) -> Mapping:
    return status_of(obj)


def _entries(xr: Mapping, field: str) -> list:
    entries = _status(xr).get(field)
    return entries if isinstance(entries, list) else []


def read_failed_placements(xr: Mapping) -> tuple[tuple[FailedPlacement, ...], list[str]]:
    notes: list[str] = []
    found: list[FailedPlacement] = []
    for i, entry in enumerate(_entries(xr, "failedPlacements")):
        expires = _time_or_none(entry.get("expiresAt")) if isinstance(entry, Mapping) else None
        if expires is None or not entry.get("cluster") or not entry.get("pool"):
            notes.append(
                problem(f"status.failedPlacements[{i}]", "is malformed and was dropped", entry)
            )
            continue
        found.append(
            FailedPlacement(
                str(entry["cluster"]),
                str(entry["pool"]),
                expires,
                str(entry.get("replica", "")),
                str(entry.get("reason", "")),
            )
        )
    return tuple(found), notes


def read_missing_clusters(xr: Mapping) -> tuple[tuple[MissingCluster, ...], list[str]]:
    """status.missingClusters: since when each cluster has been missing."""
    notes: list[str] = []
    found: list[MissingCluster] = []
    for i, entry in enumerate(_entries(xr, "missingClusters")):
        since = _time_or_none(entry.get("since")) if isinstance(entry, Mapping) else None
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if since is None or not isinstance(name, str) or not name:
            notes.append(
                problem(f"status.missingClusters[{i}]", "is malformed and was dropped", entry)
            )
            continue
        found.append(MissingCluster(name, since))
    return tuple(found), notes


def _condition(obj: Mapping, typ: str) -> Mapping:
    return find_condition(obj, typ)


# --- replicas ---------------------------------------------------------------------------------


def _placed_engines(spec: ReplicaSpec) -> tuple[PlacedEngine, ...]:
    """A validated ModelReplica spec's engines as placed engines (the slow, typed path:
    only the deployment's own replicas are read this way; the fleet's are read
    straight from their Structs by capacity.readers.read_charge)."""
    return tuple(
        PlacedEngine(
            engine.name,
            engine.copies if engine.copies is not None else 1,
            tuple(
                PlacedMember(
                    Role(member.role.value),
                    member.nodePoolName,
                    tuple(
                        ResolvedRequest(
                            r.name,
                            r.deviceClassName,
                            r.count,
                            tuple(s.cel.expression for s in r.selectors or ()),
                        )
                        for r in member.deviceRequests or ()
                    ),
                    member.worker.nodes if member.role.value == "Worker" and member.worker else 1,
                )
                for member in engine.members
            ),
        )
        for engine in spec.engines
    )


def was_ready(xr: Mapping) -> bool:
    """Whether Crossplane last reported the deployment itself Ready."""
    return _condition(xr, "Ready").get("status") == "True"


def replica_ready(obj: Mapping) -> bool:
    """Ready: every pod scheduled (PodsScheduled) and the workloads ready (Ready)."""
    return (
        _condition(obj, "PodsScheduled").get("status") == "True"
        and _condition(obj, "Ready").get("status") == "True"
    )


def read_own_replica(
    key: str, obj: Mapping, spec: DeploymentSpec
) -> tuple[OwnReplica | None, list[str]]:
    """One of our observed composed ModelReplicas; the composition resource name
    `replica-<index>` is the identity, labels are checked against it."""
    match = _INDEX.match(key)
    if match is None:
        return None, [f"composed resource {key} is not a replica of this deployment; left as is"]
    index = int(match.group(1))
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise InvalidInput(f"{key}.metadata", "must be an object", meta)
    try:
        replica_spec = ReplicaSpec.model_validate(obj.get("spec"))
    except ValidationError as err:
        raise ValueError(
            "; ".join(f"{key}.spec.{line}" for line in validation_problems(err))
        ) from err
    name = str(meta.get("name") or spec.replica_name(index))
    cluster = replica_spec.clusterName
    found: Mapping = meta["labels"] if isinstance(meta.get("labels"), Mapping) else {}
    expected = {
        labels.DEPLOYMENT: spec.name,
        labels.DEPLOYMENT_NAMESPACE: spec.namespace,
        labels.CLUSTER: cluster,
        labels.REPLICA_INDEX: str(index),
    }
    notes = [
        f"replica {name}: label {k}={found.get(k)!r} contradicts {v!r}; relabelled"
        for k, v in expected.items()
        if found.get(k) != v
    ]
    engines = _placed_engines(replica_spec)
    ps = _condition(obj, "PodsScheduled")
    status = _status(obj)
    pods_scheduled = PodsScheduled(
        str(ps.get("status", "Unknown")),
        str(ps.get("reason", "")),
        str(ps.get("message", "")),
        _time_or_none(ps.get("lastTransitionTime")),
    )
    ready = replica_ready(obj)
    verdict, verdict_message, verdict_at = admission_of(obj)
    return OwnReplica(
        index=index,
        name=name,
        cluster=cluster,
        engines=engines,
        pods_scheduled=pods_scheduled,
        scheduled_at=_time_or_none(status.get("scheduledAt")),
        ready=ready,
        placed_at=_time_or_none(
            meta["annotations"].get(PLACED_AT)
            if isinstance(meta.get("annotations"), Mapping)
            else None
        ),
        admission=verdict,
        admission_message=verdict_message,
        admission_at=verdict_at,
    ), notes


def admission_of(obj: Mapping) -> tuple[str | None, str, datetime | None]:
    """A replica's admission for its current placement: the recorded verdict if it binds
    the placement, else WaitingForAdmission if its Admitted condition says so."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    record = admission.record_from_status(_status(obj))
    if record is not None and record.binds(admission.placement_annotation(meta)):
        return record.verdict, record.message, record.decided_at
    condition = _condition(obj, admission.CONDITION)
    if condition.get("status") == "False" and condition.get("reason") == admission.WAITING:
        return admission.WAITING, str(condition.get("message", "")), None
    return None, "", None


# --- the fleet's other replicas, straight from the Structs --------------------------------------


class ReplicaIndex:
    """Every required ModelReplica, grouped by spec.clusterName, read lazily."""

    def __init__(
        self,
        resources: Iterable[struct_pb2.Struct],
        clusters: Iterable[str],
        own: set[tuple[str, str]],
        deployment: tuple[str, str],
    ) -> None:
        wanted = set(clusters)
        self._own = own
        self._deployment = deployment  # (namespace, name)
        self._by_cluster: dict[str, list[struct_pb2.Struct]] = {}
        self._charges: dict[str, tuple[Charge, ...]] = {}
        self.notes: list[str] = []
        for resource in resources:
            spec = get_struct(resource, "spec")
            cluster = get_str(spec, "clusterName")
            if cluster in wanted:
                self._by_cluster.setdefault(cluster, []).append(resource)

    def charges_for(self, cluster: str) -> tuple[Charge, ...]:
        if cluster not in self._charges:
            charges = []
            for resource in self._by_cluster.get(cluster, ()):
                charge = self._read(resource, cluster)
                if charge is not None:
                    charges.append(charge)
            self._charges[cluster] = tuple(sorted(charges, key=lambda c: (c.namespace, c.name)))
        return self._charges[cluster]

    def _read(self, resource: struct_pb2.Struct, cluster: str) -> Charge | None:
        meta = get_struct(resource, "metadata")
        identity = (get_str(meta, "namespace"), get_str(meta, "name"))
        if identity in self._own:
            return None  # ours: charged from the plan, not from the fleet listing
        found = get_struct(meta, "labels") if meta is not None else None
        if get_str(found, labels.DEPLOYMENT) == self._deployment[1] and get_str(
            found, labels.DEPLOYMENT_NAMESPACE
        ) in ("", self._deployment[0]):
            self.notes.append(
                f"ModelReplica {identity[0]}/{identity[1]} carries this deployment's labels but "
                "is not composed by it; charged as someone else's"
            )
        if admission.recorded_verdict(resource) == admission.OVERCOMMITTED:
            return None  # it holds nothing and its deployment re-places it (admission.md)
        return read_charge(resource, identity, cluster)


class InvalidOwnReplica(ValueError):
    """One of the deployment's own ModelReplicas cannot be read: nothing may be planned."""


@dataclass(frozen=True, slots=True)
class PlanningInputs:
    """Everything `placement.plan` needs besides the deployment, `now` and the matcher."""

    clusters: tuple[Cluster, ...]
    unreadable: Mapping[str, str]  # InferenceCluster name -> why it cannot be read
    own: tuple[OwnReplica, ...]
    failed: tuple[FailedPlacement, ...]
    remembered: tuple[MissingCluster, ...]
    index: ReplicaIndex
    notes: tuple[str, ...]  # input problems, in reading order (the index adds its own later)


def read_inputs(
    xr: Mapping,
    spec: DeploymentSpec,
    cluster_objects: Iterable[Mapping],
    own_observed: Mapping[str, Mapping],
    replica_structs: Iterable[struct_pb2.Struct],
) -> PlanningInputs:
    """Read the clusters, this deployment's replicas, its memories and the fleet's replicas.

    The one reader the shell (fn.py) and the test builders share. Raises
    InvalidOwnReplica when one of its own replicas is unreadable.
    """
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
    own: list[OwnReplica] = []
    for key, obj in own_observed.items():
        try:
            replica, replica_notes = read_own_replica(key, obj, spec)
        except ValueError as err:
            raise InvalidOwnReplica(str(err)) from err
        notes.extend(replica_notes)
        if replica is not None:
            own.append(replica)
    failed, failed_notes = read_failed_placements(xr)
    notes.extend(failed_notes)
    remembered, missing_notes = read_missing_clusters(xr)
    notes.extend(missing_notes)
    index = ReplicaIndex(
        replica_structs,
        (c.name for c in clusters),
        {(spec.namespace, r.name) for r in own},
        (spec.namespace, spec.name),
    )
    return PlanningInputs(
        tuple(clusters), unreadable, tuple(own), failed, remembered, index, tuple(notes)
    )
