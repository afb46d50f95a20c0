"""Wire to fleet: read InferenceClusters and ModelReplicas into the capacity types.

Shared by the scheduler and admission, so both see a cluster's pools and a
replica's charge the same way. The ModelReplicas can number thousands (an
11 MB request at 8,000), and `struct_to_dict` on them costs seconds, so
`read_charge` reads one straight from its protobuf Struct. `read_engines`
is the one reader of a ModelReplica's `spec.engines`: for those charges and
for a deployment's own replicas alike.

Readers never raise on malformed replicas: they read what they can. A
cluster whose spec breaks its schema raises `UnreadableCluster`, except for
its fallback fields: `read_fallbacks` reads a value outside the enum as
WholeNode and says so (modelplane_common.inputs states why).
"""

from __future__ import annotations

from collections.abc import Mapping

from google.protobuf import struct_pb2

from modelplane_common import cluster_tenancy, currency, pods_created
from modelplane_common.capacity.fit import NodeScoring
from modelplane_common.capacity.fleet import (
    Charge,
    Cluster,
    Fallback,
    PlacedEngine,
    PlacedMember,
    Pool,
    ResolvedRequest,
    Role,
    pods_per_copy,
)
from modelplane_common.devices import read_device_kinds
from modelplane_common.inputs import (
    InvalidInput,
    find_condition,
    inference_cluster_problems,
    observation_mode,
    problem,
    status_of,
    whole_number,
)
from modelplane_common.inputs import max_age as read_max_age
from modelplane_common.observation import (
    DeviceKinds,
    Rejected,
    declared_nodes,
    parse_observation,
)
from modelplane_common.selectors import EVERYTHING, LabelSelector, parse_label_selector
from modelplane_common.timeutil import parse_time_or_none
from modelplane_common.tolerations import Taint

# --- clusters ---------------------------------------------------------------------------------


class UnreadableCluster(ValueError):
    """A selected InferenceCluster whose spec breaks its schema; its replicas are held."""

    def __init__(self, name: str, defects: list[str]) -> None:
        super().__init__("; ".join(defects))
        self.name = name


FALLBACKS = tuple(str(f) for f in Fallback)
_ROLE_OF = {str(r): r for r in Role}


def _fallback(raw: object, path: str, inherited: Fallback) -> tuple[Fallback, str | None]:
    if raw is None:
        return inherited, None
    if isinstance(raw, str) and raw in FALLBACKS:
        return Fallback(raw), None
    return Fallback.WHOLE_NODE, problem(
        path, f"must be one of {', '.join(FALLBACKS)}; using {Fallback.WHOLE_NODE}", raw
    )


NODE_SCORINGS = tuple(str(s) for s in NodeScoring)


def read_node_scoring(spec: Mapping) -> tuple[NodeScoring, str | None]:
    """spec.nodeScoring; absent, Spread. A value outside the enum is Spread (the
    assumption before the field existed), with one line saying so."""
    raw = spec.get("nodeScoring")
    if raw is None:
        return NodeScoring.SPREAD, None
    if isinstance(raw, str) and raw in NODE_SCORINGS:
        return NodeScoring(raw), None
    return NodeScoring.SPREAD, problem(
        "spec.nodeScoring", f"must be one of {', '.join(NODE_SCORINGS)}; using Spread", raw
    )


def read_fallbacks(spec: Mapping) -> tuple[dict[str, Fallback], list[str]]:
    """Each pool's fallback by pool name, and one line per value read as WholeNode.

    A pool's own `nodePools[].fallback` wins; without one it inherits
    `observation.fallback`, whose absence is WholeNode. A value outside the
    enum, at either level, is WholeNode for whoever would have used it.
    """
    observation = spec.get("observation")
    raw = observation.get("fallback") if isinstance(observation, Mapping) else None
    cluster_wide, defect = _fallback(raw, "spec.observation.fallback", Fallback.WHOLE_NODE)
    defects = [defect] if defect else []
    chosen: dict[str, Fallback] = {}
    pools = spec.get("nodePools")
    for i, pool in enumerate(pools if isinstance(pools, list) else ()):
        if not isinstance(pool, Mapping):
            continue
        value, defect = _fallback(
            pool.get("fallback"), f"spec.nodePools[{i}].fallback", cluster_wide
        )
        chosen[str(pool.get("name"))] = value
        if defect:
            defects.append(defect)
    return chosen, defects


