"""What compose-inference-cluster decides, as pure functions of typed inputs.

An InferenceCluster is a bring-your-own workload cluster with declared GPU
pools. This module decides, from the XR spec and what was observed on the
workload cluster, three things:

1. Which resources to compose on the workload cluster: a ClusterProviderConfig
   from the kubeconfig Secret; in Observed mode an observe-only Object for the
   agent's PoolObservation CRD; once that CRD has been seen, one
   PoolObservation Object per declared pool.
2. What to publish per pool in `status.gpuPools`: the declared fields always
   (`name`, `nodes`, `devices`), the observed fields (`observedAt`,
   `observedNodes`, `nodesByFreeDevices`) only when the agent's report passes
   `modelplane_common.observation.parse_observation`. Absence of the observed
   fields is the scheduler's signal to fall back to whole-node accounting.
3. Which conditions and events tell a platform engineer what happened.
4. Whether the cluster itself is Ready (`ready`; the shell states it as the
   XR's `Ready` instead of letting Crossplane derive it): when this pass
   composes the provider config (the credentials reference is complete)
   and every pool Object it composes or keeps is Ready. Ready says the
   control plane can compose on the cluster; it says nothing about
   capacity. `CapacityObserved=False` (Declared mode, no agent, a stale or
   rejected report) leaves it Ready: the scheduler counts those pools whole
   nodes, and only a cluster whose Ready is False gets no new replicas.

Invariants
    - A spec that breaks the XRD's schema (checked against the generated
      model, an unknown observation.mode included) decides nothing: every
      composed resource is kept and the previous status passed through,
      with one `field.path: reason (got value)` per defect.
    - Nothing already composed is dropped because an input is momentarily
      missing: a pool Object that exists stays desired while its pool is in
      the spec, even if the agent's CRD Object stops reporting.
    - A pool leaves the desired state only when it leaves a valid spec.
    - Declared mode composes no observation and publishes no observed fields.
    - The publisher does not judge freshness for publishing: it republishes
      the agent's `observedAt`, and the scheduler compares it with `maxAge`.
      It does report stale pools in its condition, from the `now` it is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from modelplane_common import labels
from modelplane_common.inputs import inference_cluster_problems, observation_mode
from modelplane_common.inputs import max_age as read_max_age
from modelplane_common.observation import (
    Blind,
    DeviceKinds,
    NotReported,
    Observation,
    Rejected,
    as_count,
    declared_nodes,
    parse_observation,
)
from modelplane_common.outcome import Condition, Event

PROVIDER_CONFIG = "provider-config"
AGENT_CRD = "agent-crd"
POOL_PREFIX = "pool-"
POOL_OBSERVATION_CRD = "poolobservations.agent.modelplane.ai"


def pool_resource_name(pool: str) -> str:
    """The composition resource name of a pool's PoolObservation Object."""
    return POOL_PREFIX + pool


@dataclass(frozen=True, slots=True)
class ObservedState:
    """What the function saw of its composed resources on the workload cluster.

    `pool_reports` maps a pool name to the PoolObservation status the agent
    wrote (None when the Object exists but carries no remote status yet); a
    pool missing from the map has no Object yet.
    """

    agent_crd_seen: bool = False
    pool_reports: Mapping[str, Mapping | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PoolVerdict:
    """How one pool's capacity reaches the scheduler."""

    pool: str
    observation: Observation | None
    reason: str  # Observed, NotReported, Blind, Rejected, Stale, Declared, NoAgent
    message: str


@dataclass(frozen=True, slots=True)
class Decision:
    provider_config: dict | None
    agent_crd: dict | None
    pool_objects: dict[str, dict]
    status: dict
    conditions: tuple[Condition, ...]
    events: tuple[Event, ...]
    verdicts: tuple[PoolVerdict, ...]
    # True when the spec could not be read: nothing observed may be removed.
    unresolved: bool = False


def provider_config(xr_name: str, secret_ref: Mapping) -> dict:
    return {
        "apiVersion": labels.OBJECT_API_VERSION,
        "kind": "ClusterProviderConfig",
        "metadata": {"name": xr_name},
        "spec": {
            "credentials": {
                "source": "Secret",
                "secretRef": {
                    "namespace": secret_ref["namespace"],
                    "name": secret_ref["name"],
                    "key": secret_ref["key"],
                },
            }
        },
    }


def _object(name: str, namespace: str, provider_config_name: str, manifest: dict) -> dict:
    return {
        "apiVersion": labels.OBJECT_API_VERSION,
        "kind": "Object",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "providerConfigRef": {"kind": "ClusterProviderConfig", "name": provider_config_name},
            "forProvider": {"manifest": manifest},
        },
    }


