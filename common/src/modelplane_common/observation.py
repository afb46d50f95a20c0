"""Observed pool capacity: the one definition of a valid histogram.

The agent on a workload cluster reports, per pool, how many schedulable
nodes have each vector of free devices (`nodesByFreeDevices`), how many
nodes the pool has now (`observedNodes`, ready or not) and when it looked
(`observedAt`, on the agent's clock). compose-inference-cluster publishes
that report in the InferenceCluster status only if `parse_observation`
accepts it; compose-model-deployment parses the published copy with the
same function, so publisher and consumer can never disagree on validity.

Model
    A pool declares its device kinds (`devices[]`), each with a per-node
    `count`. Only DRA kinds are observed; Synthetic kinds are never counted.
    A node's free vector is a tuple of free counts in declared DRA order.
    A `Histogram` is a canonical multiset of such vectors: one bucket per
    distinct vector, buckets sorted most-free first (lexicographically
    descending in declared device order), node counts positive.

Invariants of an accepted observation
    - every free count is an int in [0, declared per-node count];
    - every key names a DRA device kind of the pool (a missing key is 0);
    - the buckets' nodes sum to at most `observedNodes`, since cordoned,
      NotReady and untolerably tainted nodes are counted there but not in
      the histogram;
    - `observedNodes` is at most the pool's declared nodes (maxNodeCount,
      else nodeCount) plus `surge_margin` of them: a pool does not grow
      beyond what it declares except briefly, by the nodes a surge upgrade
      adds before it drains the old ones. A larger count is a broken or
      forged report, and the histogram it bounds could promise nodes that
      do not exist;
    - at most MAX_BUCKETS buckets; with the XRD's 8 device kinds per node
      the agent must merge rarer vectors downwards (never upwards) to stay
      under it, or report Observing=False for the pool;
    - `observedAt` is an RFC 3339 time with a zone.

Anything else is rejected whole: a histogram that is partly wrong cannot be
trusted in the parts that look right, so the pool falls back to its fallback
accounting and the defect is reported. One exception keeps the fallback
honest: a well-formed report that breaks only a node-count bound carries its
histogram as a `Rejected.ceiling`. It is not believed as the pool's
capacity, but a report may only lower capacity: the fallback never counts
more free than that histogram shows (capacity/pools.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from modelplane_common.devices import DRA, DeviceKind, read_device_kinds
from modelplane_common.inputs import condition_in, problem, whole_number
from modelplane_common.outcome import capped, listed
from modelplane_common.timeutil import format_duration, format_time, parse_time

MAX_BUCKETS = 512

# A surge upgrade adds nodes before it drains the old ones: GKE one per pool
# by default, AKS 10% of the pool. A pool may report this many nodes above
# its declared count; a deeper surge (or a pool that outgrew its spec) is
# rejected, so the pool is counted by its fallback until it shrinks back or
# its maxNodeCount is raised (design/observation.md, "Valid report").
SURGE_FRACTION = 0.1

FreeVector = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DeviceKinds:
    """The DRA device kinds of one pool, in declared order, with per-node counts."""

    names: tuple[str, ...]
    per_node: tuple[int, ...]

    @classmethod
    def of(cls, kinds: Iterable[DeviceKind]) -> DeviceKinds:
        """The DRA kinds among a pool's device kinds; Synthetic kinds are never observed."""
        dra = [k for k in kinds if k.claim == DRA]
        return cls(names=tuple(k.name for k in dra), per_node=tuple(k.count for k in dra))

    @classmethod
    def from_declared(cls, devices: Iterable[object]) -> DeviceKinds:
        """The DRA kinds of a pool's declared `devices[]` (wire form)."""
        return cls.of(read_device_kinds(devices))

    @property
    def empty_node(self) -> FreeVector:
        """The free vector of a node nothing has claimed from."""
        return self.per_node


@dataclass(frozen=True, slots=True)
class Histogram:
    """Nodes counted by free-device vector; canonical (merged, sorted most-free first)."""

    buckets: tuple[tuple[FreeVector, int], ...]

    @classmethod
    def of(cls, counts: Iterable[tuple[FreeVector, int]]) -> Histogram:
        merged: dict[FreeVector, int] = {}
        for vector, nodes in counts:
            if nodes > 0:
                merged[vector] = merged.get(vector, 0) + nodes
        return cls(tuple(sorted(merged.items(), reverse=True)))

    @property
    def nodes(self) -> int:
        return sum(n for _, n in self.buckets)

    def to_wire(self, kinds: DeviceKinds) -> list[dict]:
        """The `nodesByFreeDevices` list, with every DRA key written out."""
        return [
            {"free": dict(zip(kinds.names, vector, strict=True)), "nodes": nodes}
            for vector, nodes in self.buckets
        ]


