"""From the recorded watch events to one arm's figures: pure functions of what was seen.

Times are the objects' own (seconds since the epoch, parsed from RFC 3339):
a pod's `creationTimestamp`, its `PodScheduled` transitions, its
`deletionTimestamp`; a replica's `status.admission.decidedAt`; a pool's
`status.observedAt`; a deployment's `ReplicasScheduled` transitions. Every
process runs on one machine, so the control plane's and the agent's clocks
are the same clock.

Definitions (e2e/README.md, "Fleet scale on real components", states
them for readers):

- A pod **never bound** when kube-scheduler marked it Unschedulable and it was
  not bound by the end of the run or before it was deleted. Its replica's
  admission `a` is the latest `Admitted` verdict decided before the pod was
  created; its pool is the pod's `modelplane.ai/pool` node selector; `o`, the
  observation it was admitted on, is the pool's latest `observedAt` at or
  before `a` (in a Declared arm there is none, and `o = a`: every replica of
  the fleet is charged by the fallback). Its cause, first that holds:
  1. **stale observation** (Observed arms): no observation of the pool at `a`,
     or one older than the clusters' `maxAge`;
  2. **race between deployments**: a pod of another deployment was bound in
     the same pool after `o` and no later than kube-scheduler refused this
     pod, so capacity the admission counted on changed under it;
  3. **stale observation** (Observed arms): a pod of the fleet was bound in,
     or removed from, the pool after `o` and before `a`: the observation had
     not caught up with the pool;
  4. **the model**: none of these: the observation (or, Declared, the
     fallback) was current and nothing else moved in the pool, and the pod
     still did not fit. In a Declared arm this is the fallback's blindness to
     work outside the fleet.
- **Replicas placed**: replicas with a live pod set fully bound at the end;
  **admitted, not bound**: replicas live at the end whose latest admission
  verdict is `Admitted` and whose pods are not all bound.
- **Idle GPUs while a deployment waited** (under-promise): on a 5 s grid, while
  at least one deployment's `ReplicasScheduled` is False/InsufficientCapacity,
  the free GPUs (published minus the background and the bound pods of the
  fleet) on nodes where one pod of some waiting deployment would fit by its
  device counts alone; reported as the mean over that time and GPU-minutes.
- **Time to all pods bound**: from a deployment's creation to the bind of the
  last pod of its replicas, for deployments whose every replica was placed;
  the others count as never (a percentile that falls on them reads `never`).
- **Time to relay** (Observed arms): for each placed replica, from the bind
  of its last pod to the first `PodsScheduled` True transition of its
  ModelReplica at or after it: how long the agent's report took to reach the
  control plane (the agent, provider-kubernetes' watch, the control plane's
  watch cache, Crossplane, compose-model-replica). A replica never relayed by
  the end counts as never.
- **Stale writes** (what a loaded control plane does to the record): Crossplane
  reads an XR from its cache and writes the status its pipeline returns with
  a server-side apply, which no resourceVersion guards, so a reconcile that
  read an XR older than its last write puts older conditions back. Counted per
  arm: status updates in which some condition's `lastTransitionTime` moved
  back (replicas, deployments); placements whose admission was decided more
  than once (the verdict was overwritten and decided again); placed-at
  annotations that moved back (a deployment re-emitted an older placement);
  and placements that got both verdicts, `Admitted` and `Overcommitted`,
  which admission's order must never allow.
"""

from __future__ import annotations

import math
import re
import statistics
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from modelplane_common import labels

from modelplane_e2e.fleet import POOL_LABEL
from modelplane_e2e.scale.profile import GPU, NIC, Shape

REPLICA_LABEL = "modelplane.ai/replica"
ROLE_LABEL = "modelplane.ai/role"
DEPLOYMENT_LABEL = "modelplane.ai/deployment"
STALE, RACE, MODEL = "stale observation", "race between deployments", "the model"
CAUSES = (MODEL, RACE, STALE)
GRID = 5.0


def when(text: str | None) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


def _condition(obj: dict, kind: str) -> dict:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c
    return {}


def _in_namespace(events: Iterable[dict], namespace: str) -> Iterator[dict]:
    """The events whose object is in the namespace, in order."""
    for event in events:
        if event["object"].get("metadata", {}).get("namespace") == namespace:
            yield event


