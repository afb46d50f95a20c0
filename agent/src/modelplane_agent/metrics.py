"""Prometheus metrics of the agent, in their own registry (served on /metrics)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry()

EVENTS = Counter(
    "modelplane_agent_events",
    "Watch events handled, by kind and type.",
    ["kind", "type"],
    registry=REGISTRY,
)
RECOMPUTE = Histogram(
    "modelplane_agent_recompute_seconds",
    "Time to apply a watch event or relist (what=event|relist), or to compute one "
    "observation's status (what=poolobservations|replicaobservations).",
    ["what"],
    buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5),
    registry=REGISTRY,
)
WRITES = Counter(
    "modelplane_agent_status_writes",
    "Status writes, by kind, reason (change|heartbeat) and result (ok|error).",
    ["kind", "reason", "result"],
    registry=REGISTRY,
)
LAST_PUBLISH = Gauge(
    "modelplane_agent_last_publish_timestamp_seconds",
    "When a pool's status was last written successfully (Unix time).",
    ["pool"],
    registry=REGISTRY,
)
WATCH_RESTARTS = Counter(
    "modelplane_agent_watch_restarts",
    "Watches restarted, by kind and cause (gone: relisted after 410; error: resumed).",
    ["kind", "cause"],
    registry=REGISTRY,
)
SYNCED = Gauge(
    "modelplane_agent_synced",
    "1 once a kind has been listed.",
    ["kind"],
    registry=REGISTRY,
)
STATUS_FAILURES = Counter(
    "modelplane_agent_status_failures",
    "Observations whose status could not be published in a pass for a reason other than "
    "the write's answer (counted in status_writes{result=error}), by kind: each is logged "
    "on the observation's logger and retried.",
    ["kind"],
    registry=REGISTRY,
)
TASK_RESTARTS = Counter(
    "modelplane_agent_task_restarts",
    "Watch or publisher tasks that ended unexpectedly and were started again, by task.",
    ["task"],
    registry=REGISTRY,
)
CURRENT = Gauge(
    "modelplane_agent_current",
    "1 while a kind is current (heard from within the silence bound, nothing failing "
    "since), as of the last publisher pass.",
    ["kind"],
    registry=REGISTRY,
)
PASSES = Counter(
    "modelplane_agent_publish_passes",
    "Publisher passes finished (one every tick while the agent is healthy).",
    registry=REGISTRY,
)
