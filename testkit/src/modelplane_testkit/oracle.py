"""kube-scheduler as the oracle of the agent's report, for the live tests (agent/tests/live).

The agent says, per node of a pool, how many devices of each kind are free
(its /debug/nodes view, `modelplane_agent.debug`). kube-scheduler decides:

- a pod claiming exactly a node's free devices (one claim, an exact count per
  device kind with the request selectors the fleet's claims of the kind carry,
  the pool's tolerations, its smallest pod's cpu and memory) binds;
- a pod claiming one device more, of any kind, does not (for a node the agent
  leaves out of the histogram: a pod claiming one device of any kind does not;
  for a node whose count the room for the pool's smallest pods caps, one more
  than its devices alone leave free, the view's `uncapped`: one pod may take
  more than the cap, the cap bounds how many pods the fleet places there).

- pods placed one after another, as the fleet places them (a series, one per
  node and device kind): each claims one device of the kind on the pool's terms
  (its smallest pod's cpu and memory), and each is bound before the next is
  created. The view says k pods of that shape fit (the kind's free count, which
  the room for the pool's smallest pods caps): the first k must each bind, the
  (k+1)-th must not.

Probes are pinned to their node by a required node affinity on the node's name
(no nodeName: kube-scheduler decides about that node alone, with every filter);
a probe is decided once it is bound, or PodScheduled=False/Unschedulable (or
SchedulerError for a CEL runtime error of its claim's selector on the node's
devices, which fails the node's Filter) where the view expects it refused; a
refusal of a probe expected to bind stands only if it still does at the end of
a bounded wait (`final`). Probes of all nodes
run at once: first every "one more" probe, then, once those are gone, the
series of each kind in turn (all nodes' series of a kind side by side, a pod
each round), then every "exact" one. The
expectations come from the agent's view and kube-scheduler's binding only;
nothing here counts devices.

A probe that binds where the view says it must not is an under-count (the
agent promised less than kube-scheduler gives); one refused where the view
says it must bind is an over-count. An over-count is always a disagreement.
An under-count on a node where the agent itself declares why it counts less
than a scheduler of some supported version may give (its view's `uncounted`
causes, `DECLARED_UNDER_COUNTS`) is counted apart as a declared under-count;
every other under-count is a disagreement.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
from lightkube import ApiError, Client
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.types import PatchType
from modelplane_agent.devices import NETWORK_ATTACHED, SHARED_POOL_NAME
from modelplane_agent.kube import _resource
from modelplane_agent.partitions import SLICE_ORDER
from modelplane_agent.pools import BINDING_CONDITIONS, LACKS_DECLARED, SHARED_DEVICES
from modelplane_agent.state import CLAIMS, CLASSES, NODES, PODS, POOLS, REPLICAS, SLICES
from modelplane_agent.taint_rules import UNSELECTIVE_RULE
from modelplane_common.inputs import find_condition

from modelplane_testkit.oracle_states import Pool

PHASE_LABEL = "oracle.modelplane.ai/phase"
# What a lightkube client raises while an object, or its kind, is not served yet:
# the live tests' `eventually(..., not_yet=NOT_SERVED)` keeps polling on it. Any HTTP
# error status, not only lightkube's ApiError: that needs a JSON body, and
# kube-apiserver may answer a path under a group not registered yet (a CRD just
# created) with a plain-text 404 (v1.36.3 did), which lightkube leaves an httpx
# HTTPStatusError.
NOT_SERVED: tuple[type[Exception], ...] = (httpx2.HTTPStatusError,)
DECIDE_SECONDS = 30.0  # kube-scheduler answers a pinned probe in well under a second

# The live tests' resource classes, created once per process: lightkube's registry
# refuses a second generic class for a core kind, so the kinds the agent reads are the
# agent's own classes (only the classes: nothing of its rules is used here).
Node, Pod, ResourceSlice, ResourceClaim, DeviceClass = (
    _resource(k) for k in (NODES, PODS, SLICES, CLAIMS, CLASSES)
)
PoolObservation, ReplicaObservation = _resource(POOLS), _resource(REPLICAS)
CustomResourceDefinition = create_global_resource(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions"
)
Namespace = create_global_resource("", "v1", "Namespace", "namespaces")
PriorityClass = create_global_resource(
    "scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses"
)
ServiceAccount = create_namespaced_resource("", "v1", "ServiceAccount", "serviceaccounts")
# DeviceTaintRule as each supported minor serves it: v1alpha3 on v1.35 (with
# --runtime-config), v1beta2 from v1.36, v1 from v1.37; the most stable first.
DEVICE_TAINT_RULES = {
    version: create_global_resource(
        "resource.k8s.io", version, "DeviceTaintRule", "devicetaintrules"
    )
    for version in ("v1", "v1beta2", "v1alpha3")
}


def ready_node(client: Client, name: str, labels: Mapping[str, str] | None = None) -> str:
    """A Ready, untainted node named `name` with room for any pod these tests place (no
    kubelet: its status is written as one would); its uid, for owner references."""
    metadata = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    client.create(Node({"metadata": metadata}))
    capacity = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "played by the test",
        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    status = {"status": {"capacity": capacity, "allocatable": capacity, "conditions": [ready]}}
    client.patch(Node.Status, name, status, patch_type=PatchType.MERGE)
    # The API server's TaintNodesByCondition admission taints every new node not-ready;
    # the node lifecycle controller, which would lift it, does not run without kubelets.
    client.patch(Node, name, {"spec": {"taints": None}}, patch_type=PatchType.MERGE)
    return client.get(Node, name)["metadata"]["uid"]


def publish_slices(client: Client, node: str, uid: str, slices: Iterable[Mapping]) -> None:
    """Create `slices` (each {"metadata": {"name"}, "spec"}) owned by the node, as a
    driver does, so that they go with it."""
    owner = {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}
    for each in slices:
        metadata = {"name": each["metadata"]["name"], "ownerReferences": [owner]}
        client.create(ResourceSlice({"metadata": metadata, "spec": each["spec"]}))


def device_taint_rule(client: Client) -> Any:
    """The DeviceTaintRule class of the most stable version this API server serves,
    found by listing it in each (a version not served answers 404), apart from the
    agent's own discovery, which is what the tests check."""
    for resource in DEVICE_TAINT_RULES.values():
        try:
            next(iter(client.list(resource, chunk_size=1)), None)
        except httpx2.HTTPStatusError as error:  # a JSON Status or plain text: see NOT_SERVED
            if error.response.status_code == 404:
                continue
            raise
        return resource
    raise LookupError("the API server serves DeviceTaintRules in no version the agent reads")