@dataclass
class PodRecord:
    key: str  # namespace/name/uid
    replica: str
    role: str
    pool: str
    created: float
    node: str = ""
    bound_at: float | None = None
    refused_at: float | None = None
    deleted_at: float | None = None
    gone: bool = False


def _new_pod(obj: dict) -> PodRecord:
    meta = obj["metadata"]
    labels = meta.get("labels") or {}
    return PodRecord(
        key=f"{meta['namespace']}/{meta['name']}/{meta['uid']}",
        replica=labels.get(REPLICA_LABEL, ""),
        role=labels.get(ROLE_LABEL, ""),
        pool=(obj["spec"].get("nodeSelector") or {}).get(POOL_LABEL, ""),
        created=when(meta["creationTimestamp"]) or 0.0,
    )


def _update_pod(record: PodRecord, kind: str, obj: dict) -> None:
    scheduled = _condition(obj, "PodScheduled")
    moment = when(scheduled.get("lastTransitionTime"))
    if scheduled.get("status") == "True" and record.bound_at is None:
        record.bound_at = moment
        record.node = obj["spec"].get("nodeName", "")
    elif scheduled.get("reason") == "Unschedulable" and record.refused_at is None:
        record.refused_at = moment
    deleted = when(obj["metadata"].get("deletionTimestamp"))
    if deleted and record.deleted_at is None:
        record.deleted_at = deleted
    if kind == "DELETED":
        record.gone = True


def pods(events: Iterable[dict], namespace: str) -> list[PodRecord]:
    """Every pod of the namespace the watch saw, with its first bind and refusal."""
    found: dict[str, PodRecord] = {}
    for event in _in_namespace(events, namespace):
        obj = event["object"]
        fresh = _new_pod(obj)
        record = found.setdefault(fresh.key, fresh)
        _update_pod(record, event["type"], obj)
    return list(found.values())


@dataclass
class ReplicaRecord:
    name: str
    deployment: str
    admitted: list[float] = field(default_factory=list)  # decidedAt of each Admitted verdict
    verdict: str = ""  # the latest verdict seen, for its current placement
    gone: bool = False
    relayed: list[float] = field(default_factory=list)  # each PodsScheduled True transition


def replicas(events: Iterable[dict], namespace: str) -> dict[str, ReplicaRecord]:
    found: dict[str, ReplicaRecord] = {}
    for event in _in_namespace(events, namespace):
        obj = event["object"]
        meta = obj["metadata"]
        name = meta["name"]
        deployment = (meta.get("labels") or {}).get(DEPLOYMENT_LABEL) or name.rsplit("-", 1)[0]
        record = found.setdefault(name, ReplicaRecord(name, deployment))
        verdict = (obj.get("status") or {}).get("admission") or {}
        decided = when(verdict.get("decidedAt"))
        if verdict.get("verdict") == "Admitted" and decided and decided not in record.admitted:
            record.admitted.append(decided)
        record.verdict = verdict.get("verdict", "")
        record.gone = event["type"] == "DELETED"
        scheduled = _condition(obj, "PodsScheduled")
        relayed = when(scheduled.get("lastTransitionTime"))
        if scheduled.get("status") == "True" and relayed and relayed not in record.relayed:
            record.relayed.append(relayed)
    return found


def observations(events: Iterable[dict], pool_names: set[str]) -> dict[str, list[float]]:
    """Each pool's `observedAt` values, sorted."""
    seen: dict[str, set[float]] = defaultdict(set)
    for event in events:
        obj = event["object"]
        pool = (obj.get("spec") or {}).get("poolName", "")
        at = when((obj.get("status") or {}).get("observedAt"))
        if pool in pool_names and at:
            seen[pool].add(at)
    return {pool: sorted(times) for pool, times in seen.items()}


@dataclass(frozen=True)
class StaleWrites:
    replica_conditions_back: int  # replica status updates with a condition moved back
    deployment_conditions_back: int
    decided_again: int  # placements whose admission was decided more than once
    placements_back: int  # placed-at annotations that moved to an earlier time
    both_verdicts: int  # placements both Admitted and Overcommitted: must be 0


