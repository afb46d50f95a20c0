"""Prometheus metrics of the three functions: what each call cost and what each pass decided.

Model
    Nothing here decides. Each function's shell translates what its core
    decided (the Outcome's conditions, its verdicts and changes) into a
    `Decided` record and hands it to `record`, which counts it; `guard.served`,
    the one path every RunFunction takes, counts each call's result, latency
    and bytes (`observe_call`), so a deadline exceeded or a crash is counted
    too. `serve` exposes the registry over HTTP (`/metrics`) on the address
    the runtime config gives (deploy/control-plane/functions.yaml sets
    METRICS_ADDRESS to `:8080`, the port Crossplane's Deployment runtime
    declares for every package, named `metrics`).

Counting passes, not objects
    Crossplane calls a function on every trigger and every TTL, and a pass
    repeated on the same (possibly stale) view decides the same again, so
    every counter here counts passes: `rate()` says how often the fleet is
    answered that way, not how many objects are in that state now. Which
    objects are in a state now is kube-state-metrics' job, from the XRs'
    conditions (deploy/monitoring/kube-state-metrics.yaml). A pass whose
    answer the deadline dropped is still counted: the core decided it.

Bounded labels (the cardinality bound, stated once)
    - function: the three function names.
    - result: ok, invalid_input, internal_error, deadline_exceeded.
    - type, status, reason: a condition's, each from the fixed sets of
      design/api.md (`CONDITION_TYPES`, `REASONS`, True/False/Unknown);
      anything else is counted as `Other`. The rows of design/api.md's
      condition tables bound the combinations: about 80 series.
    - cluster: an InferenceCluster's name as the XR carries it (at most 253
      characters of a DNS subdomain, else `invalid`): at most one value per
      InferenceCluster the process has seen since it started.
    - change, cause, verdict, stage: members of fixed enums (`PLACEMENT_CHANGES`,
      the diagnosis' `Cause`, `HEALING_CAUSES`, the pool verdicts, the
      admission verdicts). With C clusters, the per-cluster metrics hold at
      most C * (5 + 8 + 4 + 8 + 4) = 29 C series (each set plus `Other`).
    No label ever carries a message, a namespace, a deployment or a replica
    name: tenants name those.
"""

from __future__ import annotations

import re
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from modelplane_common.capacity.admission import ADMITTED, OVERCOMMITTED
from modelplane_common.capacity.admission import CONDITION as ADMITTED_CONDITION
from modelplane_common.capacity.diagnosis import Cause
from modelplane_common.capacity.quota import QUOTA_EXCEEDED
from modelplane_common.outcome import Condition

# The port Crossplane's Deployment runtime declares on every package's container
# (named `metrics`): where deploy/control-plane/functions.yaml has each function
# serve its metrics (METRICS_ADDRESS=":8080"). Without an address a function serves
# none, so processes run side by side on one host (render, the e2e) never collide.
METRICS_PORT = 8080
PATH = "/metrics"

OTHER = "Other"
INVALID_CLUSTER = "invalid"


# design/api.md's condition tables of the three kinds (tests/validation/test_monitoring_api.py
# checks them equal). Written as one string each, not as quoted names: a reason here is
# one the metrics accept, not one the code writes, and tests/validation/
# test_operating_guide.py finds the writers by their quoted names.
def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


CONDITION_TYPES = _words(
    """
    Ready Configured CapacityObserved AgentInstalled PodsScheduled PodsCreated WorkloadsReady
    WorkloadsComposed Admitted ReplicasScheduled ReplicasReady InputsValid
    """
)
STATUSES = frozenset({"True", "False", "Unknown"})
REASONS = _words(
    """
    ValidSpec InvalidSpec AllPoolsObserved SomePoolsUnobserved NoPoolObserved Declared
    Installed Installing InstallFailed NotRequested

    AllPodsScheduled PodsPending WaitingForPods Unschedulable NotObserved Created NotCreated
    Orphaned AllWorkloadsReady WorkloadsNotSynced WorkloadsNotReady NoEngines Composed
    ClusterNotResolved ClusterNotFound ClusterNotReady ClusterInvalid NamespaceReserved
    DeploymentNotResolved DeploymentNotFound TemplateDigestMismatch PriorityClassNotApproved
    PoolNotFound WaitingForAdmission Overcommitted Admitted GrowthNotAdmitted

    AllReplicasScheduled InsufficientCapacity QuotaExceeded ClusterUnavailable
    WaitingForInputs NoClusters InvalidDeployment InvalidSelector InvalidReplica
    AllReplicasReady ReplicasNotReady ScaledToZero DesiredReplicasUnknown ReplicasHeld
    InputsValid DegradedInputs

    Available Creating
    """
)