# --------------------------------------------------------------------------- manifests


def exact_request(
    name: str, device_class: str, count: int, admin: bool = False, selectors: Sequence[str] = ()
) -> dict:
    """A request for `count` devices of `device_class`, each true under every one of
    `selectors` (CEL), as compose-model-replica writes a member's request."""
    exactly: dict[str, Any] = {
        "deviceClassName": device_class,
        "allocationMode": "ExactCount",
        "count": count,
    }
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if admin:
        exactly["adminAccess"] = True
    return {"name": name, "exactly": exactly}


def claim_manifest(name: str, namespace: str, requests: list[dict], labels: dict) -> dict:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"devices": {"requests": requests}},
    }


@dataclass(frozen=True)
class PodTerms:
    """What a pool asks of every pod placed on it: its tolerations and the requests
    (cpu, memory) of its smallest pod."""

    tolerations: Sequence[Mapping] = ()
    requests: Mapping[str, str] | None = None


def pinned_pod(
    name: str,
    namespace: str,
    node: str,
    claim: str,
    labels: Mapping[str, str],
    terms: PodTerms | None = None,
) -> dict:
    """A pod that may only go to `node` (required affinity on the node's name), using `claim`,
    on the pool's `terms` (none: no tolerations, no requests)."""
    terms = terms or PodTerms()
    resources: dict[str, Any] = {"claims": [{"name": "devices"}]}
    if terms.requests:
        resources["requests"] = dict(terms.requests)
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    spec: dict[str, Any] = {
        "affinity": {"nodeAffinity": affinity},
        "resourceClaims": [{"name": "devices", "resourceClaimName": claim}],
        "containers": [{"name": "main", "image": "example.invalid/main:1", "resources": resources}],
        "terminationGracePeriodSeconds": 0,
    }
    if terms.tolerations:
        spec["tolerations"] = [dict(t) for t in terms.tolerations]
    metadata = {"name": name, "namespace": namespace, "labels": dict(labels)}
    return {"metadata": metadata, "spec": spec}


