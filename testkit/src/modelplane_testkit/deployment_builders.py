"""Builders of wire objects for tests, the simulation and the benchmark.

A test-only package: nothing here ships with the function. `schedule` hands
its wire dicts to the function's entrance (`compose_model_deployment.decide`),
so tests plan through the phases production runs, and a pass that plans
nothing fails the test (`NothingPlanned`). Everything here builds the dicts the
XRDs define (InferenceCluster, ModelDeployment, ModelReplica) and the
RunFunctionRequest Crossplane sends, so tests exercise the real readers.

A builder's optional, keyword-only fields are named once, in a TypedDict
(`PoolFields`, `ClusterFields`, ...), taken as `**fields: Unpack[...]` and read with
their defaults where they are used. Call sites stay plain keywords
(`pool("p", 4, max_nodes=8)`); mypy checks their names and types wherever it
checks the caller, and `fields.reject_unknown` raises TypeError for an unknown
one at run time, as a named parameter would.
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Literal, TypedDict, Unpack

import compose_model_deployment as scheduler
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common import currency, labels
from modelplane_common.capacity import quota
from modelplane_common.capacity.charge_label import counted_by_pools
from modelplane_common.capacity.readers import read_charge, read_cluster
from modelplane_common.devices import DeviceKind, DeviceRequest
from modelplane_common.inputs import max_age as read_max_age
from modelplane_common.timeutil import format_time, parse_time_or_none
from modelplane_devtools import render

from modelplane_testkit import wire
from modelplane_testkit.fields import reject_unknown

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)


def ago(minutes: float = 0, seconds: float = 0) -> str:
    return format_time(NOW - timedelta(minutes=minutes, seconds=seconds))


# --- matching stand-in --------------------------------------------------------------------

_DRIVER = re.compile(r"""^device\.driver\s*==\s*['"]([^'"]+)['"]$""")


class StandInMatch:
    __slots__ = ("claimed", "count", "kind", "request")

    def __init__(self, request: str, kind: str, count: int, claimed: bool) -> None:
        self.request, self.kind, self.count, self.claimed = request, kind, count, claimed


def stand_in_matcher(requests: Sequence[DeviceRequest], kinds: Sequence[DeviceKind]):
    """A trivial matcher for scheduler tests: a request matches the kind named like it,
    else the first kind whose driver its selectors name (only `device.driver == 'x'`
    and `true` compile); the kind must have at least the request's count per node."""
    out = []
    for request in requests:
        drivers = []
        for selector in request.selectors:
            expression = selector.strip()
            if expression == "true":
                continue
            found = _DRIVER.match(expression)
            if found is None:
                raise ValueError(f"CEL selector {expression!r}: does not compile")
            drivers.append(found.group(1))

        def ok(
            kind: DeviceKind, drivers: list[str] = drivers, request: DeviceRequest = request
        ) -> bool:
            return all(kind.driver == d for d in drivers) and kind.count >= request.count

        named = [k for k in kinds if k.name == request.name and ok(k)]
        chosen = named or ([k for k in kinds if ok(k)] if drivers else [])
        if not chosen:
            return None
        kind = chosen[0]
        out.append(StandInMatch(request.name, kind.name, request.count, kind.claimed))
    return tuple(out)


# --- InferenceCluster ---------------------------------------------------------------------


def device(
    name: str = "gpu",
    count: int = 8,
    *,
    claim: str = "DRA",
    device_class: str | None = None,
    driver: str = "gpu.nvidia.com",
) -> dict:
    d: dict = {"name": name, "count": count, "claim": claim}
    if claim == "DRA":
        d["deviceClassName"] = device_class or f"{name}.example.com"
        d["driver"] = driver
    return d


class PoolFields(TypedDict, total=False):
    max_nodes: int | None  # default unset
    histogram: Iterable[tuple[Mapping[str, int], int]] | None  # default unobserved
    observed_at: str | None  # default a minute ago
    observed_nodes: int | None  # default `nodes`
    fallback: object  # any value, to test lenient reading; default unset


