"""Steady mode: a steady deployment reads only what it owns.

Crossplane starts every reconcile with no required resources, fetches
exactly what a response requires, calls again, and stops as soon as a
response requires what the previous one did (design/reconcile.md,
"Required resources"). The pass decides which inputs to ask for from what
is fetched, never from the clock:

    nothing fetched   a deployment that MAY be steady (at least one own
                      replica, at least `spec.replicas` of them, every one
                      readable and on a cluster an object can be named
                      after) requires its FOOTPRINT: each InferenceCluster
                      its replicas run on, by name (`requirement_name`), and
                      its tenant (tenancy.py). Any other deployment requires
                      the FLEET: every InferenceCluster its clusterSelector
                      selects and the ModelReplicas it must charge
                      (fleet_reads.py).
    footprint fetched the same planner runs on the footprint, with no other
                      replica (`footprint_clusters` reads only the pools in
                      use, and drops a cluster the clusterSelector does not
                      select, so it reads as absent exactly as in the fleet).
                      Its plan is accepted only when `is_steady` holds; then
                      the pass requires the footprint again and Crossplane
                      stops. Otherwise nothing is planned and the fleet is
                      required: a third call plans on it.
    fleet fetched     today's pass; it requires the fleet again.

Why an accepted plan is the fleet's plan (design/scheduler.md, "Steady
mode"): the planner reads the rest of the fleet only through the pool
ledgers (other replicas' charges, the namespace's quota use) and the
clusters new or moving replicas may go to, and reads those only when it
places something (`placement.fill`). Everything else it reads (retain,
heal, scale-down's victim order, absence, access and spec.tenancy: usable.py)
concerns the clusters the deployment's own replicas run on, which both modes
see alike (a footprint cluster is read with its whole spec). A plan
in which every surviving replica is KEPT, nothing is healed, held, missing
or unadmitted, no placement was diagnosed and no ledger was ever built
therefore never consulted the rest, so the fleet would plan it the same.
The one difference is what is reported about inputs it never reads: a
malformed InferenceCluster the deployment does not run on, or a rejected
histogram of a pool its replicas do not use, is listed in InputsValid by a
fleet pass and not by a steady one (`footprint_clusters` reads only the pools
in use).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from google.protobuf import struct_pb2
from modelplane_common.inputs import plain_value, struct_object
from modelplane_common.selectors import selects

from compose_model_deployment.model import DeploymentSpec, MissingCluster, OwnReplica
from compose_model_deployment.placement import Change, Plan

# The prefix of the name under which the shell requires one footprint cluster.
CLUSTER_PREFIX = "inference-cluster-"
# What an InferenceCluster can be named (a DNS-1123 subdomain). Crossplane gets a footprint
# cluster by name and fails the whole reconcile on a name the API refuses ("a/b"); a
# replica naming a cluster no object can be named reads the fleet, where it is missing.
_OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def requirement_name(cluster: str) -> str:
    return CLUSTER_PREFIX + cluster


def footprint(
    spec: DeploymentSpec, replicas: Sequence[OwnReplica] | None
) -> dict[str, frozenset[str]] | None:
    """The clusters the deployment's replicas run on, sorted, each with the pools they use
    there, when it may be steady; None when it must read the fleet (too few replicas, one
    that cannot be read: `replicas` None, or one on a cluster no object can be named)."""
    if not replicas or len(replicas) < spec.replicas:
        return None  # an unreadable one: the fleet pass reports it (InvalidReplica)
    pools: dict[str, set[str]] = {}
    for replica in replicas:
        pools.setdefault(replica.cluster, set()).update(replica.pools)
    if not all(len(c) <= 253 and _OBJECT_NAME.match(c) for c in pools):
        return None
    return {cluster: frozenset(pools[cluster]) for cluster in sorted(pools)}


def _selected(obj: Mapping, match_labels: Mapping[str, str]) -> bool:
    """Whether the clusterSelector selects this object, as Crossplane's matchLabels does."""
    meta = obj.get("metadata")
    found = meta.get("labels") if isinstance(meta, Mapping) else None
    return selects(match_labels, found if isinstance(found, Mapping) else {})


def _pool_name(entry: struct_pb2.Value) -> str | None:
    name = entry.struct_value.fields.get("name") if entry.HasField("struct_value") else None
    return name.string_value if name is not None and name.HasField("string_value") else None


def _in_use(cluster: struct_pb2.Struct, pools: frozenset[str]) -> dict:
    """A footprint cluster read from its Struct with `status.gpuPools` cut to the pools the
    deployment's replicas use there: a steady plan reads no other pool (it builds no
    ledger), and one that would is not kept. Reading every pool's histogram was most of a
    steady call. Anything not shaped as a list of named pools is read whole."""
    status = cluster.fields.get("status")
    listed = status.struct_value.fields.get("gpuPools") if status is not None else None
    if listed is None or not listed.HasField("list_value"):
        return struct_object(cluster)
    obj = {k: plain_value(v) for k, v in cluster.fields.items() if k != "status"}
    assert status is not None
    kept = {k: plain_value(v) for k, v in status.struct_value.fields.items() if k != "gpuPools"}
    kept["gpuPools"] = [
        plain_value(entry)
        for entry in listed.list_value.values
        if _pool_name(entry) is None or _pool_name(entry) in pools
    ]
    obj["status"] = kept
    return obj


def footprint_clusters(
    fetched: Mapping[str, Sequence[struct_pb2.Struct]],
    match_labels: Mapping[str, str],
    pools: Mapping[str, frozenset[str]],
) -> list[Mapping]:
    """The fetched footprint clusters the clusterSelector selects, by name, each with only
    the pools in use (`_in_use`)."""
    read = (
        _in_use(struct, pools.get(name, frozenset()))
        for name in sorted(fetched)
        for struct in fetched[name]
    )
    return [obj for obj in read if _selected(obj, match_labels)]


def is_steady(plan: Plan, missing: Sequence[MissingCluster]) -> bool:
    """Whether the plan is steady: it keeps every replica as it is and could not have
    depended on anything outside the footprint."""
    return (
        all(r.change is Change.KEPT for r in plan.replicas)
        and not plan.healed
        and not plan.unadmitted
        and plan.diagnosis is None
        and not plan.bases
        and not plan.others_notes
        and not missing
    )