def is_fresh(observed_at: datetime, now: datetime, max_age: timedelta) -> bool:
    """An agent's report is fresh while younger than max_age.

    A report from more than max_age in the future is treated as stale too:
    a clock that far ahead would keep a dead agent's last report fresh for
    ever.
    """
    return staleness(observed_at, now, max_age) is None


def staleness(observed_at: datetime, now: datetime, max_age: timedelta) -> str | None:
    """Why a report is not fresh, in words; None when it is fresh.

    The words hold no counts that change from pass to pass, so a condition
    quoting them keeps its lastTransitionTime.
    """
    age = now - observed_at
    if age > max_age:
        return f"older than {format_duration(max_age)}"
    if -age > max_age:
        return (
            f"in the future, more than {format_duration(max_age)} ahead of the control "
            "plane's clock (check the agent's clock)"
        )
    return None


@dataclass(frozen=True, slots=True)
class Observation:
    observed_at: datetime
    observed_nodes: int
    histogram: Histogram

    def is_fresh(self, now: datetime, max_age: timedelta) -> bool:
        return is_fresh(self.observed_at, now, max_age)

    def staleness(self, now: datetime, max_age: timedelta) -> str | None:
        return staleness(self.observed_at, now, max_age)

    def to_wire(self, kinds: DeviceKinds) -> dict:
        return {
            "observedAt": format_time(self.observed_at),
            "observedNodes": self.observed_nodes,
            "nodesByFreeDevices": self.histogram.to_wire(kinds),
        }


@dataclass(frozen=True, slots=True)
class NotReported:
    """The agent has not (yet) reported on the pool: no defect, just fall back."""

    message: str


@dataclass(frozen=True, slots=True)
class Blind:
    """The agent says it cannot observe the pool (Observing=False)."""

    message: str


@dataclass(frozen=True, slots=True)
class Rejected:
    """The report breaks an invariant; every defect found is kept, and the message
    names the first few (`outcome.listed`): one report may hold thousands.

    `ceiling` is set when the report is well-formed and breaks only a node-count
    bound (more nodes than the pool declares plus the surge margin, or a
    histogram of more nodes than `observedNodes`): its histogram is not
    believed as the pool's capacity, but it still says truthfully how much is
    free AT MOST, so the pool's fallback never promises more than it shows
    ("a report may only lower capacity", capacity/pools.py).
    """

    defects: tuple[str, ...]
    ceiling: Observation | None = None

    @property
    def message(self) -> str:
        return listed(self.defects, "; ")


ParsedObservation = Observation | NotReported | Blind | Rejected


_NOT_REPORTED = "the agent has not reported on this pool yet"


def _observing_false(conditions: object) -> str | None:
    condition = condition_in(conditions, "Observing")
    if condition.get("status") != "False":
        return None
    # The agent's words, read from the workload cluster: capped once, here.
    reason = capped(str(condition.get("reason") or "NotObserving"))
    detail = capped(str(condition.get("message") or "the agent cannot observe this pool"))
    return capped(f"{reason}: {detail}")


def _observed_at(status: Mapping) -> tuple[datetime | None, list[str]]:
    try:
        return parse_time(status.get("observedAt")), []
    except ValueError as err:
        return None, [problem("observedAt", str(err), status.get("observedAt"))]


def _observed_nodes(status: Mapping) -> tuple[int | None, list[str]]:
    observed_nodes = whole_number(status.get("observedNodes"))
    if observed_nodes is None or observed_nodes < 0:
        return None, [
            problem("observedNodes", "must be a count of nodes", status.get("observedNodes"))
        ]
    return observed_nodes, []


def surge_margin(declared: int) -> int:
    """The nodes a pool may report beyond its declared ones: 10% of them, at least 1."""
    return max(1, math.ceil(declared * SURGE_FRACTION))


def _beyond_declared(observed_nodes: int | None, declared: int | None) -> list[str]:
    if observed_nodes is None or declared is None:
        return []
    margin = surge_margin(declared)
    if observed_nodes <= declared + margin:
        return []
    return [
        problem(
            "observedNodes",
            f"more than the pool's {declared} declared node(s) plus a surge margin of {margin}",
            observed_nodes,
        )
    ]


