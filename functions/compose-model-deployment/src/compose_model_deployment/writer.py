"""Domain to wire: the desired ModelReplicas and the deployment's status."""

from __future__ import annotations

from collections.abc import Mapping

from modelplane_common import labels
from modelplane_common.outcome import unchanged as kept_unchanged
from modelplane_common.timeutil import format_time

from compose_model_deployment.model import FailedPlacement
from compose_model_deployment.placement import Plan, PlannedReplica
from compose_model_deployment.readers import PLACED_AT, DeploymentInput

KIND = "ModelReplica"


def resource_name(index: int) -> str:
    return f"replica-{index}"


def model_replica(deployment: DeploymentInput, replica: PlannedReplica) -> dict:
    spec = deployment.spec
    raw_by_name = {str(e.get("name")): e for e in deployment.raw_engines}
    engines = []
    for engine in replica.engines:
        raw_members = list((raw_by_name.get(engine.name) or {}).get("members") or ())
        members = []
        for position, member in enumerate(engine.members):
            raw = raw_members[position] if position < len(raw_members) else {}
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
            if member.role.value == "Worker":
                wire["worker"] = {"nodes": member.pods_per_copy}
            if raw.get("template") is not None:
                wire["template"] = raw["template"]
            members.append(wire)
        engines.append({"name": engine.name, "copies": engine.copies, "members": members})
    body: dict = {"clusterName": replica.cluster, "engines": engines}
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
                labels.CLUSTER: replica.cluster,
                labels.REPLICA_INDEX: str(replica.index),
            },
            "annotations": {PLACED_AT: format_time(replica.placed_at)},
        },
        "spec": body,
    }


def unchanged(observed: Mapping) -> dict:
    """An observed composed resource as desired state: identity, labels and spec only."""
    out = kept_unchanged(observed)
    out["apiVersion"] = out["apiVersion"] or labels.API_VERSION
    out["kind"] = out["kind"] or KIND
    return out


def failed_placements_wire(failures: tuple[FailedPlacement, ...]) -> list[dict]:
    out = []
    for f in failures:
        entry = {"cluster": f.cluster, "pool": f.pool, "expiresAt": format_time(f.expires_at)}
        if f.replica:
            entry["replica"] = f.replica
        if f.reason:
            entry["reason"] = f.reason[:1024]
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


def kept_status(observed: Mapping, desired: int | None, kept: int, ready: int) -> dict:
    """The status of a pass that planned nothing: counts of the kept replicas, and the
    memories (failedPlacements, missingClusters) passed through as they are."""
    status = replica_counts(desired if desired is not None else kept, kept, ready)
    for memory in ("failedPlacements", "missingClusters"):
        if isinstance(observed.get(memory), list):
            status[memory] = list(observed[memory])
    return status


def status(plan: Plan) -> dict:
    return {
        **replica_counts(plan.desired, plan.scheduled, plan.ready),
        "failedPlacements": failed_placements_wire(plan.failed_placements),
    }