def _transitions(obj: dict) -> dict[str, str]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {c.get("type", ""): c.get("lastTransitionTime") or "" for c in conditions}


def conditions_back(events: Iterable[dict], namespace: str) -> int:
    """Updates of an object in which some condition's lastTransitionTime is earlier than
    the one the previous update of that object carried."""
    last: dict[str, dict[str, str]] = {}
    back = 0
    for event in _in_namespace(events, namespace):
        obj = event["object"]
        name = obj["metadata"]["name"]
        now, before = _transitions(obj), last.get(name, {})
        back += any(t and before.get(kind, "") > t for kind, t in now.items())
        last[name] = now
    return back


def _placements(events: Iterable[dict], namespace: str) -> tuple[dict, int]:
    """Each (replica, placedAt) with the (verdict, decidedAt) pairs recorded for it, and
    how often a replica's placed-at annotation moved back."""
    decided: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    annotated: dict[str, str] = {}
    back = 0
    for event in _in_namespace(events, namespace):
        obj = event["object"]
        name = obj["metadata"]["name"]
        verdict = (obj.get("status") or {}).get("admission") or {}
        if verdict.get("placedAt") and verdict.get("verdict"):
            decided[(name, verdict["placedAt"])].add(
                (verdict["verdict"], verdict.get("decidedAt", ""))
            )
        placed = (obj["metadata"].get("annotations") or {}).get(labels.PLACED_AT, "")
        back += bool(placed and placed < annotated.get(name, ""))
        annotated[name] = placed or annotated.get(name, "")
    return decided, back


def stale_writes(
    replica_events: list[dict], deployment_events: list[dict], namespace: str
) -> StaleWrites:
    decided, placements_back = _placements(replica_events, namespace)
    return StaleWrites(
        replica_conditions_back=conditions_back(replica_events, namespace),
        deployment_conditions_back=conditions_back(deployment_events, namespace),
        decided_again=sum(1 for pairs in decided.values() if len(pairs) > 1),
        placements_back=placements_back,
        both_verdicts=sum(1 for pairs in decided.values() if len({v for v, _ in pairs}) > 1),
    )


@dataclass(frozen=True)
class Waiting:
    """A deployment's `ReplicasScheduled` reason over time: (since, reason), sorted."""

    deployment: str
    created: float
    reasons: tuple[tuple[float, str], ...]

    def reason_at(self, t: float) -> str:
        i = bisect_right([since for since, _ in self.reasons], t)
        return self.reasons[i - 1][1] if i else ""


def deployments(events: Iterable[dict], namespace: str) -> dict[str, Waiting]:
    created: dict[str, float] = {}
    reasons: dict[str, set[tuple[float, str]]] = defaultdict(set)
    for event in _in_namespace(events, namespace):
        obj = event["object"]
        meta = obj["metadata"]
        created[meta["name"]] = when(meta["creationTimestamp"]) or 0.0
        c = _condition(obj, "ReplicasScheduled")
        since = when(c.get("lastTransitionTime"))
        if since:
            reasons[meta["name"]].add((since, c.get("reason", "")))
    return {name: Waiting(name, at, tuple(sorted(reasons[name]))) for name, at in created.items()}


@dataclass(frozen=True)
class Arm:
    """Everything recorded for one arm, and what it was given."""

    name: str
    observed: bool
    max_age: float
    shapes: dict[str, Shape]
    pods: list[PodRecord]
    replicas: dict[str, ReplicaRecord]
    observations: dict[str, list[float]]
    deployments: dict[str, Waiting]
    background: dict[str, int]  # node -> GPUs other work holds
    node_pools: dict[str, str]  # node -> pool
    nic_pools: frozenset[str]
    end: float
    stale: StaleWrites = field(default_factory=lambda: StaleWrites(0, 0, 0, 0, 0))

    def shape_of(self, pod: PodRecord) -> Shape | None:
        replica = self.replicas.get(pod.replica)
        name = replica.deployment if replica else pod.replica.rsplit("-", 1)[0]
        return self.shapes.get(name)


def never_bound(arm: Arm) -> list[PodRecord]:
    return [p for p in arm.pods if p.refused_at is not None and p.bound_at is None]