# What kube-scheduler's message says when a claim's CEL selector fails on a device of
# the node (a CEL runtime error, "no such key" for one): the node's Filter fails, so
# the pod cannot go there (k8s.io/dynamic-resource-allocation structured allocator,
# `selectorsMatch`; the scheduler reports it as PodScheduled=False/SchedulerError and
# retries the pod, which fails the same way while the devices stay as they are).
CEL_RUNTIME_ERROR = "CEL runtime error"


def verdict(pod: Mapping) -> tuple[str, str] | None:
    """("bound", node), ("refused", kube-scheduler's message), or None while undecided.
    Refused: Unschedulable, or a claim's selector failing on the node (CEL_RUNTIME_ERROR)."""
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return ("bound", node)
    condition = find_condition(pod, "PodScheduled")
    message = condition.get("message") or ""
    if condition.get("status") != "False":
        return None
    if condition.get("reason") == "Unschedulable":
        return ("refused", message)
    if condition.get("reason") == "SchedulerError" and CEL_RUNTIME_ERROR in message:
        return ("refused", message)
    return None


def _bound(probe: Probe) -> bool:
    return probe.outcome is not None and probe.outcome[0] == "bound"


def final(probe: Probe) -> bool:
    """Whether `probe`'s verdict so far is kube-scheduler's last word within the wait.

    A bound pod stays bound, and so does a refusal the view expects. A refusal of a
    pod the view expects to bind may be kube-scheduler's cache still holding what an
    earlier phase's pods held (their claims are gone from the API server, not yet
    from its informers): it retries such a pod when that release reaches it (the
    claim and pod deletions requeue it), so the wait goes on, and the refusal counts
    only if it still stands at the deadline."""
    bound = probe.outcome is not None and probe.outcome[0] == "bound"
    return bound or not probe.expect_bound


def delete(client: Client, resource: Any, name: str, namespace: str | None = None) -> None:
    """Delete now (no grace period); an object already gone is fine."""
    try:
        client.delete(resource, name, namespace=namespace, grace_period=0)
    except ApiError as error:
        if error.status.code != 404:
            raise


# A time the reported conditions say they turned True (any past time is valid).
REPORTED_AT = "2026-01-01T00:00:00Z"


def report_binding_conditions(client: Client, namespace: str) -> None:
    """Play the driver of devices with binding conditions (KEP-5007): on every claim of
    `namespace` allocated such a device whose status does not report it yet, report
    each of the result's bindingConditions True in `status.devices`. kube-scheduler
    waits for that in PreBind (polling every 5 s) before it binds the claim's pod, so a
    device it gives a pod is bound as a driver would let it be; a failure condition is
    never reported (kube-scheduler would deallocate and may pick the same device again)."""
    for claim in client.list(ResourceClaim, namespace=namespace):
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        reported = list(status.get("devices") or [])
        seen = {(d.get("driver"), d.get("pool"), d.get("device")) for d in reported}
        missing = [
            r
            for r in results
            if r.get("bindingConditions") and (r["driver"], r["pool"], r["device"]) not in seen
        ]
        if not missing:
            continue
        devices = [*reported, *(_attached(result) for result in missing)]
        try:
            client.patch(
                ResourceClaim.Status,
                claim["metadata"]["name"],
                {"status": {"devices": devices}},
                namespace=namespace,
                patch_type=PatchType.MERGE,
            )
        except ApiError as error:
            if error.status.code not in (404, 409):  # gone, or changed meanwhile
                raise


def _attached(result: Mapping) -> dict:
    """The status of one allocated device whose binding conditions are all True."""
    conditions = [
        {
            "type": condition,
            "status": "True",
            "reason": "Attached",
            "message": "reported by the oracle's harness, as the device's driver would",
            "lastTransitionTime": REPORTED_AT,
        }
        for condition in result["bindingConditions"]
    ]
    device = {k: result[k] for k in ("driver", "pool", "device")}
    if result.get("shareID"):
        device["shareID"] = result["shareID"]
    return {**device, "conditions": conditions}


