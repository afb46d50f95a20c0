"""The fleet a simulation runs on: each cluster's spec as the core reads it, and its true nodes.

Two inputs give the same `Fleet`:

    a fleet file    `shapes` (node shapes by name: each an InferenceCluster
                    `nodePools[].devices[]` list) and `clusters[]`, each with
                    `name`, `labels` and `pools[]`; a pool has `name`,
                    `nodes` (its node count), `shape` (a name in `shapes`)
                    or its own `devices` list, and
                    `background` (work outside the fleet, held for the whole
                    run: a list of `{nodes: N, used: {kind: count}}`, taken
                    from the first nodes of the pool); a cluster may
                    declare `scoring` (spread, pack or random): how its
                    kube-scheduler scores nodes, which its binder follows
                    instead of `--binder` (a packing binder's InferenceCluster
                    declares `spec.nodeScoring: Pack`, so the core assumes
                    the node it packs on). Top-level
                    `metricKinds` (default `[gpu]`) names the device kinds
                    counted as GPUs in the report, `maxAge` the clusters'
                    `spec.observation.maxAge` (default 5m).
    InferenceClusters  `kubectl get inferenceclusters -o yaml` (a List, one
                    object or a stream of them): pools and devices from spec, and the start
                    state of each pool's nodes from status.gpuPools when a
                    histogram is published there (read by the same
                    `parse_observation` the functions use); a pool without
                    one starts empty; `spec.nodeScoring` is the cluster's
                    `scoring`.

The simulator has no autoscaler: a pool has `nodeCount` nodes for the whole
run and `maxNodeCount` is dropped from the spec the core reads, so no policy
is credited with nodes that never join. A pool's own `fallback` is dropped
too: each policy sets how every pool is counted. Every spec is checked by the real
reader (`capacity.readers.read_cluster`); a defect is one line naming the
field and value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from modelplane_common import currency
from modelplane_common.capacity.readers import UnreadableCluster, read_cluster
from modelplane_common.inputs import InvalidInput, inference_cluster_problems, problem
from modelplane_common.observation import (
    DeviceKinds,
    FreeVector,
    Observation,
    parse_observation,
)
from modelplane_common.timeutil import format_time, parse_duration

from modelplane_sim.binder import NodeChoice, PoolNodes


class FleetError(ValueError):
    """A fleet input that cannot be simulated; str() is one line naming the field."""


@dataclass(frozen=True, slots=True)
class PoolStart:
    name: str
    kinds: DeviceKinds
    start: tuple[tuple[FreeVector, int], ...]  # the pool's nodes at time zero, by free vector

    def nodes(self) -> PoolNodes:
        return PoolNodes(self.kinds, self.start)

    def capacity(self) -> tuple[int, ...]:
        """Free devices per kind at time zero: what the fleet's replicas can ever use."""
        return PoolNodes(self.kinds, self.start).free_devices()


@dataclass(frozen=True, slots=True)
class ClusterShape:
    name: str
    labels: Mapping[str, str]
    spec: Mapping[str, Any]  # the InferenceCluster spec without `observation`
    pools: tuple[PoolStart, ...]
    # How the cluster's kube-scheduler scores nodes, when the fleet declares it (a fleet
    # file's `scoring`, an InferenceCluster's spec.nodeScoring): its binder follows it
    # instead of the run's, and a packing binder's InferenceCluster says nodeScoring: Pack.
    scoring: NodeChoice | None = None

    def inference_cluster(
        self,
        observation: Mapping,
        gpu_pools: Sequence[Mapping] = (),
        binder: NodeChoice = NodeChoice.SPREAD,
        vouched_until: datetime | None = None,
    ) -> dict:
        """The InferenceCluster the core reads: this spec, the policy's observation
        settings, `spec.nodeScoring: Pack` when its binder packs (spread and random
        leave the default, Spread) and, when the policy publishes, status.gpuPools
        with the lease on their verdicts (modelplane_common.currency)."""
        spec = {k: v for k, v in self.spec.items() if k != "nodeScoring"}
        spec["observation"] = dict(observation)
        if binder is NodeChoice.PACK:
            spec["nodeScoring"] = "Pack"
        obj: dict = {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "InferenceCluster",
            "metadata": {"name": self.name, "labels": dict(self.labels)},
            "spec": spec,
        }
        if gpu_pools:
            obj["status"] = {"gpuPools": [dict(p) for p in gpu_pools], "agent": {"present": True}}
            if vouched_until is not None:
                obj["status"]["agent"][currency.VOUCHED_UNTIL] = format_time(vouched_until)
        return obj