def _admission(arm: Arm, pod: PodRecord) -> float:
    record = arm.replicas.get(pod.replica)
    before = [a for a in (record.admitted if record else []) if a <= pod.created]
    return max(before) if before else pod.created


def _observation(arm: Arm, pool: str, admitted: float) -> float | None:
    times = arm.observations.get(pool, [])
    i = bisect_right(times, admitted)
    return times[i - 1] if i else None


def _raced(arm: Arm, pod: PodRecord, since: float) -> bool:
    mine = arm.shape_of(pod)
    refused = pod.refused_at or arm.end
    return any(
        other.pool == pod.pool
        and other.bound_at is not None
        and since < other.bound_at <= refused
        and arm.shape_of(other) is not mine
        for other in arm.pods
    )


def _pool_moved(arm: Arm, pool: str, since: float, until: float) -> bool:
    changes = [
        t
        for p in arm.pods
        if p.pool == pool and p.bound_at is not None
        for t in (p.bound_at, p.deleted_at)
        if t is not None
    ]
    return any(since < t <= until for t in changes)


def cause(arm: Arm, pod: PodRecord) -> str:
    """The cause of one never-bound pod, by the module's definitions."""
    admitted = _admission(arm, pod)
    seen = _observation(arm, pod.pool, admitted) if arm.observed else admitted
    if seen is None or admitted - seen > arm.max_age:
        return STALE
    if _raced(arm, pod, seen):
        return RACE
    if arm.observed and _pool_moved(arm, pod.pool, seen, admitted):
        return STALE
    return MODEL


def causes(arm: Arm) -> dict[str, int]:
    counted = dict.fromkeys(CAUSES, 0)
    for pod in never_bound(arm):
        counted[cause(arm, pod)] += 1
    return counted


def _live_bound(arm: Arm) -> dict[str, list[PodRecord]]:
    by_replica: dict[str, list[PodRecord]] = defaultdict(list)
    for p in arm.pods:
        if p.bound_at is not None and not p.gone and p.deleted_at is None:
            by_replica[p.replica].append(p)
    return by_replica


def placed_replicas(arm: Arm) -> dict[str, float]:
    """Replicas whose every pod is bound at the end, with their last pod's bind time."""
    placed = {}
    for name, bound in _live_bound(arm).items():
        record = arm.replicas.get(name)
        shape = arm.shapes.get(record.deployment if record else "")
        if record and not record.gone and shape and len(bound) >= shape.pods_per_replica:
            placed[name] = max(p.bound_at or 0.0 for p in bound)
    return placed


def admitted_unbound(arm: Arm) -> list[str]:
    """Replicas live at the end, admitted for their current placement, whose pods are not
    all bound."""
    placed = placed_replicas(arm)
    return sorted(
        name
        for name, r in arm.replicas.items()
        if not r.gone and r.verdict == "Admitted" and name not in placed
    )


def times_to_bound(arm: Arm) -> list[float | None]:
    """Per deployment: seconds from creation to its last pod bound; None if never."""
    placed = placed_replicas(arm)
    by_deployment: dict[str, list[float]] = defaultdict(list)
    for name, at in placed.items():
        by_deployment[arm.replicas[name].deployment].append(at)
    out: list[float | None] = []
    for name, waiting in arm.deployments.items():
        done = by_deployment.get(name, [])
        complete = len(done) >= arm.shapes[name].replicas
        out.append(max(done) - waiting.created if complete else None)
    return out


def times_to_relay(arm: Arm) -> list[float]:
    """Per placed replica of an Observed arm: seconds from its last pod's bind to its
    first `PodsScheduled` True at or after it; `inf` if none by the end."""
    if not arm.observed:
        return []
    out = []
    for name, bound in placed_replicas(arm).items():
        after = [t for t in arm.replicas[name].relayed if t >= bound]
        out.append(min(after) - bound if after else math.inf)
    return out


# kube-apiserver's line when its watch cache of a resource is reset after an error on
# the cache's own watch of etcd: every watch of that resource is ended and its
# clients list it again.
_CACHE_RESET = re.compile(r"Terminating all watchers from cacher (\S+)")