def pool(
    name: str, nodes: int, devices: Sequence[dict] | None = None, **fields: Unpack[PoolFields]
) -> tuple[dict, dict]:
    """(spec.nodePools entry, status.gpuPools entry). A histogram makes the pool observed;
    `fallback` (any value, to test lenient reading) is the pool's own override."""
    reject_unknown(fields, PoolFields)
    max_nodes = fields.get("max_nodes")
    histogram = fields.get("histogram")
    observed_nodes = fields.get("observed_nodes")
    fallback = fields.get("fallback")
    devices = list(devices or [device()])
    spec: dict = {"name": name, "nodeCount": nodes, "devices": devices}
    if max_nodes is not None:
        spec["maxNodeCount"] = max_nodes
    if fallback is not None:
        spec["fallback"] = fallback
    status: dict = {
        "name": name,
        "nodes": max_nodes if max_nodes is not None else nodes,
        "devices": devices,
    }
    if histogram is not None:
        buckets = [{"free": dict(free), "nodes": n} for free, n in histogram]
        status.update(
            observedAt=fields.get("observed_at") or ago(1),
            observedNodes=observed_nodes if observed_nodes is not None else nodes,
            nodesByFreeDevices=buckets,
        )
    return spec, status


def random_histogram(nodes: int, rnd: random.Random) -> list[tuple[dict, int]]:
    """A benchmark pool's histogram: `nodes` nodes of 8 GPUs spread at random over
    0-8 free GPUs (9 vectors at most, bounded by devices per node, not by nodes)."""
    weights = [rnd.randint(0, 10) for _ in range(9)]
    total = sum(weights) or 1
    counts = [nodes * w // total for w in weights]
    counts[0] += nodes - sum(counts)
    return [({"gpu": free}, n) for free, n in enumerate(counts) if n]


class ClusterFields(TypedDict, total=False):
    cluster_labels: Mapping[str, str] | None  # default none
    taints: Sequence[Mapping]  # default none
    ready: bool | None  # default True; None: no Ready condition
    mode: str  # default "Observed"
    max_age: str  # default "5m"
    fallback: object  # any value, to test lenient reading; default unset
    namespace_selector: Mapping  # spec.access.namespaceSelector; default unset (every namespace)
    priority_class_names: Sequence[str]  # spec.tenancy.priorityClassNames; default unset (none)
    reserved_namespaces: Sequence[str]  # spec.tenancy.reservedNamespaces; default unset
    # status.agent.vouchedUntil; default currency.LEASE after NOW; None: unset.
    vouched_until: str | None


# The lease a cluster with render-test time tokens (modelplane_devtools.render) publishes:
# still to run when the case is rendered.
LEASE_TOKEN = "__NOW+30m__"


def _judged(status: dict, max_age: timedelta) -> dict:
    """A published pool as compose-inference-cluster judges it: an observed pool without
    its own `current` is current while its observedAt (a time against NOW, or a render
    token against the clock it is filled with) is within maxAge."""
    if "observedAt" not in status or currency.CURRENT in status:
        return status
    raw = status["observedAt"]
    offset = render.token_offset(raw)
    observed_at = NOW + offset if offset is not None else parse_time_or_none(raw)
    return {**status, currency.CURRENT: currency.is_current(observed_at, NOW, max_age)}


def _lease(pools: Sequence[tuple[dict, dict]]) -> str:
    """The lease on the verdicts: a render token when the pools' times are tokens."""
    tokens = any(render.token_offset(status.get("observedAt")) is not None for _, status in pools)
    return LEASE_TOKEN if tokens else format_time(NOW + currency.LEASE)


def cluster(name: str, pools: Sequence[tuple[dict, dict]], **fields: Unpack[ClusterFields]) -> dict:
    """An InferenceCluster; `fallback` (any value) is spec.observation.fallback."""
    reject_unknown(fields, ClusterFields)
    cluster_labels = fields.get("cluster_labels")
    taints = fields.get("taints", ())
    ready = fields.get("ready", True)
    mode = fields.get("mode", "Observed")
    max_age = fields.get("max_age", "5m")
    fallback = fields.get("fallback")
    obj: dict = {
        "apiVersion": labels.API_VERSION,
        "kind": "InferenceCluster",
        "metadata": {"name": name, "labels": dict(cluster_labels or {})},
        "spec": {
            "credentials": {"secretRef": {"namespace": "fleet", "name": name, "key": "kubeconfig"}},
            "nodePools": [spec for spec, _ in pools],
            "observation": {"mode": mode, "maxAge": max_age},
        },
        "status": {
            "gpuPools": [
                _judged(status, read_max_age({"maxAge": max_age})[0]) for _, status in pools
            ],
            "agent": {"present": True},
        },
    }
    vouched_until = fields.get("vouched_until", _lease(pools))
    if vouched_until is not None:
        obj["status"]["agent"][currency.VOUCHED_UNTIL] = vouched_until
    if fallback is not None:
        obj["spec"]["observation"]["fallback"] = fallback
    if taints:
        obj["spec"]["taints"] = [dict(t) for t in taints]
    if "namespace_selector" in fields:
        obj["spec"]["access"] = {"namespaceSelector": dict(fields["namespace_selector"])}
    tenancy: dict = {}
    if "priority_class_names" in fields:
        tenancy["priorityClassNames"] = list(fields["priority_class_names"])
    if "reserved_namespaces" in fields:
        tenancy["reservedNamespaces"] = list(fields["reserved_namespaces"])
    if tenancy:
        obj["spec"]["tenancy"] = tenancy
    if ready is not None:
        obj["status"]["conditions"] = [
            {"type": "Ready", "status": "True" if ready else "False", "reason": "Available"}
        ]
    return obj


# --- ModelDeployment ----------------------------------------------------------------------


def standalone(
    name: str = "serve",
    gpus: int = 1,
    copies: int = 1,
    kind: str = "gpu",
    selectors: Sequence[str] = (),
    priority_class: str | None = None,
) -> dict:
    """An engine of one Standalone member; `priority_class` is its template's
    priorityClassName (default unset)."""
    pod: dict = {"containers": [{"name": name}]}
    if priority_class is not None:
        pod["priorityClassName"] = priority_class
    member: dict = {"role": "Standalone", "template": {"spec": pod}}
    if gpus:
        member["nodeSelector"] = {"devices": [_request(kind, gpus, selectors)]}
    return {"name": name, "copies": copies, "members": [member]}


def gang(
    name: str = "gang",
    leader_gpus: int = 0,
    worker_gpus: int = 8,
    workers: int = 1,
    copies: int = 1,
    kind: str = "gpu",
) -> dict:
    leader: dict = {"role": "Leader", "template": {"spec": {"containers": [{"name": "leader"}]}}}
    if leader_gpus:
        leader["nodeSelector"] = {"devices": [_request(kind, leader_gpus, ())]}
    worker: dict = {
        "role": "Worker",
        "worker": {"nodes": workers},
        "template": {"spec": {"containers": [{"name": "worker"}]}},
    }
    if worker_gpus:
        worker["nodeSelector"] = {"devices": [_request(kind, worker_gpus, ())]}
    return {"name": name, "copies": copies, "members": [leader, worker]}


def _request(kind: str, count: int, selectors: Sequence[str]) -> dict:
    r: dict = {"name": kind, "count": count}
    if selectors:
        r["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return r


class DeploymentFields(TypedDict, total=False):
    match_labels: Mapping[str, str] | None  # default no cluster selector
    tolerations: Sequence[Mapping]  # default none
    template_labels: Mapping[str, str] | None  # default none
    healing: Mapping[str, str] | None  # default unset
    failed_placements: Sequence[Mapping]  # default none
    missing_clusters: Sequence[Mapping]  # status.missingClusters ({name, since}); default none
    scheduled: int | None  # status.replicas.scheduled; default unset
    cluster_spreading: str | None  # spec.clusterSpreading; default unset (the XRD's Spread)


def deployment(
    name: str = "llm",
    namespace: str = "team-a",
    replicas: int = 1,
    engines: Sequence[dict] | None = None,
    **fields: Unpack[DeploymentFields],
) -> dict:
    reject_unknown(fields, DeploymentFields)
    match_labels = fields.get("match_labels")
    tolerations = fields.get("tolerations", ())
    template_labels = fields.get("template_labels")
    healing = fields.get("healing")
    failed_placements = fields.get("failed_placements", ())
    missing_clusters = fields.get("missing_clusters", ())
    scheduled = fields.get("scheduled")
    spec: dict = {"engines": list(engines or [standalone()])}
    if match_labels is not None:
        spec["clusterSelector"] = {"matchLabels": dict(match_labels)}
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    template: dict = {"spec": spec}
    if template_labels:
        template["metadata"] = {"labels": dict(template_labels)}
    obj: dict = {
        "apiVersion": labels.API_VERSION,
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "template": template},
    }
    if healing:
        obj["spec"]["healing"] = dict(healing)
    if fields.get("cluster_spreading") is not None:
        obj["spec"]["clusterSpreading"] = fields["cluster_spreading"]
    status: dict = {}
    if failed_placements:
        status["failedPlacements"] = [dict(f) for f in failed_placements]
    if missing_clusters:
        status["missingClusters"] = [dict(m) for m in missing_clusters]
    if scheduled is not None:
        status["replicas"] = {"scheduled": scheduled}
    if status:
        obj["status"] = status
    return obj


# --- ModelReplica ---------------------------------------------------------------------------


class EngineFields(TypedDict, total=False):
    gpus: int  # per member (per worker for a gang); default 1
    copies: int  # default 1
    role: str  # default "Standalone"; any other role builds a Leader + Worker gang
    workers: int  # default 1
    leader_gpus: int  # default 0
    device_class: str  # default "gpu.example.com"


def replica_engine(name: str, pool_name: str, **fields: Unpack[EngineFields]) -> dict:
    reject_unknown(fields, EngineFields)
    device_class = fields.get("device_class", "gpu.example.com")
    gpus = fields.get("gpus", 1)

    def req(count: int) -> list[dict]:
        return [{"name": "gpu", "deviceClassName": device_class, "count": count}] if count else []

    members: list[dict]
    if (
        fields.get("role", "Standalone") == "Standalone"
    ):  # any other role builds a Leader + Worker gang
        members = [{"role": "Standalone", "nodePoolName": pool_name, "deviceRequests": req(gpus)}]
    else:
        members = [
            {
                "role": "Leader",
                "nodePoolName": pool_name,
                "deviceRequests": req(fields.get("leader_gpus", 0)),
            },
            {
                "role": "Worker",
                "nodePoolName": pool_name,
                "deviceRequests": req(gpus),
                "worker": {"nodes": fields.get("workers", 1)},
            },
        ]
    for m in members:
        if not m["deviceRequests"]:
            del m["deviceRequests"]
    return {"name": name, "copies": fields.get("copies", 1), "members": members}


class ReplicaStatusFields(TypedDict, total=False):
    pods_scheduled: str  # PodsScheduled status; default "True"
    reason: str  # PodsScheduled reason; default "AllPodsScheduled"
    since: str | None  # PodsScheduled lastTransitionTime; default 30 minutes ago
    scheduled_at: str | None  # default 30 minutes ago when scheduled, else unset
    ready: bool  # default True
    placed_at: str | None  # the placed-at annotation; default unset


class RunningReplicaFields(ReplicaStatusFields, total=False):
    extra_labels: Mapping[str, str] | None  # default none


class ReplicaFields(RunningReplicaFields, total=False):
    deployment_name: str | None  # default unlabelled (no owning deployment)
    index: int | None  # replica index label; default 0


def model_replica(
    name: str,
    namespace: str,
    cluster_name: str,
    engines: Sequence[dict],
    **fields: Unpack[ReplicaFields],
) -> dict:
    reject_unknown(fields, ReplicaFields)
    meta = _replica_metadata(name, namespace, cluster_name, fields)
    return {
        "apiVersion": labels.API_VERSION,
        "kind": "ModelReplica",
        "metadata": meta,
        "spec": {"clusterName": cluster_name, "engines": list(engines)},
        "status": _replica_status(fields),
    }


def _replica_metadata(name: str, namespace: str, cluster_name: str, fields: ReplicaFields) -> dict:
    deployment_name = fields.get("deployment_name")
    index = fields.get("index")
    placed_at = fields.get("placed_at")
    meta: dict = {"name": name, "namespace": namespace, "labels": {}}
    if deployment_name is not None:
        meta["labels"] = {
            labels.DEPLOYMENT: deployment_name,
            labels.DEPLOYMENT_NAMESPACE: namespace,
            labels.CLUSTER: cluster_name,
            labels.REPLICA_INDEX: str(index if index is not None else 0),
        }
    meta["labels"].update(fields.get("extra_labels") or {})
    if placed_at:
        meta["annotations"] = {labels.PLACED_AT: placed_at}
    return meta


def _replica_status(fields: ReplicaStatusFields) -> dict:
    pods_scheduled = fields.get("pods_scheduled", "True")
    scheduled_at = fields.get("scheduled_at")
    ready = fields.get("ready", True)
    conditions = [
        {
            "type": "PodsScheduled",
            "status": pods_scheduled,
            "reason": fields.get("reason", "AllPodsScheduled"),
            "lastTransitionTime": fields.get("since") or ago(30),
        }
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "Available" if ready else "Creating",
        }
    )
    status: dict = {"conditions": conditions}
    if scheduled_at is not None:
        status["scheduledAt"] = scheduled_at
    elif pods_scheduled == "True":
        status["scheduledAt"] = ago(30)
    return status


