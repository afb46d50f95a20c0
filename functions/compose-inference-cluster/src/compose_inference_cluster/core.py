"""What compose-inference-cluster decides, as pure functions of typed inputs.

An InferenceCluster is a bring-your-own workload cluster with declared GPU
pools. This module decides, from the XR spec, the composed resources as the
control plane last saw them (`ObservedObject`s) and `now`, everything the
shell writes back (`Decision`):

1. Which resources to compose on the workload cluster, and which of them are
   ready: a ClusterProviderConfig from the kubeconfig Secret; in Observed
   mode an observe-only Object for the agent's PoolObservation CRD; once
   that CRD has been seen, one PoolObservation Object per declared pool;
   with `observation.agent.install`, the agent's install Objects
   (agent_install.py). The provider config and the CRD Object are ready
   once composed (neither has a workload to wait for); every other Object
   when provider-kubernetes reports it Ready. Observed resources this pass
   does not compose are kept unchanged when `kept` says so.
2. What to publish per pool in `status.gpuPools`: the declared fields always
   (`name`, `nodes`, `devices`), the observed fields (`observedAt`,
   `observedNodes`, `nodesByFreeDevices`, `current`) only when the agent's
   report passes `modelplane_common.observation.parse_observation`. Absence
   of the observed fields, or `current: false`, is the scheduler's signal to
   fall back to the pool's fallback accounting (`WholeNode` or `DeviceCount`,
   `read_fallbacks`). Freshness is published as verdicts that flip, with a
   lease on them (`modelplane_common.currency`), so that a heartbeat that
   changes nothing publishes nothing.
3. Which conditions and events tell a platform engineer what happened
   (`Configured`, `CapacityObserved`, `AgentInstalled`).
4. Whether the cluster itself is Ready (`ready`; the shell states it as the
   XR's `Ready` instead of letting Crossplane derive it): when this pass
   composes the provider config (the credentials reference is complete)
   and every pool Object it composes or keeps is Ready. Ready says the
   control plane can compose on the cluster; it says nothing about
   capacity. `CapacityObserved=False` (Declared mode, no agent, a stale or
   rejected report) and `AgentInstalled=False` leave it Ready: the scheduler
   counts those pools by their fallback, and only a cluster whose Ready is
   False gets no new replicas.

Invariants
    - A spec that breaks the XRD's schema (checked against the generated
      model, an unknown observation.mode included) decides nothing: every
      composed resource is kept and the previous status passed through,
      with one `field.path: reason (got value)` per defect.
    - Nothing already composed is dropped because an input is momentarily
      missing: a pool Object that exists stays desired while its pool is in
      the spec, even if the agent's CRD Object stops reporting.
    - A pool leaves the desired state only when it leaves a valid spec; the
      agent's install Objects only when a valid spec turns
      `observation.agent.install` off, and their leaving only stops managing
      what they applied (agent_install.py).
    - Declared mode composes no observation and publishes no observed fields.
    - The publisher is the one judge of freshness: it compares the agent's
      latest report with `maxAge` at the `now` it is given, publishes the
      verdict and the time the published observation was first seen, and
      is called again at each instant a verdict can change with no report
      (`currency.deadlines`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from modelplane_common import currency, labels, requeue
from modelplane_common.capacity.fleet import Fallback
from modelplane_common.capacity.readers import read_fallbacks
from modelplane_common.composed import ObservedObject
from modelplane_common.inputs import (
    DEFAULT_MAX_AGE_TEXT,
    inference_cluster_problems,
    observation_mode,
    whole_number,
)
from modelplane_common.inputs import max_age as read_max_age
from modelplane_common.observation import (
    Blind,
    DeviceKinds,
    NotReported,
    Observation,
    Rejected,
    declared_nodes,
    parse_observation,
)
from modelplane_common.outcome import Condition, Event, capped, listed, unchanged, within_cap
from modelplane_common.timeutil import format_time

from compose_inference_cluster import agent_install

PROVIDER_CONFIG = "provider-config"
AGENT_CRD = "agent-crd"
POOL_PREFIX = "pool-"
POOL_OBSERVATION_CRD = "poolobservations.agent.modelplane.ai"


def pool_resource_name(pool: str) -> str:
    """The composition resource name of a pool's PoolObservation Object."""
    return POOL_PREFIX + pool