def _raw_buckets(status: Mapping, max_buckets: int) -> tuple[list, list[str]]:
    raw_buckets = status.get("nodesByFreeDevices")
    if raw_buckets is None:
        return [], []
    if not isinstance(raw_buckets, list):
        return [], [problem("nodesByFreeDevices", "must be a list", raw_buckets)]
    if len(raw_buckets) > max_buckets:
        return raw_buckets, [
            problem("nodesByFreeDevices", f"more than {max_buckets} buckets", len(raw_buckets))
        ]
    return raw_buckets, []


def _free_count(where: str, name: str, raw_count: object, per_node: int) -> int | str:
    """One kind's free count in a bucket, or the defect that rejects it."""
    count = whole_number(raw_count)
    if count is None or count < 0:
        return problem(f"{where}.free.{name}", "must be a non-negative count", raw_count)
    if count > per_node:
        return problem(f"{where}.free.{name}", f"above the {per_node} declared per node", count)
    return count


def _bucket(
    where: str, bucket: object, kinds: DeviceKinds, index_of: Mapping[str, int]
) -> tuple[tuple[FreeVector, int] | None, list[str]]:
    """One histogram bucket as (free vector, nodes); None when it cannot be counted at all."""
    if not isinstance(bucket, Mapping):
        return None, [problem(where, "must be an object", bucket)]
    nodes = whole_number(bucket.get("nodes"))
    if nodes is None or nodes < 1:
        return None, [problem(f"{where}.nodes", "must be a positive count", bucket.get("nodes"))]
    free = bucket.get("free", {})
    if not isinstance(free, Mapping):
        return None, [problem(f"{where}.free", "must be a map of device name to free count", free)]
    vector = [0] * len(kinds.names)
    defects: list[str] = []
    for name, raw_count in sorted(free.items()):
        if name not in index_of:
            defects.append(problem(f"{where}.free", "names an undeclared device kind", name))
            continue
        count = _free_count(where, name, raw_count, kinds.per_node[index_of[name]])
        if isinstance(count, str):
            defects.append(count)
            continue
        vector[index_of[name]] = count
    return (tuple(vector), nodes), defects


def parse_observation(
    status: Mapping | None,
    kinds: DeviceKinds,
    *,
    declared: int | None = None,
    max_buckets: int = MAX_BUCKETS,
) -> ParsedObservation:
    """Parse a PoolObservation status (or a published gpuPools entry).

    `declared` is the pool's declared nodes (`declared_nodes`); None only
    where no spec is at hand (the agent's own tests of its report's shape).

    Never raises: the caller turns NotReported, Blind and Rejected into
    conditions and events and falls back to whole-node accounting.
    """
    if not isinstance(status, Mapping) or not status:
        return NotReported(_NOT_REPORTED)
    blind = _observing_false(status.get("conditions"))
    if blind is not None:
        return Blind(blind)
    if "observedAt" not in status and "nodesByFreeDevices" not in status:
        return NotReported(_NOT_REPORTED)

    observed_at, defects = _observed_at(status)
    observed_nodes, nodes_defects = _observed_nodes(status)
    raw_buckets, bucket_defects = _raw_buckets(status, max_buckets)
    beyond = _beyond_declared(observed_nodes, declared)
    defects += nodes_defects + beyond + bucket_defects
    index_of = {name: i for i, name in enumerate(kinds.names)}
    counts: list[tuple[FreeVector, int]] = []
    for position, raw in enumerate(raw_buckets):
        bucket, found = _bucket(f"nodesByFreeDevices[{position}]", raw, kinds, index_of)
        defects += found
        if bucket is not None:
            counts.append(bucket)

    histogram = Histogram.of(counts)
    overcounted = _overcounted(histogram, observed_nodes)
    bounds = beyond + overcounted
    defects += overcounted
    if observed_at is None or observed_nodes is None:
        return Rejected(tuple(defects))
    observation = Observation(observed_at, observed_nodes, histogram)
    if not defects:
        return observation
    well_formed = len(defects) == len(bounds)
    return Rejected(tuple(defects), ceiling=observation if well_formed else None)


def _overcounted(histogram: Histogram, observed_nodes: int | None) -> list[str]:
    if observed_nodes is None or histogram.nodes <= observed_nodes:
        return []
    return [
        problem(
            "nodesByFreeDevices",
            f"counts more nodes than the {observed_nodes} observed",
            histogram.nodes,
        )
    ]


def declared_nodes(node_count: int, max_node_count: int | None) -> int:
    """The most nodes a pool can have: maxNodeCount, else nodeCount."""
    return max_node_count if max_node_count is not None else node_count


def growable_nodes(nodes: int, observed_nodes: int) -> int:
    """Empty nodes the pool can still grow by; clamped, since surge upgrades overshoot."""
    return max(0, nodes - observed_nodes)
