"""Builders of API objects as the API server serves them, for the agent's tests and benchmark.

Each returns a plain JSON mapping of the real wire shape (resource.k8s.io/v1
for DRA objects), so what the tests feed the agent is what it reads from a
cluster. Test-only: it lives in the testkit so the agent's image does not ship it.

A builder's optional, keyword-only fields are named once, in a TypedDict
(`NodeFields`, `SliceFields`, ...), taken as `**fields: Unpack[...]` and read with
their defaults where they are used. Call sites stay plain keywords
(`node("n1", cordoned=True)`); mypy checks their names and types wherever it
checks the caller, and `fields.reject_unknown` raises TypeError for an unknown
one at run time, as a named parameter would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypedDict, Unpack

from modelplane_common import labels

from modelplane_testkit.fields import reject_unknown

NVIDIA = "gpu.nvidia.com"
NIC_DRIVER = "nic.example.com"


class NodeFields(TypedDict, total=False):
    ready: bool | None  # default True; None: booting, no Ready condition posted yet
    cordoned: bool  # default False
    taints: Sequence[Mapping]  # default none
    extra_labels: Mapping[str, str] | None  # default none
    allocatable: Mapping[str, str] | None  # default a roomy GPU node's (64 cpu, 512Gi, 110 pods)


def node(name: str, pool: str | None = "a100", **fields: Unpack[NodeFields]) -> dict:
    """A Node; `ready=None` is a booting node that has not posted a Ready condition yet.

    `allocatable` defaults to a roomy GPU node's (64 cpu, 512Gi, 110 pods).
    """
    reject_unknown(fields, NodeFields)
    node_labels = {"kubernetes.io/hostname": name, **(fields.get("extra_labels") or {})}
    if pool is not None:
        node_labels[labels.POOL] = pool
    ready = fields.get("ready", True)
    conditions = (
        []
        if ready is None
        else [{"type": "Ready", "status": "True" if ready else "False", "reason": "Kubelet"}]
    )
    taints = fields.get("taints", ())
    spec: dict = {"taints": list(taints)} if taints else {}
    if fields.get("cordoned", False):
        spec["unschedulable"] = True
    allocatable = fields.get("allocatable")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": spec,
        "status": {
            "conditions": conditions,
            "allocatable": dict(
                allocatable
                if allocatable is not None
                else {"cpu": "64", "memory": "512Gi", "pods": "110"}
            ),
        },
    }


def device(
    name: str,
    type_: str = "gpu",
    *,
    consumes: Mapping[str, Mapping[str, str]] | None = None,
    taints: Sequence[Mapping] = (),
    binding_conditions: Sequence[str] = (),
    shared: bool = False,
) -> dict:
    """A ResourceSlice device with a `type` attribute (and a uuid, unique like real GPUs);
    `shared`: it allows multiple allocations, a claim asking no capacity taking 10Gi of
    its memory."""
    out: dict = {
        "name": name,
        "attributes": {"type": {"string": type_}, "uuid": {"string": f"uuid-{name}"}},
        "capacity": {"memory": {"value": "80Gi"}},
    }
    if taints:
        out["taints"] = [dict(taint) for taint in taints]
    if binding_conditions:
        out["bindingConditions"] = list(binding_conditions)
        out["bindingFailureConditions"] = ["failed"]
    if shared:
        out["allowMultipleAllocations"] = True
        out["capacity"]["memory"]["requestPolicy"] = {"default": "10Gi"}
    if consumes:
        out["consumesCounters"] = [
            {"counterSet": counter_set, "counters": {k: {"value": v} for k, v in counters.items()}}
            for counter_set, counters in consumes.items()
        ]
    return out


class SliceFields(TypedDict, total=False):
    driver: str  # default NVIDIA
    name: str | None  # default "<node or fabric>-<driver>-<generation>"
    pool: str | None  # default the node's name, or "fabric"
    generation: int  # default 1
    slice_count: int  # default 1
    shared_counters: Mapping[str, Mapping[str, str]] | None  # default none


def resource_slice(
    node_name: str | None, devices: Iterable[Mapping], **fields: Unpack[SliceFields]
) -> dict:
    """A ResourceSlice; `node_name=None` is a network-attached slice (allNodes).

    `slice_count` is the pool's `resourceSliceCount`: how many slices of this
    generation the driver publishes for the pool.
    """
    reject_unknown(fields, SliceFields)
    driver = fields.get("driver", NVIDIA)
    generation = fields.get("generation", 1)
    slice_count = fields.get("slice_count", 1)
    pool_name = fields.get("pool") or node_name or "fabric"
    spec: dict = {
        "driver": driver,
        "pool": {"name": pool_name, "generation": generation, "resourceSliceCount": slice_count},
        "devices": list(devices),
    }
    if node_name is None:
        spec["allNodes"] = True
    else:
        spec["nodeName"] = node_name
    if shared_counters := fields.get("shared_counters"):
        spec["sharedCounters"] = [
            {"name": set_name, "counters": {k: {"value": v} for k, v in counters.items()}}
            for set_name, counters in shared_counters.items()
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": fields.get("name") or f"{node_name or 'fabric'}-{driver}-{generation}"
        },
        "spec": spec,
    }


def claim(
    name: str,
    devices: Iterable[tuple[str, str]],
    *,
    namespace: str = "default",
    driver: str = NVIDIA,
    owner_labels: Mapping[str, str] | None = None,
    admin_access: bool = False,
) -> dict:
    """A ResourceClaim; `devices` are (pool, device) pairs it has been allocated (none: pending).

    `admin_access` marks every result `adminAccess: true` (a monitoring claim).
    """
    results = [
        {"request": "devices", "driver": driver, "pool": pool, "device": dev}
        | ({"adminAccess": True} if admin_access else {})
        for pool, dev in devices
    ]
    status = {"allocation": {"devices": {"results": results}}} if results else {}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(owner_labels or {})},
        "spec": {"devices": {"requests": [{"name": "devices"}]}},
        "status": status,
    }


def taint_rule(
    name: str,
    effect: str = "NoSchedule",
    *,
    key: str = "example.com/unhealthy",
    selector: Mapping | None = None,
    **names: str,
) -> dict:
    """A DeviceTaintRule (written as resource.k8s.io/v1alpha3; v1beta2 and v1 share its
    schema, and the agent reads whichever is served) whose selector requires `names` (any of
    driver, pool, device); `selector` replaces the selector whole ({}: every device; the
    fields the API dropped in v1.35 can be put there to see that they are ignored)."""
    device_selector = dict(names) if selector is None else dict(selector)
    return {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {"deviceSelector": device_selector, "taint": {"key": key, "effect": effect}},
    }


def device_class(name: str, *expressions: str) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
    }


class PoolObservationFields(TypedDict, total=False):
    tolerations: Sequence[Mapping]  # default none
    status: Mapping | None  # default empty
    generation: int  # default 1
    min_pod_requests: Mapping[str, object] | None  # default unset
    max_age: object  # any value, to test lenient reading; default unset
    # kind name -> its declared {"attributes": ..., "capacity": ...}, as composed; default none
    declared: Mapping[str, Mapping]


def pool_observation(
    pool: str, kinds: Sequence[tuple[str, str, str]], **fields: Unpack[PoolObservationFields]
) -> dict:
    """A PoolObservation; `kinds` are (name, driver, deviceClassName)."""
    reject_unknown(fields, PoolObservationFields)
    tolerations = fields.get("tolerations", ())
    min_pod_requests = fields.get("min_pod_requests")
    max_age = fields.get("max_age")
    declared = fields.get("declared") or {}
    spec: dict = {
        "poolName": pool,
        "nodeSelector": {"matchLabels": {labels.POOL: pool}},
        "devices": [
            {"name": n, "driver": driver, "deviceClassName": cls, **declared.get(n, {})}
            for n, driver, cls in kinds
        ],
    }
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if min_pod_requests is not None:
        spec["minPodRequests"] = dict(min_pod_requests)
    if max_age is not None:
        spec["maxAge"] = max_age
    return {
        "apiVersion": labels.AGENT_API_VERSION,
        "kind": "PoolObservation",
        "metadata": {"name": pool, "generation": fields.get("generation", 1)},
        "spec": spec,
        "status": dict(fields.get("status") or {}),
    }


class PodFields(TypedDict, total=False):
    replica: str  # default "r"
    namespace: str  # default "team"
    node_name: str | None  # default unbound
    unschedulable: str | None  # kube-scheduler's message; default none
    phase: str  # default "Pending" ("Running" once bound)
    claims: Sequence[str]  # default none
    template_claims: Mapping[str, str | None] | None  # default none
    requests: Mapping[str, str] | None  # default none


def pod(name: str, **fields: Unpack[PodFields]) -> dict:
    """A pod. `claims` are ResourceClaims it names directly; `template_claims` maps
    each entry made from a template to the claim its status names for it (None: the
    status does not list it yet); `requests` are its one container's requests."""
    reject_unknown(fields, PodFields)
    replica = fields.get("replica", "r")
    namespace = fields.get("namespace", "team")
    node_name = fields.get("node_name")
    unschedulable = fields.get("unschedulable")
    phase = fields.get("phase", "Pending")
    claims = fields.get("claims", ())
    template_claims = fields.get("template_claims")
    requests = fields.get("requests")
    conditions = []
    if unschedulable is not None:
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable,
            }
        )
    entries = [{"name": f"claim-{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
    entries += [
        {"name": entry, "resourceClaimTemplateName": f"{entry}-template"}
        for entry in template_claims or {}
    ]
    spec: dict = {"nodeName": node_name} if node_name else {}
    if requests:
        spec["containers"] = [{"name": "main", "resources": {"requests": dict(requests)}}]
    if entries:
        spec["resourceClaims"] = entries
    status: dict = {"phase": "Running" if node_name and phase == "Pending" else phase}
    status["conditions"] = conditions
    resolved = [
        {"name": entry, "resourceClaimName": claim}
        for entry, claim in (template_claims or {}).items()
        if claim is not None
    ]
    if resolved:
        status["resourceClaimStatuses"] = resolved
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {labels.REPLICA: replica, labels.REPLICA_NAMESPACE: namespace},
        },
        "spec": spec,
        "status": status,
    }


def replica_observation(
    name: str = "r", namespace: str = "team", *, status: Mapping | None = None
) -> dict:
    return {
        "apiVersion": labels.AGENT_API_VERSION,
        "kind": "ReplicaObservation",
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": {
            "selector": {"matchLabels": {labels.REPLICA: name, labels.REPLICA_NAMESPACE: namespace}}
        },
        "status": dict(status or {}),
    }