# The replica changes a pass decides (compose-model-deployment's placement.Change),
# without Kept and Held: those are states every pass repeats, not decisions.
PLACEMENT_CHANGES = frozenset({"Placed", "Moved", "Reshaped", "Stranded"})
# Why a replica was healed (re-placed): its PodsScheduled, Admitted or PodsCreated verdict.
HEALING_CAUSES = frozenset({"Unschedulable", "Overcommitted", "NotCreated"})
# How an InferenceCluster's pool reaches the scheduler (compose-inference-cluster's PoolVerdict).
POOL_VERDICTS = frozenset(
    {"Observed", "NotReported", "Blind", "Rejected", "Stale", "Declared", "NoAgent"}
)
SCHEDULED_CONDITION = "ReplicasScheduled"

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")

REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

REQUESTS = Counter(
    "modelplane_function_requests",
    "RunFunction calls answered, by function and result "
    "(ok, invalid_input, internal_error, deadline_exceeded).",
    ["function", "result"],
    registry=REGISTRY,
)
DURATION = Histogram(
    "modelplane_function_request_duration_seconds",
    "Time from a RunFunction call's arrival to its answer, waiting for a worker included.",
    ["function"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30),
    registry=REGISTRY,
)
_BYTES = (1e3, 1e4, 1e5, 1e6, 4e6, 16e6, 64e6)
REQUEST_BYTES = Histogram(
    "modelplane_function_request_bytes",
    "Size of each RunFunctionRequest (64 MB is the default limit, server.py).",
    ["function"],
    buckets=_BYTES,
    registry=REGISTRY,
)
RESPONSE_BYTES = Histogram(
    "modelplane_function_response_bytes",
    "Size of each RunFunctionResponse.",
    ["function"],
    buckets=_BYTES,
    registry=REGISTRY,
)
CONDITIONS = Counter(
    "modelplane_function_conditions",
    "Conditions written, one per pass per condition, by type, status and reason.",
    ["function", "type", "status", "reason"],
    registry=REGISTRY,
)
PLACEMENTS = Counter(
    "modelplane_placements",
    "Replicas a ModelDeployment pass placed, moved, reshaped or stranded, by cluster.",
    ["cluster", "change"],
    registry=REGISTRY,
)
REFUSALS = Counter(
    "modelplane_placement_refusals",
    "Pools refused to a replica that found no place, by cluster and cause.",
    ["cluster", "cause"],
    registry=REGISTRY,
)
HEALING = Counter(
    "modelplane_healing",
    "Replicas healed (re-placed), by the cluster they leave and the cause.",
    ["cluster", "cause"],
    registry=REGISTRY,
)
ADMISSIONS = Counter(
    "modelplane_admission_verdicts",
    "Admission verdicts reached (each placement's once), by cluster and verdict "
    "(Admitted, Overcommitted, QuotaExceeded).",
    ["cluster", "verdict"],
    registry=REGISTRY,
)
QUOTA_REFUSALS = Counter(
    "modelplane_quota_refusals",
    "Refusals by a namespace's device quota, by stage: placement (a ModelDeployment pass "
    "left replicas unplaced for it) or admission (a replica's verdict).",
    ["stage"],
    registry=REGISTRY,
)
POOLS = Counter(
    "modelplane_pool_verdicts",
    "InferenceCluster pools judged, one per pass per pool, by cluster and how the "
    "scheduler reads the pool (Observed, else by its fallback: Stale, NoAgent, ...).",
    ["cluster", "verdict"],
    registry=REGISTRY,
)


@dataclass(frozen=True, slots=True)
class Decided:
    """What one pass decided, in bounded terms: a shell builds it from its core's Outcome.

    Each pair is (cluster, value): the cluster as the XR or the fleet names it.
    `admission` is the verdict reached in this pass, with its message (which
    says whether a quota refused it); None when the pass reached none.
    """

    conditions: tuple[Condition, ...] = ()
    placements: tuple[tuple[str, str], ...] = ()  # (cluster, change)
    refusals: tuple[tuple[str, Cause], ...] = ()  # (cluster, cause)
    healed: tuple[tuple[str, str], ...] = ()  # (cluster, cause)
    pools: tuple[tuple[str, str], ...] = ()  # (cluster, verdict)
    admission: tuple[str, Condition] | None = None  # (cluster, the Admitted condition)


def bounded(value: str, allowed: frozenset[str]) -> str:
    """`value` when it is one of `allowed`, else `Other`."""
    return value if value in allowed else OTHER


def cluster_label(name: str) -> str:
    """A cluster's name as a label value: itself when it is a DNS subdomain, else `invalid`."""
    return name if _DNS_SUBDOMAIN.fullmatch(name) else INVALID_CLUSTER