@dataclass(frozen=True, slots=True)
class ObservedState:
    """What this pass knows of the agent, read from the composed Objects (`observed_state`).

    `pool_reports` maps a pool name to the PoolObservation status the agent
    wrote (None when the Object exists but carries no remote status yet); a
    pool missing from the map has no Object yet.
    """

    agent_crd_seen: bool = False
    pool_reports: Mapping[str, Mapping | None] = field(default_factory=dict)


def observed_state(observed: Mapping[str, ObservedObject]) -> ObservedState:
    """The agent CRD Object carrying the CRD it observes, and each pool Object's report."""
    reports: dict[str, Mapping | None] = {}
    for name, obj in observed.items():
        if name.startswith(POOL_PREFIX):
            status = obj.remote.get("status") if obj.remote else None
            reports[name[len(POOL_PREFIX) :]] = status if isinstance(status, Mapping) else None
    agent = observed.get(AGENT_CRD)
    return ObservedState(agent is not None and agent.remote is not None, reports)


@dataclass(frozen=True, slots=True)
class PoolVerdict:
    """How one pool's capacity reaches the scheduler."""

    pool: str
    observation: Observation | None
    reason: str  # Observed, NotReported, Blind, Rejected, Stale, Declared, NoAgent
    message: str
    # How the scheduler counts the pool whenever this verdict is not Observed.
    fallback: Fallback = Fallback.WHOLE_NODE
    # A report Rejected for a node-count bound only: published, so that the
    # scheduler (parsing it again, rejecting it again) caps the fallback by it.
    ceiling: Observation | None = None

    @property
    def published(self) -> Observation | None:
        """What `status.gpuPools` carries beside the declared fields."""
        return self.observation or self.ceiling

    def current(self, now: datetime, max_age: timedelta) -> bool:
        """The published observation's verdict: the agent's report is within maxAge."""
        published = self.published
        return published is not None and currency.is_current(published.observed_at, now, max_age)


@dataclass(frozen=True, slots=True)
class Desired:
    body: Mapping
    ready: bool


@dataclass(frozen=True, slots=True)
class Decision:
    """Everything the shell writes: it translates this, and decides nothing."""

    # Composed this pass and kept, by composition resource name.
    desired: dict[str, Desired]
    # Of those, the observed ones kept unchanged although this pass did not compose them.
    kept: tuple[str, ...]
    status: dict
    conditions: tuple[Condition, ...]
    events: tuple[Event, ...]
    verdicts: tuple[PoolVerdict, ...]
    ready: bool  # the cluster's own Ready
    # When to be called again: modelplane_common.requeue.
    requeue_after: timedelta = requeue.AT_REST_CAP


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
    xr_name: str,
    namespace: str,
    pool: Mapping,
    max_age: str,
    tolerations: Sequence[Mapping] = (),
) -> dict:
    """The Object of one pool's PoolObservation. `max_age` is the cluster's maxAge as
    the scheduler reads it: the agent derives its heartbeats from it, so that no
    flag on each workload cluster has to repeat it."""
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
                **_declared(by_name[name]),
            }
            for name in dra.names
        ],
        "maxAge": max_age,
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


def _declared(device: Mapping) -> dict:
    """The kind's declared attributes and capacity, which the fleet judges request
    selectors on: the agent counts only devices that hold them (design/observation.md,
    "Declared devices"). Whole numbers arrive from protobuf as floats."""
    out: dict = {}
    attributes = device.get("attributes")
    if isinstance(attributes, Mapping) and attributes:
        out["attributes"] = {
            str(name): {
                kind: int(value) if isinstance(value, float) and value.is_integer() else value
                for kind, value in typed.items()
            }
            if isinstance(typed, Mapping)
            else typed
            for name, typed in attributes.items()
        }
    capacity = device.get("capacity")
    if isinstance(capacity, Mapping) and capacity:
        out["capacity"] = {
            str(name): {"value": _quantity_text(held.get("value"))}
            if isinstance(held, Mapping)
            else held
            for name, held in capacity.items()
        }
    return out


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
    nodes = declared_nodes(
        whole_number(pool.get("nodeCount")) or 0, whole_number(pool.get("maxNodeCount"))
    )
    parsed = parse_observation(
        reports.get(name), DeviceKinds.from_declared(pool["devices"]), declared=nodes
    )
    match parsed:
        case Observation() if (stale := parsed.staleness(now, max_age)) is not None:
            return PoolVerdict(name, parsed, "Stale", f"observation is {stale}")
        case Observation():
            return PoolVerdict(name, parsed, "Observed", "observed")
        case NotReported(message) | Blind(message):
            return PoolVerdict(name, None, type(parsed).__name__, message)
        case Rejected(ceiling=ceiling):
            return PoolVerdict(name, None, "Rejected", parsed.message, ceiling=ceiling)
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