# --------------------------------------------------------------------------- the agent's view


def debug_nodes(port: int) -> dict:
    url = f"http://127.0.0.1:{port}/debug/nodes"
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def pool_view(debug: Mapping, pool: str) -> dict:
    """node -> the agent's entry for `pool` ({"free": ...}, {"leftOut": ...}, ...)."""
    return {
        node: pools[pool] for node, pools in sorted(debug.get("nodes", {}).items()) if pool in pools
    }


def view_problems(pool: Pool, members: Iterable[str], view: Mapping, status: Mapping) -> list[str]:
    """Where the view and the published status disagree, or the view misses the pool's nodes."""
    problems = []
    if sorted(view) != sorted(members):
        problems.append(f"the agent's view covers nodes {sorted(view)}, the pool {sorted(members)}")
    unobserved = {n: e["unobserved"] for n, e in view.items() if "unobserved" in e}
    if unobserved:
        problems.append(f"the agent does not observe the pool: {unobserved}")
    kinds = [d["name"] for d in pool.devices]
    from_view = Counter(tuple(e["free"][k] for k in kinds) for e in view.values() if "free" in e)
    published = Counter(
        {
            tuple(b["free"].get(k, 0) for k in kinds): b["nodes"]
            for b in status.get("nodesByFreeDevices") or []
        }
    )
    if published != from_view or status.get("observedNodes") != len(view):
        problems.append(
            f"published histogram {dict(published)} over {status.get('observedNodes')} nodes "
            f"is not the per-node view's {dict(from_view)} over {len(view)}"
        )
    return problems


def converged_view(
    client: Client, port: int, pool: Pool, members: Sequence[str], seconds: float = 30
) -> tuple[dict, list[str]]:
    """The agent's view of `pool` once it has converged: it covers every member, matches
    the published status and holds still for a second; else the last view and what is
    wrong with it."""
    deadline = time.monotonic() + seconds
    seen: list[dict] = []
    while True:
        view = pool_view(debug_nodes(port), pool.name)
        status = client.get(PoolObservation, pool.name).get("status") or {}
        problems = view_problems(pool, members, view, status)
        seen = [*seen[-1:], view] if not problems else []
        if len(seen) == 2 and seen[0] == seen[1]:
            return view, []
        if time.monotonic() > deadline:
            return view, problems or [f"the agent's view did not hold still for 1s: {seen}"]
        time.sleep(0.5)


# --------------------------------------------------------------------------- probes


@dataclass
class Probe:
    node: str
    what: str  # "exact" or "one more <kind>"
    counts: dict[str, int]  # device kind -> count
    expect_bound: bool
    name: str
    outcome: tuple[str, str] | None = None  # verdict(), or ("undecided", why)

    @property
    def disagrees(self) -> bool:
        if self.outcome is None or self.outcome[0] == "undecided":
            return True
        return (self.outcome[0] == "bound") != self.expect_bound

    @property
    def under_count(self) -> bool:
        """Bound where the agent's view says no pod fits: it promised less than was there."""
        return self.outcome is not None and self.outcome[0] == "bound" and not self.expect_bound

    def disagreement(self) -> str:
        expected = "binds" if self.expect_bound else "does not bind"
        got = "undecided" if self.outcome is None else f"{self.outcome[0]}: {self.outcome[1]}"
        claiming = f"a pod claiming {self.counts} ({self.what})"
        return f"node {self.node}: {claiming} {expected}; kube-scheduler: {got}"

    def line(self) -> str:
        expected = "bound" if self.expect_bound else "refused"
        return f"{self.node} {self.what} {self.counts} expect {expected}: {self.outcome}"


def planned_probes(pool: Pool, view: Mapping, prefix: str) -> tuple[list[Probe], list[Probe]]:
    """("one more" probes, "exact" probes) for every node of the view."""
    kinds = [d["name"] for d in pool.devices]
    more, exact = [], []
    for index, (node, entry) in enumerate(sorted(view.items())):
        free = entry.get("free") or dict.fromkeys(kinds, 0)
        # A node whose count the room for the pool's smallest pods caps: one pod claiming
        # one device more than its devices alone leave free must not bind.
        devices = entry.get("uncapped") or free
        for k, kind in enumerate(kinds):
            counts = {**devices, kind: devices[kind] + 1}
            more.append(Probe(node, f"one more {kind}", counts, False, f"{prefix}-more{index}-{k}"))
        if "free" in entry and sum(free.values()) > 0:
            exact.append(Probe(node, "exact", dict(free), True, f"{prefix}-exact{index}"))
    return more, exact