def watch_cache_resets(apiserver_log: str) -> dict[str, int]:
    """How often the API server's watch cache of each resource was reset, from its log.
    In the full runs each reset followed the cache falling behind etcd by more than
    etcd keeps (compaction, every 5 min): every watcher of that resource had seen its
    changes that late."""
    counted: dict[str, int] = defaultdict(int)
    for match in _CACHE_RESET.finditer(apiserver_log):
        counted[match.group(1)] += 1
    return dict(sorted(counted.items()))


def _free_at(arm: Arm, t: float) -> dict[str, tuple[int, int]]:
    """Free (GPUs, NICs) per node at time t."""
    free = {
        node: (GPU.count - arm.background.get(node, 0), NIC.count if pool in arm.nic_pools else 0)
        for node, pool in arm.node_pools.items()
    }
    for p in arm.pods:
        shape = arm.shape_of(p)
        gone = p.deleted_at if p.deleted_at is not None else float("inf")
        if shape is None or p.bound_at is None or not (p.bound_at <= t < gone) or not p.node:
            continue
        gpus, nics = free.get(p.node, (0, 0))
        free[p.node] = (gpus - shape.gpus_of(p.role), nics - shape.nics_of(p.role))
    return free


def _idle_while_waiting(arm: Arm, t: float) -> int | None:
    """Free GPUs on nodes where one pod of a waiting deployment fits; None if none waits."""
    waiting = [
        arm.shapes[name]
        for name, w in arm.deployments.items()
        if w.reason_at(t) == "InsufficientCapacity"
    ]
    if not waiting:
        return None
    needs = {(m.gpus, m.nics) for s in waiting for m in s.members}
    return sum(
        gpus
        for gpus, nics in _free_at(arm, t).values()
        if any(gpus >= g and nics >= n for g, n in needs)
    )


@dataclass(frozen=True)
class UnderPromise:
    waited_minutes: float  # time during which some deployment waited for capacity
    mean_idle_gpus: float
    idle_gpu_minutes: float


def under_promise(arm: Arm, start: float) -> UnderPromise:
    samples = []
    t = start
    while t <= arm.end:
        idle = _idle_while_waiting(arm, t)
        if idle is not None:
            samples.append(idle)
        t += GRID
    minutes = len(samples) * GRID / 60
    mean = statistics.fmean(samples) if samples else 0.0
    return UnderPromise(minutes, mean, sum(samples) * GRID / 60)


def percentile(values: list[float], share: float) -> float | None:
    """The nearest-rank percentile of `values`, where `inf` stands for never (None when
    there are no values)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), -(-round(share * 100) * len(ordered) // 100)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Figures:
    arm: str
    replicas_wanted: int
    replicas_placed: int
    admitted_unbound: list[str]
    pods_created: int
    never_bound: dict[str, int]
    pending_at_end: int
    under: UnderPromise
    deployments: int
    arrival_span: float  # seconds from the first deployment's creation to the last's
    bound_deployments: int
    p50: float | None
    p99: float | None
    relay_p50: float | None  # None: a Declared arm, whose replicas nobody reports on
    relay_p99: float | None
    stale: StaleWrites


def _span(times: list[float]) -> float:
    return max(times) - min(times) if times else 0.0


def figures(arm: Arm, start: float) -> Figures:
    times = times_to_bound(arm)
    done = [t for t in times if t is not None]
    every = [math.inf if t is None else t for t in times]
    pending = [p for p in arm.pods if p.bound_at is None and p.refused_at is None and not p.gone]
    relays = times_to_relay(arm)
    return Figures(
        arm=arm.name,
        replicas_wanted=sum(s.replicas for s in arm.shapes.values()),
        replicas_placed=len(placed_replicas(arm)),
        admitted_unbound=admitted_unbound(arm),
        pods_created=len(arm.pods),
        never_bound=causes(arm),
        pending_at_end=len(pending),
        under=under_promise(arm, start),
        deployments=len(times),
        arrival_span=_span([w.created for w in arm.deployments.values()]),
        bound_deployments=len(done),
        p50=percentile(every, 0.50),
        p99=percentile(every, 0.99),
        relay_p50=percentile(relays, 0.50),
        relay_p99=percentile(relays, 0.99),
        stale=arm.stale,
    )