def agent_crd_object(xr_name: str, namespace: str) -> dict:
    """An observe-only Object whose only job is to tell whether the agent is installed."""
    obj = _object(
        f"{xr_name}-agent-crd",
        namespace,
        xr_name,
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": POOL_OBSERVATION_CRD},
        },
    )
    obj["spec"]["managementPolicies"] = ["Observe"]
    return obj


def fleet_tolerations(taints: object) -> list[dict]:
    """The cluster's taints as tolerations: every modelplane pod tolerates them, so the
    agent must not leave a node out of the histogram for carrying one."""
    if not isinstance(taints, list):
        return []
    return [
        {
            "key": str(t["key"]),
            "operator": "Equal",
            "value": str(t.get("value") or ""),
            "effect": str(t["effect"]),
        }
        for t in taints
        if isinstance(t, Mapping) and t.get("key") and t.get("effect")
    ]


def pool_observation_object(
    xr_name: str, namespace: str, pool: Mapping, tolerations: Sequence[Mapping] = ()
) -> dict:
    dra = DeviceKinds.from_declared(pool.get("devices") or [])
    by_name = {d["name"]: d for d in pool.get("devices") or []}
    spec: dict = {
        "poolName": pool["name"],
        "nodeSelector": {"matchLabels": {labels.POOL: pool["name"]}},
        "devices": [
            {
                "name": name,
                "driver": by_name[name].get("driver", ""),
                "deviceClassName": by_name[name].get("deviceClassName", ""),
            }
            for name in dra.names
        ],
    }
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    requests = pool.get("minPodRequests")
    if isinstance(requests, Mapping):
        # The smallest pod's requests: the agent counts a node that cannot hold one
        # as having no free devices (design/observation.md, "Non-device capacity").
        spec["minPodRequests"] = {
            k: _quantity_text(requests[k]) for k in ("cpu", "memory") if requests.get(k) is not None
        }
    manifest = {
        "apiVersion": labels.AGENT_API_VERSION,
        "kind": "PoolObservation",
        "metadata": {"name": pool["name"]},
        "spec": spec,
    }
    obj = _object(f"{xr_name}-pool-{pool['name']}", namespace, xr_name, manifest)
    # The agent rewrites status continuously; watching relays it within
    # seconds instead of at the provider's poll interval.
    obj["spec"]["watch"] = True
    return obj


def _quantity_text(value: object) -> str:
    """A quantity as Kubernetes writes it; numbers arrive from protobuf as floats."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _verdict(
    pool: Mapping,
    mode: str,
    agent_seen: bool,
    reports: Mapping[str, Mapping | None],
    now: datetime,
    max_age: timedelta,
) -> PoolVerdict:
    name = pool["name"]
    if mode == "Declared":
        return PoolVerdict(name, None, "Declared", "capacity is declared")
    if name not in reports and not agent_seen:
        return PoolVerdict(name, None, "NoAgent", "the agent is not installed on the cluster")
    parsed = parse_observation(reports.get(name), DeviceKinds.from_declared(pool["devices"]))
    match parsed:
        case Observation() if (stale := parsed.staleness(now, max_age)) is not None:
            return PoolVerdict(name, parsed, "Stale", f"observation is {stale}")
        case Observation():
            return PoolVerdict(name, parsed, "Observed", "observed")
        case NotReported(message) | Blind(message):
            return PoolVerdict(name, None, type(parsed).__name__, message)
        case Rejected():
            return PoolVerdict(name, None, "Rejected", parsed.message)
    raise AssertionError(parsed)  # pragma: no cover - the match is exhaustive


def _previously_observed(previous_status: Mapping) -> set[str]:
    pools = previous_status.get("gpuPools")
    return {
        p["name"]
        for p in (pools if isinstance(pools, list) else [])
        if isinstance(p, Mapping) and "observedAt" in p and isinstance(p.get("name"), str)
    }


def spec_defects(spec: Mapping) -> list[str]:
    """Everything the XRD's schema forbids in spec, one `path: reason (got value)` each."""
    return inference_cluster_problems(spec)