@dataclass
class Series:
    """Pods claiming one device of `kind` each, placed on `node` one after another: the
    view says `fits` of them fit, so the first `fits` must each bind and one more must
    not. A series ends at its first disagreement (what follows would not be about the
    view any more) or once its last pod is decided."""

    node: str
    kind: str
    fits: int
    prefix: str
    probes: list[Probe] = field(default_factory=list)

    def next_probe(self) -> Probe | None:
        """The next pod to place, or None once the series is over."""
        last = self.probes[-1] if self.probes else None
        if last is not None and (last.disagrees or not last.expect_bound):
            return None
        index = len(self.probes)
        within = index < self.fits
        what = (
            f"{self.kind} pod {index + 1} of {self.fits} in a row"
            if within
            else f"{self.kind} pod {index + 1} in a row, past {self.fits}"
        )
        probe = Probe(self.node, what, {self.kind: 1}, within, f"{self.prefix}-{index}")
        self.probes.append(probe)
        return probe


def planned_series(pool: Pool, view: Mapping, prefix: str) -> list[list[Series]]:
    """Per device kind of the pool, a series for every node of the view: as many pods
    as the view counts free devices of the kind there (none for a node it leaves out)."""
    kinds = [d["name"] for d in pool.devices]
    return [
        [
            Series(node, kind, (entry.get("free") or {}).get(kind, 0), f"{prefix}-seq{k}-{index}")
            for index, (node, entry) in enumerate(sorted(view.items()))
        ]
        for k, kind in enumerate(kinds)
    ]


# The `uncounted` causes by which the agent declares that it counts less than a
# kube-scheduler of some supported version may allocate, because it cannot tell which
# version schedules (design/agent.md, "Tests"): an under-count on a node naming one is
# declared, not a disagreement. An over-count is never excused. A DeviceTaintRule
# without deviceSelector (v1.37 applies it to no device, v1.35 and v1.36 to all), and
# two drivers' partitionable resource pools of one name (v1.35 and v1.36 mix their
# counters up, v1.37 keys them apart); partitions over several slices, whose
# order kube-scheduler reads in map order (the agent counts the worst order's); free
# network-attached devices serving the node, which serve other nodes too (the agent
# counts them on none, `modelplane_agent.network`); a device lacking a declared
# entry, which fails the node for a claim selecting on it only if kube-scheduler tries
# that device before it has found the claim's (the agent counts none); and, on every
# version, devices allowing multiple allocations (counted once, free only while
# unshared) and free devices with binding conditions (counted none).
DECLARED_UNDER_COUNTS: tuple[str, ...] = (
    UNSELECTIVE_RULE,
    SHARED_POOL_NAME,
    SLICE_ORDER,
    NETWORK_ATTACHED,
    LACKS_DECLARED,
    SHARED_DEVICES,
    BINDING_CONDITIONS,
)


def declared(probe: Probe, view: Mapping) -> bool:
    """Whether `probe` is an under-count on a node whose view declares why."""
    causes = (view.get(probe.node) or {}).get("uncounted") or ()
    return probe.under_count and any(
        cause.startswith(known) for cause in causes for known in DECLARED_UNDER_COUNTS
    )


@dataclass(frozen=True)
class Verdicts:
    """A state's probes sorted: disagreements, and under-counts the agent declared."""

    disagreements: list[Probe]
    declared: list[Probe]


def sorted_verdicts(probes: Iterable[Probe], view: Mapping) -> Verdicts:
    disagreeing = [p for p in probes if p.disagrees]
    return Verdicts(
        [p for p in disagreeing if not declared(p, view)],
        [p for p in disagreeing if declared(p, view)],
    )