def _normal_devices(devices: object) -> list[dict] | None:
    if not isinstance(devices, list) or not all(isinstance(d, Mapping) for d in devices):
        return None
    return sorted(({"claim": "DRA", **d} for d in devices), key=lambda d: str(d.get("name")))


def read_cluster(obj: Mapping) -> tuple[Cluster, list[str]]:
    """An InferenceCluster: pools from spec (the truth about what exists), observations
    from status.gpuPools (published by compose-inference-cluster).

    Raises UnreadableCluster when the spec breaks the XRD's schema, and
    InvalidInput when the cluster has no name at all."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise InvalidInput("InferenceCluster metadata.name", "must be a non-empty string", name)
    spec = obj.get("spec")
    defects = inference_cluster_problems(spec)
    if defects:
        raise UnreadableCluster(name, defects)
    assert isinstance(spec, Mapping)
    notes: list[str] = []
    declared = observation_mode(spec.get("observation")) == "Declared"
    max_age, max_age_defect = read_max_age(spec.get("observation"))
    fallbacks, fallback_defects = read_fallbacks(spec)
    node_scoring, scoring_defect = read_node_scoring(spec)
    notes.extend(
        f"cluster {name}: {defect}"
        for defect in [max_age_defect, *fallback_defects, scoring_defect]
        if defect
    )
    gpu_pools = status_of(obj).get("gpuPools")
    published = {
        str(p.get("name")): p
        for p in (gpu_pools if isinstance(gpu_pools, list) else ())
        if isinstance(p, Mapping)
    }
    pools: list[Pool] = []
    for raw in sorted(spec.get("nodePools") or (), key=lambda p: str(p.get("name"))):
        devices = tuple(raw.get("devices") or ())
        device_kinds = read_device_kinds(devices)
        kinds = DeviceKinds.of(device_kinds)
        max_nodes = raw.get("maxNodeCount")
        nodes = declared_nodes(
            int(raw.get("nodeCount", 0)), int(max_nodes) if max_nodes is not None else None
        )
        pool_name = str(raw.get("name"))
        fallback = fallbacks[pool_name]
        entry = published.get(pool_name)
        observation = None if declared else parse_observation(entry, kinds, declared=nodes)
        distrust = None
        if isinstance(observation, Rejected):
            capped_by = ", never above the report's free capacity" if observation.ceiling else ""
            notes.append(
                f"cluster {name} pool {pool_name}: histogram rejected, "
                f"{fallback} accounting{capped_by}: {observation.message}"
            )
        elif (
            not declared
            and isinstance(entry, Mapping)
            and "devices" in entry
            and _normal_devices(entry["devices"]) != _normal_devices(list(devices))
        ):
            distrust = "the published devices differ from the declared ones (status lags spec)"
            notes.append(f"cluster {name} pool {pool_name}: {distrust}; {fallback} accounting")
        pools.append(
            Pool(
                cluster=name,
                name=pool_name,
                nodes=nodes,
                devices=device_kinds,
                kinds=kinds,
                observation=observation,
                distrust=distrust,
                current_until=(
                    currency.pool_current_until(entry, status_of(obj))
                    if isinstance(entry, Mapping)
                    else None
                ),
                fallback=fallback,
            )
        )
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
        for t in spec.get("taints") or ()
    )
    ready = find_condition(obj, "Ready").get("status") != "False"
    cluster = Cluster(
        name=name,
        pools=tuple(pools),
        taints=taints,
        ready=ready,
        max_age=max_age,
        access=read_access(name, spec.get("access")),
        tenancy=cluster_tenancy.read(spec),
        node_scoring=node_scoring,
    )
    return cluster, notes


def read_access(name: str, access: object) -> LabelSelector:
    """spec.access.namespaceSelector; absent, every namespace. Raises UnreadableCluster
    when it is not a valid LabelSelector (the schema cannot check every rule of one)."""
    raw = access.get("namespaceSelector") if isinstance(access, Mapping) else None
    if raw is None:
        return EVERYTHING
    try:
        return parse_label_selector(raw, "spec.access.namespaceSelector")
    except ValueError as err:
        raise UnreadableCluster(name, [str(err)]) from err


# --- replicas, straight from the Structs ------------------------------------------------------
#
# The fleet's replicas are read here by the thousand each pass (`make bench`), so the
# records below are built positionally, each argument read from the wire field of the
# record field's name: keyword construction cost 5-7 % of reading a charge.


def get_value(struct: struct_pb2.Struct, key: str) -> struct_pb2.Value | None:
    # get, never []: indexing a protobuf map with a missing key inserts it.
    return struct.fields.get(key)


def get_struct(struct: struct_pb2.Struct, key: str) -> struct_pb2.Struct | None:
    value = get_value(struct, key)
    return value.struct_value if value is not None and value.HasField("struct_value") else None


def get_str(struct: struct_pb2.Struct | None, key: str) -> str:
    value = get_value(struct, key) if struct is not None else None
    return value.string_value if value is not None else ""


def get_int(struct: struct_pb2.Struct | None, key: str, default: int) -> int:
    """A whole number (inputs.whole_number) at `key`, else the default."""
    value = struct.fields.get(key) if struct is not None else None
    if value is None or not value.HasField("number_value"):
        return default
    whole = whole_number(value.number_value)
    return whole if whole is not None else default


def get_list(struct: struct_pb2.Struct | None, key: str) -> list[struct_pb2.Value]:
    value = get_value(struct, key) if struct is not None else None
    if value is None or not value.HasField("list_value"):
        return []
    return list(value.list_value.values)


def _selectors(request: struct_pb2.Struct) -> tuple[str, ...]:
    selectors = get_list(request, "selectors")
    return tuple(get_str(get_struct(s.struct_value, "cel"), "expression") for s in selectors)


def _request(struct: struct_pb2.Struct) -> ResolvedRequest:
    return ResolvedRequest(
        get_str(struct, "name"),
        get_str(struct, "deviceClassName"),
        get_int(struct, "count", 1),
        # Most requests have none: skip building an empty tuple from a generator.
        _selectors(struct) if "selectors" in struct.fields else (),
    )


def _member(struct: struct_pb2.Struct) -> PlacedMember | None:
    role = _ROLE_OF.get(get_str(struct, "role") or Role.STANDALONE)
    if role is None:
        return None
    # Only a Worker's worker.nodes counts (rule "pods per copy"): read no other.
    nodes = get_int(get_struct(struct, "worker"), "nodes", 1) if role is Role.WORKER else None
    return PlacedMember(
        role,
        get_str(struct, "nodePoolName"),
        tuple([_request(r.struct_value) for r in get_list(struct, "deviceRequests")]),
        pods_per_copy(role, nodes),
    )


def read_engines(spec: struct_pb2.Struct | None) -> tuple[PlacedEngine, ...]:
    """A ModelReplica's `spec.engines` as placed engines: the one reader of a replica's
    engines, for the fleet's replicas (`read_charge`) and a deployment's own.

    Lenient, as readers of other replicas must be: a member of an unknown
    role is skipped, and so is an engine left without members; an absent
    count, copies or worker.nodes reads as 1.
    """
    engines = []
    for value in get_list(spec, "engines"):
        engine = value.struct_value
        members = [_member(m.struct_value) for m in get_list(engine, "members")]
        read = tuple([m for m in members if m is not None])
        if read:
            engines.append(
                PlacedEngine(get_str(engine, "name"), get_int(engine, "copies", 1), read)
            )
    return tuple(engines)


def read_charge(resource: struct_pb2.Struct, identity: tuple[str, str], cluster: str) -> Charge:
    """A ModelReplica pinned to `cluster`, read straight from its Struct, as a charge."""
    status = get_struct(resource, "status")
    pods_scheduled = released = False
    for value in get_list(status, "conditions"):
        condition = value.struct_value
        kind = get_str(condition, "type")
        if kind == "PodsScheduled":
            pods_scheduled = get_str(condition, "status") == "True"
        elif kind == pods_created.TYPE:
            released = pods_created.released(
                get_str(condition, "status"), get_str(condition, "reason")
            )
    scheduled_at = parse_time_or_none(get_str(status, "scheduledAt")) if pods_scheduled else None
    engines = read_engines(get_struct(resource, "spec"))
    return Charge(
        identity[0], identity[1], cluster, engines, pods_scheduled, scheduled_at, released
    )