def _unresolved(
    spec_problems: list[str], previous_status: Mapping, observed: Mapping[str, ObservedObject]
) -> Decision:
    """A spec that breaks the schema decides nothing: keep everything, say why.

    Every observed resource is kept unchanged, the published status is
    passed through (the scheduler judges its freshness itself), and the
    condition names every defect. The cluster is not Ready: this pass
    composes no provider config.
    """
    message = "; ".join(spec_problems)
    return Decision(
        desired={name: Desired(unchanged(obj.body), obj.ready) for name, obj in observed.items()},
        kept=tuple(sorted(observed)),
        status=dict(previous_status),
        conditions=(
            Condition(
                "Configured",
                "False",
                "InvalidSpec",
                capped(message + "; composed resources and published pools are kept as they are"),
            ),
        ),
        events=(Event("Warning", capped(f"invalid spec: {message}")),),
        verdicts=(),
        ready=False,
    )


def decide(
    xr_name: str,
    spec: Mapping,
    observed: Mapping[str, ObservedObject],
    previous_status: Mapping,
    now: datetime,
    version: str,
) -> Decision:
    """Decide the desired resources, status, conditions, events and readiness of one
    InferenceCluster; `version` is the function's own (the agent image's default tag)."""
    problems = spec_defects(spec)
    if problems:
        return _unresolved(problems, previous_status, observed)
    # From here on spec conforms to the XRD's schema.
    pools = list(spec["nodePools"])
    mode = observation_mode(spec.get("observation"))
    state = observed_state(observed)
    max_age, max_age_problem = read_max_age(spec.get("observation"))
    fallbacks, fallback_problems = read_fallbacks(spec)
    composed = _composed(
        xr_name, spec, mode, state, _max_age_text(spec.get("observation"), max_age_problem), version
    )
    verdicts = tuple(
        replace(
            _verdict(p, mode, state.agent_crd_seen, state.pool_reports, now, max_age),
            fallback=fallbacks[p["name"]],
        )
        for p in pools
    )
    installs = {n: o for n, o in composed.items() if n.startswith(agent_install.PREFIX)}
    kept = _kept(set(observed) - set(composed), mode, pools)
    desired = _desired(composed, kept, observed)
    freshness = (
        Freshness(
            now,
            max_age,
            previous_status,
            currency.relayed(state.pool_reports.values()),
            currency.lease(previous_status, now),
        )
        if mode == "Observed"
        else None
    )
    return Decision(
        desired=desired,
        kept=tuple(sorted(kept)),
        status=_status(xr_name, pools, verdicts, state, freshness),
        conditions=(
            Condition("Configured", "True", "ValidSpec", ""),
            _capacity_condition(mode, verdicts),
            agent_install.condition(_install_requested(spec), installs, observed),
        ),
        events=(
            *(Event("Warning", p) for p in [max_age_problem, *fallback_problems] if p),
            *(Event("Warning", p) for p in currency.unreadable(state.pool_reports)),
            *_verdict_events(verdicts, _previously_observed(previous_status)),
        ),
        verdicts=verdicts,
        ready=_ready(desired),
        requeue_after=requeue.after(
            dropping_events=requeue.dropping_events(previous_status, now),
            waiting=False,
            deadlines=(
                (requeue.observation_refresh(max_age), *freshness.deadlines(verdicts))
                if freshness is not None
                else ()
            ),
        ),
    )


def _agent(spec: Mapping) -> Mapping:
    observation = spec.get("observation")
    agent = observation.get("agent") if isinstance(observation, Mapping) else None
    return agent if isinstance(agent, Mapping) else {}


def _install_requested(spec: Mapping) -> bool:
    return _agent(spec).get("install") is True