@dataclass(frozen=True)
class Oracle:
    """Where probes live: their namespace and the labels that find them again; whether
    it plays the driver of devices with binding conditions (`attaches`:
    `report_binding_conditions` while probes are decided)."""

    client: Client
    namespace: str
    labels: Mapping[str, str]
    attaches: bool = False

    def judge(self, pool: Pool, view: Mapping, prefix: str) -> list[Probe]:
        """Every probe of every node of `view`, decided by kube-scheduler. The "exact"
        probes are left in place (bound ones hold their devices): `remove` them."""
        more, exact = planned_probes(pool, view, prefix)
        self.decide(pool, more, "more")
        self.release(more)
        series = [self.place(pool, kind) for kind in planned_series(pool, view, prefix)]
        # A "one more" probe that bound held devices of its node: that node already
        # disagrees, and its exact probe would not be about the agent's view any more.
        holding = {p.node for p in more if p.outcome and p.outcome[0] == "bound"}
        exact = [p for p in exact if p.node not in holding]
        self.decide(pool, exact, "exact")
        return more + [p for placed in series for p in placed] + exact

    def place(self, pool: Pool, series: list[Series]) -> list[Probe]:
        """Every node's series of one kind, side by side: each round places the next
        pod of every series still going, and waits for kube-scheduler's verdicts.
        Then all are removed, their devices and room released."""
        while batch := [p for s in series if (p := s.next_probe()) is not None]:
            self.decide(pool, batch, "series")
        placed = [p for s in series for p in s.probes]
        self.release(placed)
        return placed

    def release(self, probes: list[Probe]) -> None:
        """Remove `probes`, until their claims are gone from the API server."""
        self.remove(probes, wait=True)

    def decide(self, pool: Pool, probes: list[Probe], phase: str) -> None:
        kinds = {d["name"]: d for d in pool.devices}
        labels: dict[str, Any] = {**self.labels, PHASE_LABEL: phase}
        for probe in probes:
            requests = [
                exact_request(
                    k,
                    kinds[k]["deviceClassName"],
                    n,
                    selectors=kinds[k].get("selectors", ()),
                )
                for k, n in probe.counts.items()
                if n > 0
            ]
            claim = claim_manifest(probe.name, self.namespace, requests, labels)
            self.client.create(ResourceClaim(claim))
            pod = pinned_pod(
                probe.name,
                self.namespace,
                probe.node,
                probe.name,
                labels,
                PodTerms(pool.tolerations, pool.min_pod_requests),
            )
            self.client.create(Pod(pod))
        pending = {p.name: p for p in probes}
        deadline = time.monotonic() + DECIDE_SECONDS
        while pending and time.monotonic() < deadline:
            if self.attaches:
                report_binding_conditions(self.client, self.namespace)
            for pod in self.client.list(Pod, namespace=self.namespace, labels=labels):
                waiting = pending.get(pod["metadata"]["name"])
                decided = verdict(pod)
                if waiting is not None and decided is not None:
                    waiting.outcome = decided
                    if final(waiting):
                        del pending[waiting.name]
            time.sleep(0.2)
        for waiting in pending.values():
            if waiting.outcome is None:
                waiting.outcome = (
                    "undecided",
                    f"neither bound nor Unschedulable in {DECIDE_SECONDS}s",
                )

    def remove(self, probes: Iterable[Probe], wait: bool = False) -> None:
        """Delete the probes' pods and claims, those kube-scheduler did not bind first;
        with `wait`, until the claims are gone (a bound probe's devices are free again
        only then).

        A refused pod still there when a bound one's devices are released is retried
        onto them: its allocation, reserved while its own deletion races the binding,
        is held in kube-scheduler's memory until that binding fails, with no API event
        to requeue a probe it refused meanwhile (v1.35.4 refused an "exact" probe for
        30 s so)."""
        names = [p.name for p in sorted(probes, key=_bound)]
        for name in names:
            delete(self.client, Pod, name, self.namespace)
            delete(self.client, ResourceClaim, name, self.namespace)
        deadline = time.monotonic() + DECIDE_SECONDS
        while wait and time.monotonic() < deadline:
            claims = self.client.list(ResourceClaim, namespace=self.namespace)
            if not {c["metadata"]["name"] for c in claims} & set(names):
                return
            time.sleep(0.2)
        if wait:
            raise TimeoutError(f"probe claims {names} not gone in {DECIDE_SECONDS}s")