def running_replica(
    index: int = 0, cluster: str = "b", **observed: Unpack[RunningReplicaFields]
) -> dict:
    """Replica `index` of the deployment `deployment()` builds (team-a/llm), running:
    one 8-GPU engine "serve" on `cluster`'s pool "p", placed an hour ago, its pods
    scheduled and Ready. `observed` overrides model_replica's status arguments
    (ready=False, pods_scheduled="False", reason=..., since=..., placed_at=...) and
    may add `extra_labels`."""
    reject_unknown(observed, RunningReplicaFields)
    overrides: RunningReplicaFields = {"placed_at": ago(60), **observed}
    return model_replica(
        f"llm-{index}",
        "team-a",
        cluster,
        [replica_engine("serve", "p", gpus=8)],
        deployment_name="llm",
        index=index,
        **overrides,
    )


def charge_labelled(
    replicas: Sequence[dict], clusters: Sequence[dict], now: datetime = NOW
) -> list[dict]:
    """The replicas, each with the `modelplane.ai/charge` label its own deployment writes
    at `now` on these clusters (modelplane_common.capacity.charge_label)."""
    by_name = {str(c["metadata"]["name"]): read_cluster(c)[0] for c in clusters}
    out = []
    for body in replicas:
        labelled = copy.deepcopy(body)
        meta = labelled["metadata"]
        cluster = str(labelled["spec"]["clusterName"])
        charge = read_charge(
            resource.dict_to_struct(labelled), (meta["namespace"], meta["name"]), cluster
        )
        counted = counted_by_pools(charge, by_name.get(cluster), now)
        meta.setdefault("labels", {})[labels.CHARGE] = (
            labels.CHARGE_COUNTED if counted else labels.CHARGE_PENDING
        )
        out.append(labelled)
    return out