def _composed(
    xr_name: str, spec: Mapping, mode: str, state: ObservedState, max_age: str, version: str
) -> dict[str, dict]:
    """The bodies this pass composes, by composition resource name."""
    secret_ref = spec["credentials"]["secretRef"]
    # Objects live beside the kubeconfig Secret: the namespace the platform
    # team already chose for this cluster's credentials.
    namespace = secret_ref["namespace"]
    composed = {PROVIDER_CONFIG: provider_config(xr_name, secret_ref)}
    if mode == "Observed":
        composed[AGENT_CRD] = agent_crd_object(xr_name, namespace)
        tolerations = fleet_tolerations(spec.get("taints"))
        for pool in spec["nodePools"]:
            if pool.get("devices") and (state.agent_crd_seen or pool["name"] in state.pool_reports):
                composed[pool_resource_name(pool["name"])] = pool_observation_object(
                    xr_name, namespace, pool, max_age, tolerations
                )
    if _install_requested(spec):
        image = _agent(spec).get("image") or agent_install.default_image(version)
        composed.update(agent_install.objects(xr_name, namespace, str(image)))
    return composed


def _desired(
    composed: Mapping[str, dict], kept: set[str], observed: Mapping[str, ObservedObject]
) -> dict[str, Desired]:
    """Composed and kept resources with their readiness: the provider config and the
    CRD Object have no workload to wait for (a missing agent CRD is a legitimate state,
    not an outage); every other Object is ready when the provider reports it Ready."""
    desired = {}
    for name, body in composed.items():
        seen = observed.get(name)
        ready = name in (PROVIDER_CONFIG, AGENT_CRD) or (seen is not None and seen.ready)
        desired[name] = Desired(body, ready)
    for name in sorted(kept):
        desired[name] = Desired(unchanged(observed[name].body), observed[name].ready)
    return desired


@dataclass(frozen=True, slots=True)
class Freshness:
    """What this pass judges of the agent's reports (modelplane_common.currency)."""

    now: datetime
    max_age: timedelta
    previous_status: Mapping  # when each published observation was first seen and confirmed
    replicas_current_at: datetime | None  # relayed from the pools' reports this pass
    lease: datetime  # agent.vouchedUntil to publish (currency.lease)

    def pool_entry(self, verdict: PoolVerdict, kinds: DeviceKinds) -> dict:
        """A published observation's fields: when first seen and confirmed, current or not."""
        published = verdict.published
        assert published is not None
        entry = published.to_wire(kinds)
        observed_at, changed_at = currency.published_times(
            self._previous_entry(verdict.pool), entry, published.observed_at
        )
        entry["observedAt"] = format_time(observed_at)
        entry[currency.CHANGED_AT] = format_time(changed_at)
        entry[currency.CURRENT] = verdict.current(self.now, self.max_age)
        return entry

    def agent(self) -> dict:
        """`status.agent`'s verdict on the replica reports and the lease on every verdict."""
        agent: dict = {currency.VOUCHED_UNTIL: format_time(self.lease)}
        if self.replicas_current_at is not None:
            agent[currency.REPLICAS_CURRENT] = currency.is_current(
                self.replicas_current_at, self.now, self.max_age
            )
        return agent

    def deadlines(self, verdicts: Sequence[PoolVerdict]) -> list[timedelta | None]:
        """How long until each instant a verdict can change with no report."""
        reported = [v.published.observed_at for v in verdicts if v.published is not None]
        times = currency.deadlines(
            [*reported, self.replicas_current_at], self.lease, self.now, self.max_age
        )
        return [requeue.until(t, self.now) for t in times]

    def _previous_entry(self, pool: str) -> Mapping | None:
        pools = self.previous_status.get("gpuPools")
        for entry in pools if isinstance(pools, list) else ():
            if isinstance(entry, Mapping) and entry.get("name") == pool:
                return entry
        return None


def _status(
    xr_name: str,
    pools: Sequence[Mapping],
    verdicts: Sequence[PoolVerdict],
    state: ObservedState,
    freshness: Freshness | None,
) -> dict:
    """The published status; `freshness` None in Declared mode, which observes nothing."""
    gpu_pools = []
    for pool, verdict in zip(pools, verdicts, strict=True):
        entry = {
            "name": pool["name"],
            "nodes": declared_nodes(
                whole_number(pool.get("nodeCount")) or 0, whole_number(pool.get("maxNodeCount"))
            ),
            "devices": list(pool.get("devices") or []),
        }
        if verdict.published is not None and freshness is not None:
            entry.update(freshness.pool_entry(verdict, DeviceKinds.from_declared(pool["devices"])))
        gpu_pools.append(entry)
    observed_pools = sum(1 for v in verdicts if v.observation is not None)
    agent = {"present": state.agent_crd_seen, **(freshness.agent() if freshness else {})}
    return {
        "gpuPools": gpu_pools,
        "agent": agent,
        "observedPoolCount": observed_pools,
        # The OBSERVED printer column: a column prints a field, it cannot compute one.
        "observedPools": f"{observed_pools}/{len(gpu_pools)}",
        "providerConfigRef": {"name": xr_name},
    }