@dataclass(frozen=True, slots=True)
class Fleet:
    clusters: tuple[ClusterShape, ...]
    metric_kinds: frozenset[str]
    max_age: str = "5m"


def load(path: Path) -> Fleet:
    """A fleet file, or InferenceClusters: `kubectl get inferenceclusters -o yaml` (a List),
    one object, or a stream of them. Raises FleetError."""
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as err:
        raise FleetError(f"{path}: cannot be read as YAML: {err}") from err
    if not documents or not all(isinstance(d, Mapping) for d in documents):
        raise FleetError(problem(str(path), "must hold YAML objects", documents))
    first = documents[0]
    if len(documents) == 1 and first.get("kind") == "List":
        return from_inference_clusters(first.get("items"), metric_kinds=("gpu",))
    if first.get("kind") == "InferenceCluster":
        return from_inference_clusters(documents, metric_kinds=("gpu",))
    return from_fleet_file(first)


def _count(value: object, path: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FleetError(problem(path, f"must be a whole number of at least {minimum}", value))
    return value


def _background(
    raw: object, kinds: DeviceKinds, nodes: int, path: str
) -> tuple[tuple[FreeVector, int], ...]:
    """The pool's start state: `nodes` empty nodes, less the background on the first ones."""
    entries = raw if raw is not None else []
    if not isinstance(entries, list):
        raise FleetError(problem(path, "must be a list of {nodes, used}", raw))
    start: list[tuple[FreeVector, int]] = []
    busy = 0
    for i, entry in enumerate(entries):
        where = f"{path}[{i}]"
        if not isinstance(entry, Mapping):
            raise FleetError(problem(where, "must be an object {nodes, used}", entry))
        count = _count(entry.get("nodes"), f"{where}.nodes", 1)
        used = entry.get("used") or {}
        if not isinstance(used, Mapping) or not all(k in kinds.names for k in used):
            raise FleetError(problem(f"{where}.used", f"must map kinds {kinds.names}", used))
        vector = tuple(
            max(0, per - _count(used.get(name, 0), f"{where}.used.{name}"))
            for name, per in zip(kinds.names, kinds.per_node, strict=True)
        )
        start.append((vector, count))
        busy += count
    if busy > nodes:
        raise FleetError(problem(path, f"covers more than the pool's {nodes} nodes", busy))
    if nodes > busy:
        start.append((kinds.empty_node, nodes - busy))
    return tuple(start)


def _devices(raw: Mapping, shapes: Mapping, path: str) -> list:
    """The pool's node shape: its own `devices`, or the named entry of `shapes`."""
    if "shape" in raw:
        shape = raw["shape"]
        if not isinstance(shape, str) or shape not in shapes:
            raise FleetError(problem(f"{path}.shape", f"must name one of {sorted(shapes)}", shape))
        devices = shapes[shape]
        where = f"shapes.{shape}"
    else:
        devices = raw.get("devices")
        where = f"{path}.devices"
    if not isinstance(devices, list) or not devices:
        raise FleetError(problem(where, "must be a non-empty list of devices", devices))
    return list(devices)


def _pool(raw: object, shapes: Mapping, path: str) -> tuple[dict, PoolStart]:
    if not isinstance(raw, Mapping):
        raise FleetError(problem(path, "must be an object", raw))
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise FleetError(problem(f"{path}.name", "must be a non-empty string", name))
    nodes = _count(raw.get("nodes"), f"{path}.nodes", 1)
    devices = _devices(raw, shapes, path)
    kinds = DeviceKinds.from_declared(devices)
    start = _background(raw.get("background"), kinds, nodes, f"{path}.background")
    return {"name": name, "nodeCount": nodes, "devices": devices}, PoolStart(name, kinds, start)


def _credentials(name: str) -> dict:
    return {"secretRef": {"namespace": "modelplane-system", "name": name, "key": "kubeconfig"}}


def from_fleet_file(raw: Mapping) -> Fleet:
    shapes = raw.get("shapes") or {}
    if not isinstance(shapes, Mapping):
        raise FleetError(problem("shapes", "must map a shape name to its devices", shapes))
    clusters_raw = raw.get("clusters")
    if not isinstance(clusters_raw, list) or not clusters_raw:
        raise FleetError(problem("clusters", "must be a non-empty list", clusters_raw))
    clusters: list[ClusterShape] = []
    for c, cluster in enumerate(clusters_raw):
        path = f"clusters[{c}]"
        if not isinstance(cluster, Mapping) or not isinstance(cluster.get("name"), str):
            raise FleetError(problem(path, "must be an object with a name", cluster))
        pools = [
            _pool(p, shapes, f"{path}.pools[{i}]") for i, p in enumerate(cluster.get("pools") or [])
        ]
        if not pools:
            raise FleetError(problem(f"{path}.pools", "must be a non-empty list", None))
        spec = {"credentials": _credentials(cluster["name"]), "nodePools": [s for s, _ in pools]}
        shape = ClusterShape(
            cluster["name"],
            dict(cluster.get("labels") or {}),
            spec,
            tuple(p for _, p in pools),
            _scoring(cluster.get("scoring"), f"{path}.scoring"),
        )
        clusters.append(_checked(shape, path))
    kinds = raw.get("metricKinds", ["gpu"])
    if not isinstance(kinds, list) or not kinds or not all(isinstance(k, str) for k in kinds):
        raise FleetError(problem("metricKinds", "must be a non-empty list of kind names", kinds))
    max_age = raw.get("maxAge", "5m")
    try:
        parse_duration(max_age)
    except ValueError as err:
        raise FleetError(problem("maxAge", str(err), max_age)) from err
    return Fleet(tuple(clusters), frozenset(kinds), str(max_age))


def _scoring(raw: object, path: str) -> NodeChoice | None:
    if raw is None:
        return None
    choices = [c.value for c in NodeChoice]
    if raw not in choices:
        raise FleetError(problem(path, f"must be one of {choices}", raw))
    return NodeChoice(str(raw))


def _checked(shape: ClusterShape, path: str) -> ClusterShape:
    """The real reader must accept the spec the core will read."""
    try:
        read_cluster(shape.inference_cluster({"mode": "Declared"}))
    except (UnreadableCluster, InvalidInput) as err:
        raise FleetError(f"{path} ({shape.name}): {err}") from err
    return shape


def _observed_start(pool: Mapping, published: object, nodes: int) -> tuple[tuple, ...] | None:
    """A published histogram as the start state, plus the nodes it has yet to see."""
    if not isinstance(published, Mapping):
        return None
    kinds = DeviceKinds.from_declared(pool.get("devices") or [])
    observation = parse_observation(published, kinds)
    if not isinstance(observation, Observation):
        return None
    start = list(observation.histogram.buckets)
    unseen = nodes - observation.observed_nodes
    if unseen > 0:
        start.append((kinds.empty_node, unseen))
    return tuple(start)


def _published_pools(obj: Mapping) -> dict[str, Mapping]:
    status = obj.get("status")
    entries = status.get("gpuPools") if isinstance(status, Mapping) else None
    return {str(p.get("name")): p for p in entries or () if isinstance(p, Mapping)}


# Dropped from a live pool's spec: no autoscaler is simulated, and each policy's
# cluster-wide observation settings must decide for every pool.
_NOT_SIMULATED = ("maxNodeCount", "fallback")


# A live cluster's spec.nodeScoring decides its binder, as a fleet file's `scoring` does.
_DECLARED_SCORING = {"Spread": NodeChoice.SPREAD, "Pack": NodeChoice.PACK}


def _live_cluster(obj: object, path: str) -> ClusterShape:
    """One InferenceCluster as it is now: its spec, and its nodes as last published."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("spec"), Mapping):
        raise FleetError(problem(path, "must be an InferenceCluster with a spec", obj))
    defects = inference_cluster_problems(obj["spec"])
    if defects:
        raise FleetError(f"{path}: {defects[0]}")
    meta = obj.get("metadata") or {}
    published = _published_pools(obj)
    spec_pools: list[dict] = []
    starts: list[PoolStart] = []
    for pool in obj["spec"].get("nodePools") or ():
        name, nodes = str(pool.get("name")), int(pool.get("nodeCount", 0))
        kinds = DeviceKinds.from_declared(pool.get("devices") or [])
        start = _observed_start(pool, published.get(name), nodes)
        starts.append(PoolStart(name, kinds, start or ((kinds.per_node, nodes),)))
        spec_pools.append({k: v for k, v in pool.items() if k not in _NOT_SIMULATED})
    spec = {k: v for k, v in obj["spec"].items() if k != "observation"}
    spec["nodePools"] = spec_pools
    shape = ClusterShape(
        str(meta.get("name", "")),
        dict(meta.get("labels") or {}),
        spec,
        tuple(starts),
        _DECLARED_SCORING.get(str(spec.get("nodeScoring"))),
    )
    return _checked(shape, path)


def from_inference_clusters(items: object, metric_kinds: Sequence[str]) -> Fleet:
    if not isinstance(items, list) or not items:
        raise FleetError(problem("items", "must be a non-empty list of InferenceClusters", items))
    clusters = [_live_cluster(obj, f"items[{i}]") for i, obj in enumerate(items)]
    return Fleet(tuple(clusters), frozenset(metric_kinds))