def unresolved(spec_problems: list[str], previous_status: Mapping) -> Decision:
    """A spec that breaks the schema decides nothing: keep everything, say why.

    The composed resources are kept by `kept_for_safety`, the published
    status is passed through unchanged (the scheduler judges its freshness
    itself), and the condition names every defect.
    """
    message = "; ".join(spec_problems)
    return Decision(
        provider_config=None,
        agent_crd=None,
        pool_objects={},
        status=dict(previous_status),
        conditions=(
            Condition(
                "Configured",
                "False",
                "InvalidSpec",
                (message + "; composed resources and published pools are kept as they are")[:1024],
            ),
        ),
        events=(Event("Warning", f"invalid spec: {message}"[:1024]),),
        verdicts=(),
        unresolved=True,
    )


def decide(
    xr_name: str,
    spec: Mapping,
    observed: ObservedState,
    previous_status: Mapping,
    now: datetime,
) -> Decision:
    """Decide the desired resources, status, conditions and events of one InferenceCluster."""
    problems = spec_defects(spec)
    if problems:
        return unresolved(problems, previous_status)
    # From here on spec conforms to the XRD's schema.
    pools = list(spec["nodePools"])
    mode = observation_mode(spec.get("observation"))
    conditions: list[Condition] = [Condition("Configured", "True", "ValidSpec", "")]
    events: list[Event] = []
    max_age, max_age_problem = read_max_age(spec.get("observation"))
    if max_age_problem:
        events.append(Event("Warning", max_age_problem))
    secret_ref = spec["credentials"]["secretRef"]
    pc = provider_config(xr_name, secret_ref)
    # Objects live beside the kubeconfig Secret: the namespace the platform
    # team already chose for this cluster's credentials.
    namespace = secret_ref.get("namespace") or ""

    observing = mode == "Observed"
    agent_crd = agent_crd_object(xr_name, namespace) if observing and namespace else None
    pool_objects: dict[str, dict] = {}
    if observing and namespace:
        for pool in pools:
            if pool.get("devices") and (
                observed.agent_crd_seen or pool["name"] in observed.pool_reports
            ):
                pool_objects[pool["name"]] = pool_observation_object(
                    xr_name, namespace, pool, fleet_tolerations(spec.get("taints"))
                )

    verdicts = tuple(
        _verdict(p, mode, observed.agent_crd_seen, observed.pool_reports, now, max_age)
        for p in pools
    )

    gpu_pools = []
    for pool, verdict in zip(pools, verdicts, strict=True):
        entry = {
            "name": pool["name"],
            "nodes": declared_nodes(
                as_count(pool.get("nodeCount")) or 0, as_count(pool.get("maxNodeCount"))
            ),
            "devices": list(pool.get("devices") or []),
        }
        if verdict.observation is not None:
            kinds = DeviceKinds.from_declared(pool["devices"])
            entry.update(verdict.observation.to_wire(kinds))
        gpu_pools.append(entry)

    status: dict = {
        "gpuPools": gpu_pools,
        "agent": {"present": observed.agent_crd_seen},
        "observedPoolCount": sum(1 for v in verdicts if v.observation is not None),
    }
    if pc is not None:
        status["providerConfigRef"] = {"name": xr_name}

    conditions.append(_capacity_condition(mode, verdicts))
    events.extend(_verdict_events(verdicts, _previously_observed(previous_status)))
    return Decision(
        provider_config=pc,
        agent_crd=agent_crd,
        pool_objects=pool_objects,
        status=status,
        conditions=tuple(conditions),
        events=tuple(events),
        verdicts=verdicts,
    )