def _max_age_text(observation: object, problem: str | None) -> str:
    """The maxAge the scheduler judges by, as the XRD spells it: the declared one, or
    the default that replaced it (absent, or not a duration: `problem` says so)."""
    raw = observation.get("maxAge") if isinstance(observation, Mapping) else None
    return raw if isinstance(raw, str) and problem is None else DEFAULT_MAX_AGE_TEXT


def _fallbacks(
    verdicts: Sequence[PoolVerdict], detail: Callable[[str], str] | None = None
) -> list[str]:
    """`<Fallback> fallback: <pools>` once per fallback in use, the first few pools named
    (`outcome.listed`); with `detail`, each named pool's reason passed through it."""
    parts = []
    for fallback in Fallback:
        pools = [v for v in verdicts if v.fallback is fallback]
        if pools:
            named = listed(
                [f"{v.pool} ({detail(v.message)})" if detail else v.pool for v in pools],
                "; " if detail else ", ",
            )
            parts.append(f"{fallback} fallback: {named}")
    return parts


def _capacity_condition(mode: str, verdicts: tuple[PoolVerdict, ...]) -> Condition:
    if mode == "Declared":
        return Condition(
            "CapacityObserved",
            "False",
            "Declared",
            "observation.mode is Declared: the scheduler counts every pool by its fallback; "
            + "; ".join(_fallbacks(verdicts)),
        )
    observed = [v.pool for v in verdicts if v.reason == "Observed"]
    fallback = [v for v in verdicts if v.reason != "Observed"]
    if not fallback:
        return Condition(
            "CapacityObserved", "True", "AllPoolsObserved", "observed: " + listed(observed)
        )
    head = ["observed: " + listed(observed)] if observed else []
    message = within_cap(lambda detail: "; ".join([*head, *_fallbacks(fallback, detail)]))
    reason = "NoPoolObserved" if not observed else "SomePoolsUnobserved"
    return Condition("CapacityObserved", "False", reason, message)


def _verdict_events(
    verdicts: tuple[PoolVerdict, ...], previously_observed: set[str]
) -> list[Event]:
    events = []
    for verdict in verdicts:
        published = verdict.published is not None
        if verdict.reason == "Rejected":
            capped_by = ", never above the report's free capacity" if verdict.ceiling else ""
            events.append(
                Event(
                    "Warning",
                    capped(
                        f"pool {verdict.pool}: observation rejected, falling back to "
                        f"{verdict.fallback} accounting{capped_by}: {verdict.message}"
                    ),
                )
            )
        elif published and verdict.pool not in previously_observed:
            events.append(Event("Normal", f"pool {verdict.pool}: publishing observed capacity"))
        elif not published and verdict.pool in previously_observed:
            events.append(
                Event(
                    "Warning",
                    capped(
                        f"pool {verdict.pool}: observation withdrawn ({verdict.message}), "
                        f"falling back to {verdict.fallback} accounting"
                    ),
                )
            )
    return events


def _kept(not_composed: set[str], mode: str, pools: Sequence[Mapping]) -> set[str]:
    """Observed resources of a valid spec to keep although this pass did not compose them.

    Only deliberate edits of a valid spec remove a composed resource: its
    pool left the spec, the cluster switched to Declared mode, or
    `observation.agent.install` was turned off (an install Object removed only
    stops managing its object: agent_install.py). Anything else missing
    from this pass (credentials being edited, the agent CRD Object
    momentarily not reporting) is an input problem, and input problems
    never delete. An invalid spec keeps everything (`_unresolved`).
    """
    declared = mode == "Declared"
    in_spec = {p["name"] for p in pools}
    kept = set()
    for name in not_composed:
        if name.startswith(POOL_PREFIX) and (declared or name[len(POOL_PREFIX) :] not in in_spec):
            continue
        if (name == AGENT_CRD and declared) or name.startswith(agent_install.PREFIX):
            continue
        kept.add(name)
    return kept


def _ready(desired: Mapping[str, Desired]) -> bool:
    """The cluster's own readiness: the provider config composed, every pool Object
    composed or kept observed Ready. The agent CRD and install Objects never count: a
    cluster without the agent is a supported cluster, not a broken one."""
    return PROVIDER_CONFIG in desired and all(
        d.ready for name, d in desired.items() if name.startswith(POOL_PREFIX)
    )