def verdict_label(admitted: Condition) -> str:
    """An Admitted condition's verdict: Admitted, QuotaExceeded (an Overcommitted verdict a
    quota reached, design/api.md) or Overcommitted; `Other` for anything else."""
    if admitted.reason == OVERCOMMITTED and admitted.message.startswith(f"{QUOTA_EXCEEDED}:"):
        return QUOTA_EXCEEDED
    return bounded(admitted.reason, frozenset({ADMITTED, OVERCOMMITTED}))


def reached_admission(
    cluster: str, before: object, after: object, conditions: Iterable[Condition]
) -> tuple[str, Condition] | None:
    """The verdict a ModelReplica pass reached on `cluster`, for `Decided.admission`: its
    Admitted condition when the replica's `status.admission` after the pass (`after`, the
    Outcome's) records a placement or verdict the one before it (`before`) did not; None
    when it reached none (still waiting, or the sticky verdict repeated)."""
    if not isinstance(after, Mapping):
        return None
    if isinstance(before, Mapping) and all(
        after.get(key) == before.get(key) for key in ("placedAt", "verdict")
    ):
        return None
    admitted = next((c for c in conditions if c.type == ADMITTED_CONDITION), None)
    return (cluster, admitted) if admitted is not None else None


def quota_refused_placement(conditions: Iterable[Condition]) -> bool:
    """Whether a ModelDeployment pass left replicas unplaced for its namespace's quota."""
    return any(c.type == SCHEDULED_CONDITION and c.reason == QUOTA_EXCEEDED for c in conditions)


def record(function: str, decided: Decided) -> None:
    """Count what one pass of `function` decided.

    Equal label sets are summed first: a diagnosis over thousands of pools costs
    one increment per (cluster, cause), not one per pool.
    """
    conditions = Tally(
        (
            bounded(c.type, CONDITION_TYPES),
            bounded(c.status, STATUSES),
            bounded(c.reason, REASONS),
        )
        for c in decided.conditions
    )
    for (kind, status, reason), n in conditions.items():
        CONDITIONS.labels(function, kind, status, reason).inc(n)
    _count(PLACEMENTS, decided.placements, lambda v: bounded(v, PLACEMENT_CHANGES))
    _count(REFUSALS, decided.refusals, lambda cause: cause.name.lower())
    _count(HEALING, decided.healed, lambda v: bounded(v, HEALING_CAUSES))
    _count(POOLS, decided.pools, lambda v: bounded(v, POOL_VERDICTS))
    if quota_refused_placement(decided.conditions):
        QUOTA_REFUSALS.labels("placement").inc()
    if decided.admission is not None:
        _record_admission(*decided.admission)


def _count(counter: Counter, pairs: Iterable[tuple[str, Any]], label: Callable[[Any], str]) -> None:
    """Increment `counter` once per distinct (cluster, value) by how often it occurs,
    each labelled once (`cluster_label`, `label`) however many pools or replicas share it."""
    labelled: Tally[tuple[str, str]] = Tally()
    for (cluster, value), n in Tally(pairs).items():
        labelled[(cluster_label(cluster), label(value))] += n
    for (cluster, value), n in labelled.items():
        counter.labels(cluster, value).inc(n)


def _record_admission(cluster: str, admitted: Condition) -> None:
    verdict = verdict_label(admitted)
    ADMISSIONS.labels(cluster_label(cluster), verdict).inc()
    if verdict == QUOTA_EXCEEDED:
        QUOTA_REFUSALS.labels("admission").inc()


@dataclass(frozen=True, slots=True)
class Call:
    """One RunFunction call as `guard.served` saw it."""

    function: str
    result: str  # ok, invalid_input, internal_error, deadline_exceeded
    seconds: float
    request_bytes: int
    response_bytes: int


def observe_call(call: Call) -> None:
    """Count one RunFunction call."""
    REQUESTS.labels(call.function, call.result).inc()
    DURATION.labels(call.function).observe(call.seconds)
    REQUEST_BYTES.labels(call.function).observe(call.request_bytes)
    RESPONSE_BYTES.labels(call.function).observe(call.response_bytes)


def parse_address(address: str) -> tuple[str, int]:
    """`host:port` (host optional: every interface) as (host, port); ValueError if not."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--metrics-address: is not host:port (got {address!r})")
    return host.strip("[]") or "0.0.0.0", int(port)


def serve(address: str, log: Any) -> int | None:
    """Serve the registry on `address` (`host:port`; empty: not at all) in a daemon thread.

    Returns the port it listens on, or None. Metrics never stop a function: an
    address that cannot be bound (already in use, say) is logged and the
    function serves without metrics.
    """
    if not address:
        return None
    host, port = parse_address(address)
    try:
        server, _thread = start_http_server(port, addr=host, registry=REGISTRY)
    except OSError as err:
        log.warning("metrics not served", address=address, error=str(err))
        return None
    bound: int = server.server_port
    log.info("serving metrics", address=f"{host}:{bound}", path=PATH)
    return bound