def _capacity_condition(mode: str, verdicts: tuple[PoolVerdict, ...]) -> Condition:
    if mode == "Declared":
        return Condition(
            "CapacityObserved",
            "False",
            "Declared",
            "observation.mode is Declared: the scheduler counts whole nodes in every pool",
        )
    observed = [v.pool for v in verdicts if v.reason == "Observed"]
    fallback = [v for v in verdicts if v.reason != "Observed"]
    if not fallback:
        return Condition(
            "CapacityObserved", "True", "AllPoolsObserved", "observed: " + ", ".join(observed)
        )
    parts = []
    if observed:
        parts.append("observed: " + ", ".join(observed))
    parts.append("whole-node fallback: " + "; ".join(f"{v.pool} ({v.message})" for v in fallback))
    reason = "NoPoolObserved" if not observed else "SomePoolsUnobserved"
    return Condition("CapacityObserved", "False", reason, "; ".join(parts))


def _verdict_events(
    verdicts: tuple[PoolVerdict, ...], previously_observed: set[str]
) -> list[Event]:
    events = []
    for verdict in verdicts:
        published = verdict.observation is not None
        if verdict.reason == "Rejected":
            events.append(
                Event(
                    "Warning",
                    f"pool {verdict.pool}: observation rejected, falling back to whole-node "
                    f"accounting: {verdict.message}",
                )
            )
        elif published and verdict.pool not in previously_observed:
            events.append(Event("Normal", f"pool {verdict.pool}: publishing observed capacity"))
        elif not published and verdict.pool in previously_observed:
            events.append(
                Event(
                    "Warning",
                    f"pool {verdict.pool}: observation withdrawn ({verdict.message}), "
                    "falling back to whole-node accounting",
                )
            )
    return events


def kept_for_safety(observed_names: set[str], decision: Decision, spec: Mapping) -> set[str]:
    """Observed resources to keep although this pass did not decide to compose them.

    Only two things remove a composed resource, and only when the spec is
    valid: its pool left the spec, or the cluster switched to Declared
    mode. Anything else missing from this pass (an invalid spec, credentials
    being edited, the agent CRD Object momentarily not reporting) is an
    input problem, and input problems never delete.
    """
    desired = {name for name, _ in desired_items(decision)}
    if decision.unresolved:
        return observed_names - desired
    declared = observation_mode(spec.get("observation")) == "Declared"
    in_spec = {p["name"] for p in spec["nodePools"]}
    kept = set()
    for name in observed_names - desired:
        if name.startswith(POOL_PREFIX) and (declared or name[len(POOL_PREFIX) :] not in in_spec):
            continue
        if name == AGENT_CRD and declared:
            continue
        kept.add(name)
    return kept


def ready(decision: Decision, pool_objects_ready: Mapping[str, bool]) -> bool:
    """The cluster's own readiness, given each pool Object of the desired state (composed
    or kept) and whether it is observed Ready. The agent CRD Object never counts: a
    cluster without the agent is a supported cluster, not a broken one."""
    return decision.provider_config is not None and all(pool_objects_ready.values())


def desired_items(decision: Decision) -> list[tuple[str, dict]]:
    """The composed resources of a decision, by composition resource name."""
    items = []
    if decision.provider_config is not None:
        items.append((PROVIDER_CONFIG, decision.provider_config))
    if decision.agent_crd is not None:
        items.append((AGENT_CRD, decision.agent_crd))
    items.extend((pool_resource_name(p), obj) for p, obj in sorted(decision.pool_objects.items()))
    return items