# --- requests and plans ----------------------------------------------------------------------


def namespace(name: str = "team-a", labels: Mapping[str, str] | None = None) -> dict:
    """A v1 Namespace, as the deployment requires its own."""
    meta: dict = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def device_quota(
    hard: Mapping[str, object], namespace: str = "team-a", name: str = "devices"
) -> dict:
    """A v1 ResourceQuota limiting devices per DeviceClass (`{"gpu.example.com": 8}`)."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"hard": {quota.quota_key(c): v for c, v in hard.items()}},
    }


class TenantFields(TypedDict, total=False):
    namespace_labels: Mapping[str, str] | None  # the Namespace's labels; default none
    quotas: Sequence[dict]  # its ResourceQuotas (device_quota); default none
    pending: Sequence[dict] | None  # the replicas fetched as pending (request); default all


class RequestFields(TypedDict, total=False):
    namespaces: Sequence[dict] | Literal["own"] | None  # default "own"; None: not fetched
    quotas: Sequence[dict] | None  # default none exists; None: not fetched
    pending: Sequence[dict] | None  # what the pending set holds; default every replica


def request(
    xr: dict,
    clusters: Sequence[dict] | None,
    replicas: Sequence[dict] | None,
    own: Mapping[str, dict] | None = None,
    **fields: Unpack[RequestFields],
) -> fnv1.RunFunctionRequest:
    """A RunFunctionRequest; None for an input means "not fetched yet". By default the
    deployment's Namespace is fetched (no labels) and no ResourceQuota exists.

    `replicas` are the fleet's other ModelReplicas, ALL of them: the request
    carries them under every requirement a placing pass can make (the pending
    ones, each given cluster's whole set, the namespace's), as if each were
    pending, so the pass plans on every one, as it did before the charge label.
    What Crossplane really fetches is narrower (wire.reconcile runs that loop).
    `pending`, when given, is what the pending set holds instead (the in-flight
    bound counts it: compose-model-deployment's in_flight.py); each cluster's
    whole set still holds every replica, so the same ones are charged."""
    reject_unknown(fields, RequestFields)
    namespaces = fields.get("namespaces", "own")
    quotas = fields.get("quotas", ())
    pending = fields.get("pending")
    deployment_namespace = str((xr.get("metadata") or {}).get("namespace", ""))
    if namespaces == "own":
        namespaces = [namespace(deployment_namespace)]
    fetched: dict[str, Sequence[dict] | None] = {
        scheduler.CLUSTERS: clusters,
        scheduler.PENDING_REPLICAS: replicas if pending is None or replicas is None else pending,
        scheduler.NAMESPACE: namespaces,
        scheduler.QUOTAS: quotas,
    }
    if clusters is not None and replicas is not None:
        fetched.update(_every_replica_by_requirement(clusters, replicas, deployment_namespace))
    return wire.request(
        xr, own, {name: items for name, items in fetched.items() if items is not None}
    )


def _every_replica_by_requirement(
    clusters: Sequence[dict], replicas: Sequence[dict], deployment_namespace: str
) -> dict[str, Sequence[dict] | None]:
    """Each cluster's whole set and the namespace's, out of every replica given."""
    out: dict[str, Sequence[dict] | None] = {
        scheduler.NAMESPACE_REPLICAS: [
            r
            for r in replicas
            if (r.get("metadata") or {}).get("namespace") == deployment_namespace
        ]
    }
    for cluster in clusters:
        name = str((cluster.get("metadata") or {}).get("name", ""))
        out[scheduler.whole_requirement(name)] = [
            r for r in replicas if (r.get("spec") or {}).get("clusterName") == name
        ]
    return out


class NothingPlanned(AssertionError):
    """The pass a test ran planned nothing: production would have kept every replica."""


def schedule(
    xr: dict,
    clusters: Sequence[dict],
    own: Mapping[str, dict] | None = None,
    others: Sequence[dict] = (),
    *,
    now: datetime = NOW,
    matcher=stand_in_matcher,
    **tenant_fields: Unpack[TenantFields],
) -> scheduler.Plan:
    """The plan of one pass through the function's entrance (`scheduler.decide`, the
    phases production runs), on a request that fetched every input (`request`): the
    clusters, every other replica, the deployment's Namespace and its quotas. Raises
    NothingPlanned, naming the reason, when the pass plans nothing."""
    reject_unknown(tenant_fields, TenantFields)
    ns = str((xr.get("metadata") or {}).get("namespace", ""))
    req = request(
        xr,
        clusters,
        others,
        own,
        namespaces=[namespace(ns, tenant_fields.get("namespace_labels"))],
        quotas=tenant_fields.get("quotas", ()),
        pending=tenant_fields.get("pending"),
    )
    outcome = scheduler.decide(req, now, matcher)
    if isinstance(outcome, scheduler.Unplanned):
        raise NothingPlanned(f"nothing planned: {outcome.why.reason}: {outcome.why.message}")
    return outcome.plan


def own_from_plan(xr: dict, plan: scheduler.Plan, **status) -> dict[str, dict]:
    """The plan's replicas as observed composed resources (for multi-pass tests)."""
    dep = scheduler.read_deployment(xr)

    out = {}
    for r in plan.replicas:
        obj = scheduler.model_replica(dep, r)
        obj["status"] = {
            "conditions": [
                {
                    "type": "PodsScheduled",
                    "status": status.get("pods_scheduled", "True"),
                    "reason": status.get("reason", "AllPodsScheduled"),
                    "lastTransitionTime": status.get("since", format_time(NOW)),
                },
                {"type": "Ready", "status": "True"},
            ],
            "scheduledAt": status.get("scheduled_at", format_time(NOW)),
        }
        out[scheduler.resource_name(r.index)] = obj
    return out
