"""Domain to wire: the desired ModelReplicas and the deployment's status."""

from __future__ import annotations

from collections.abc import Mapping

from modelplane_common import labels, template_digest
from modelplane_common.capacity.fleet import PlacedMember, Role
from modelplane_common.outcome import capped
from modelplane_common.outcome import unchanged as kept_unchanged
from modelplane_common.timeutil import format_duration, format_placement_time, format_time

from compose_model_deployment.model import DeploymentInput, FailedPlacement, MissingCluster
from compose_model_deployment.placement import Change, Plan, PlannedReplica

KIND = "ModelReplica"


def resource_name(index: int) -> str:
    return f"replica-{index}"


def _member(member: PlacedMember, raw: Mapping) -> dict:
    wire: dict = {"role": member.role.value, "nodePoolName": member.pool}
    if member.requests:
        wire["deviceRequests"] = [
            {
                "name": r.name,
                "deviceClassName": r.device_class,
                "count": r.count,
                **(
                    {"selectors": [{"cel": {"expression": e}} for e in r.selectors]}
                    if r.selectors
                    else {}
                ),
            }
            for r in member.requests
        ]
    if member.role == Role.WORKER:
        wire["worker"] = {"nodes": member.pods_per_copy}
    template = raw.get("template")
    if isinstance(template, Mapping):
        # By reference: compose-model-replica renders it from the ModelDeployment while
        # the template there still has this digest (modelplane_common.template_digest).
        wire["templateDigest"] = template_digest.of(template)
    return wire


def model_replica(deployment: DeploymentInput, replica: PlannedReplica) -> dict:
    """A planned replica as its ModelReplica, naming by digest the templates the deployment
    gave its members (validated by readers.read_deployment before anything is planned)."""
    spec = deployment.spec
    raw_by_name = {str(e.get("name")): e for e in deployment.raw_engines}
    engines = []
    for engine in replica.engines:
        raw_members = list((raw_by_name.get(engine.name) or {}).get("members") or ())
        members = [
            _member(member, raw_members[position] if position < len(raw_members) else {})
            for position, member in enumerate(engine.members)
        ]
        engines.append({"name": engine.name, "copies": engine.copies, "members": members})
    body: dict = {
        "clusterName": replica.cluster,
        "engines": engines,
        # The replica judges PodsCreated itself (modelplane_common.pods_created).
        "missingPodsGracePeriod": format_duration(spec.missing_pods_grace),
    }
    if deployment.raw_tolerations:
        body["tolerations"] = [dict(t) for t in deployment.raw_tolerations]
    return {
        "apiVersion": labels.API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": replica.name,
            "namespace": spec.namespace,
            "labels": {
                **deployment.template_labels,
                labels.DEPLOYMENT: spec.name,
                labels.DEPLOYMENT_NAMESPACE: spec.namespace,
                labels.CLUSTER: labels.label_value(replica.cluster),
                labels.REPLICA_INDEX: str(replica.index),
                labels.CHARGE: labels.CHARGE_COUNTED if replica.counted else labels.CHARGE_PENDING,
            },
            "annotations": {labels.PLACED_AT: format_placement_time(replica.placed_at)},
        },
        "spec": body,
    }


def unchanged(observed: Mapping) -> dict:
    """An observed composed resource as desired state: identity, labels and spec only,
    its charge label set to pending: a pass that did not plan it has not judged whether
    its pools still count it (modelplane_common.capacity.charge_label)."""
    out = kept_unchanged(observed)
    out["apiVersion"] = out["apiVersion"] or labels.API_VERSION
    out["kind"] = out["kind"] or KIND
    meta = out["metadata"]
    found = meta.get("labels")
    meta["labels"] = {
        **(found if isinstance(found, Mapping) else {}),
        labels.CHARGE: labels.CHARGE_PENDING,
    }
    return out


def failed_placements_wire(failures: tuple[FailedPlacement, ...]) -> list[dict]:
    out = []
    for f in failures:
        entry = {"cluster": f.cluster, "pool": f.pool, "expiresAt": format_time(f.expires_at)}
        if f.replica:
            entry["replica"] = f.replica
        if f.reason:
            entry["reason"] = capped(f.reason)
        out.append(entry)
    return out


def replica_counts(desired: int, scheduled: int, ready: int) -> dict:
    """`status.replicas`, and the same counts as the `m/N` text the printer columns
    show (a column can print a field, not compute one)."""
    return {
        "replicas": {"desired": desired, "scheduled": scheduled, "ready": ready},
        "scheduled": f"{scheduled}/{desired}",
        "ready": f"{ready}/{desired}",
    }


def kept_status(memories: Mapping[str, list], desired: int | None, kept: int, ready: int) -> dict:
    """The status of a pass that planned nothing: counts of the kept replicas, and the
    memories (failedPlacements, missingClusters) passed through as they are."""
    return {
        **replica_counts(desired if desired is not None else kept, kept, ready),
        **{memory: list(entries) for memory, entries in memories.items()},
    }


def status(plan: Plan, missing: tuple[MissingCluster, ...]) -> dict:
    """The status of a pass that planned: its counts and both memories."""
    return {
        **replica_counts(plan.desired, plan.scheduled, plan.ready),
        "failedPlacements": failed_placements_wire(plan.failed_placements),
        "missingClusters": [{"name": m.name, "since": format_time(m.since)} for m in missing],
    }


def all_unchanged(own: Mapping[str, Mapping]) -> dict[str, dict]:
    """Every observed resource exactly as it is (a pass that planned nothing)."""
    return {key: unchanged(observed) for key, observed in own.items()}


def planned_resources(
    deployment: DeploymentInput, plan: Plan, own: Mapping[str, Mapping]
) -> dict[str, dict]:
    """The desired composed resources of a pass that planned, by composition name.

    Held and stranded replicas stay exactly as observed; observed resources
    that are not replicas of ours are kept, never dropped.
    """
    desired: dict[str, dict] = {}
    for replica in plan.replicas:
        key = resource_name(replica.index)
        if replica.change in (Change.STRANDED, Change.HELD) and key in own:
            desired[key] = unchanged(own[key])
        else:
            desired[key] = model_replica(deployment, replica)
    removed = {resource_name(r.index) for r in plan.removed}
    for key, observed in own.items():
        if key not in desired and key not in removed:
            desired[key] = unchanged(observed)
    return desired
