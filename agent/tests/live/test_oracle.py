"""kube-scheduler is the oracle: what the agent reports free on a node is exactly what
kube-scheduler will allocate there.

For each seeded random state (`oracle_states`) on one real cluster (kube-apiserver,
kube-controller-manager, kube-scheduler with the DRA feature gates of conftest), the
real `modelplane-agent` process observes the state's pool. Its per-node view
(/debug/nodes) must add up to the histogram it publishes, and for every node of the
pool kube-scheduler must agree with it:

- a pod claiming exactly the node's free devices (one claim, an exact count per
  device kind, the pool's tolerations and pod shape) binds;
- a pod claiming one device more, of any kind, does not (for a node the agent
  leaves out of the histogram: a pod claiming one device of any kind does not).

Probes are pinned to their node by a required node affinity on the node's name, so
kube-scheduler decides about that node alone; a probe is decided once it is bound
or PodScheduled=False/Unschedulable (bounded waits). Probes of all nodes run at
once: first every "one more" probe, then, once those are gone, every "exact" one.
The expectations come from the agent's view and kube-scheduler's binding only;
nothing here re-implements a counting rule.

Every disagreement fails its state's test with the seed, the features it used, the
agent's view, every probe's verdict with kube-scheduler's message, and the state
itself. Environment:
    MODELPLANE_ORACLE_STATES      how many states (default 30; make agent-oracle: 300)
    MODELPLANE_ORACLE_FIRST_SEED  the first seed (default 1); seeds are consecutive
    MODELPLANE_ORACLE_SEEDS       explicit seeds, comma-separated (replays a failure)
    MODELPLANE_ORACLE_FEATURES    "a,b" only those features, "-a,-b" all but those,
                                  "none" none (names: modelplane_devtools.oracle_states)
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.types import PatchType
from modelplane_devtools.oracle_states import CLASSES, State, features_from, generate

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e

NAMESPACE = "oracle"
STATE_LABEL = "oracle.modelplane.ai/state"
PHASE_LABEL = "oracle.modelplane.ai/phase"
DECIDE_SECONDS = 30  # kube-scheduler answers a pinned probe in well under a second
SETTLE_SECONDS = 60

CRD = create_global_resource(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions"
)
Namespace = create_global_resource("", "v1", "Namespace", "namespaces")
ServiceAccount = create_namespaced_resource("", "v1", "ServiceAccount", "serviceaccounts")
Node = create_global_resource("", "v1", "Node", "nodes")
Pod = create_namespaced_resource("", "v1", "Pod", "pods")
DeviceClass = create_global_resource("resource.k8s.io", "v1", "DeviceClass", "deviceclasses")
ResourceSlice = create_global_resource("resource.k8s.io", "v1", "ResourceSlice", "resourceslices")
ResourceClaim = create_namespaced_resource(
    "resource.k8s.io", "v1", "ResourceClaim", "resourceclaims"
)
DeviceTaintRule = create_global_resource(
    "resource.k8s.io", "v1alpha3", "DeviceTaintRule", "devicetaintrules"
)
PoolObservation = create_global_resource(
    "agent.modelplane.ai", "v1alpha1", "PoolObservation", "poolobservations"
)


def seeds() -> list[int]:
    explicit = os.environ.get("MODELPLANE_ORACLE_SEEDS", "").strip()
    if explicit:
        return [int(s) for s in explicit.split(",") if s.strip()]
    first = int(os.environ.get("MODELPLANE_ORACLE_FIRST_SEED", "1"))
    return list(range(first, first + int(os.environ.get("MODELPLANE_ORACLE_STATES", "30"))))


ENABLED = features_from(os.environ.get("MODELPLANE_ORACLE_FEATURES", ""))


# --------------------------------------------------------------------------- the cluster


@dataclass
class World:
    client: Client
    agent_port: int
    timings: list[tuple[int, float]] = field(default_factory=list)

    def debug_nodes(self) -> dict:
        url = f"http://127.0.0.1:{self.agent_port}/debug/nodes"
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())


def eventually(check: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except ApiError:
            pass  # not served yet
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {seconds}s")


@pytest.fixture(scope="module")
def world(cluster) -> Iterator[World]:
    client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="oracle-test")
    for path in sorted((ROOT / "apis" / "agent").glob("*.yaml")):
        client.create(CRD(yaml.safe_load(path.read_text())))
    eventually(lambda: list(client.list(PoolObservation)) == [], "the agent CRDs are served")
    client.create(
        Namespace(
            {
                "metadata": {
                    "name": NAMESPACE,
                    # Claims asking adminAccess are only allowed in namespaces labelled so.
                    "labels": {"resource.kubernetes.io/admin-access": "true"},
                }
            }
        )
    )
    eventually(lambda: bool(client.get(ServiceAccount, "default", namespace=NAMESPACE)), "SA")
    for name, expression in CLASSES.items():
        client.create(
            DeviceClass(
                {
                    "metadata": {"name": name},
                    "spec": {"selectors": [{"cel": {"expression": expression}}]},
                }
            )
        )
    port = cluster.free_port()
    cluster.start(
        "modelplane-agent",
        [
            sys.executable,
            "-c",
            "from modelplane_agent.main import cli; cli()",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--listen=127.0.0.1:{port}",
            "--min-interval=0s",
            "--debug-nodes",
        ],
    )
    world = World(client, port)
    eventually(lambda: _ready(port), "the agent is ready", 60)
    yield world
    total = sum(seconds for _, seconds in world.timings)
    print(
        f"\noracle: {len(world.timings)} states in {total:.1f}s "
        f"(slowest {max((s for _, s in world.timings), default=0):.1f}s)"
    )


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


# --------------------------------------------------------------------------- the test


@pytest.mark.parametrize("seed", seeds(), ids=lambda seed: f"seed-{seed}")
def test_kube_scheduler_binds_exactly_what_the_agent_reports_free(world: World, seed: int):
    state = generate(seed, ENABLED)
    started = time.monotonic()
    problems: list[str] = []
    probes: list[Probe] = []
    view: dict = {}
    try:
        apply_state(world.client, state)
        view, problems = settled_view(world, state)
        if not problems:
            probes = run_probes(world.client, state, view)
            problems = [p.disagreement() for p in probes if p.disagrees]
    finally:
        clean_up(world.client, state)
        world.timings.append((seed, time.monotonic() - started))
    if problems:
        pytest.fail(failure_report(state, view, probes, problems), pytrace=False)


# --------------------------------------------------------------------------- applying a state


def apply_state(client: Client, state: State) -> None:
    client.create(PoolObservation(pool_manifest(state)))
    uids: dict[str, str] = {}
    for step in state.steps:
        op = step["op"]
        if op == "node":
            uids[step["name"]] = create_node(client, step, state.seed)
        elif op == "node-update":
            update_node(client, step)
        elif op == "slice":
            client.create(ResourceSlice(slice_manifest(step, uids[step["node"]], state.seed)))
        elif op == "delete-slice":
            _delete(client, ResourceSlice, step["name"])
        elif op == "taint-rule":
            client.create(DeviceTaintRule(taint_rule_manifest(step, state.seed)))
        elif op == "hog":
            client.create(Pod(hog_manifest(step, state.seed)))
        elif op == "workload":
            create_workload(client, step, state.seed)
        elif op == "settle":
            settle(client, state)
        else:
            raise ValueError(f"unknown step {op!r}")


def labels(seed: int, **more: str) -> dict[str, str]:
    return {STATE_LABEL: f"s{seed}", **more}


def pool_manifest(state: State) -> dict:
    spec: dict[str, Any] = {
        "poolName": state.pool.name,
        "nodeSelector": {"matchLabels": {"modelplane.ai/pool": state.pool.name}},
        "devices": state.pool.devices,
        "tolerations": state.pool.tolerations,
    }
    if state.pool.shape is not None:
        spec["podShape"] = state.pool.shape
    return {"metadata": {"name": state.pool.name, "labels": labels(state.seed)}, "spec": spec}


def create_node(client: Client, step: dict, seed: int) -> str:
    name = step["name"]
    client.create(Node({"metadata": {"name": name, "labels": {**step["labels"], **labels(seed)}}}))
    client.patch(Node.Status, name, node_status(step), patch_type=PatchType.MERGE)
    # The API server's TaintNodesByCondition admission taints a new node not-ready; no
    # node lifecycle controller runs to lift it, so the state's own taints replace it.
    spec = {"taints": step.get("taints") or None, "unschedulable": step.get("unschedulable")}
    client.patch(Node, name, {"spec": spec}, patch_type=PatchType.MERGE)
    return client.get(Node, name)["metadata"]["uid"]


def node_status(step: dict) -> dict:
    ready = step.get("ready", True)
    status: dict[str, Any] = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletNotReady",
                "message": "played by the oracle test",
                "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    if "capacity" in step:
        status["capacity"] = status["allocatable"] = step["capacity"]
    return {"status": status}


def update_node(client: Client, step: dict) -> None:
    spec = {k: step[k] for k in ("taints", "unschedulable") if k in step}
    if spec:
        client.patch(Node, step["name"], {"spec": spec}, patch_type=PatchType.MERGE)
    if "ready" in step:
        client.patch(Node.Status, step["name"], node_status(step), patch_type=PatchType.MERGE)


def _attribute(value: object) -> dict:
    return {"int": value} if isinstance(value, int) else {"string": value}


def _counters(counters: dict[str, str]) -> dict:
    return {name: {"value": value} for name, value in counters.items()}


def device_manifest(device: dict) -> dict:
    out: dict[str, Any] = {
        "name": device["name"],
        "attributes": {k: _attribute(v) for k, v in device["attributes"].items()},
    }
    if "consumes" in device:
        consumes = device["consumes"]
        out["consumesCounters"] = [
            {"counterSet": consumes["counterSet"], "counters": _counters(consumes["counters"])}
        ]
    if device.get("taints"):
        out["taints"] = device["taints"]
    return out


def slice_manifest(step: dict, node_uid: str, seed: int) -> dict:
    spec: dict[str, Any] = {
        "driver": step["driver"],
        "pool": {
            "name": step["pool"],
            "generation": step["generation"],
            "resourceSliceCount": step["resourceSliceCount"],
        },
        "nodeName": step["node"],
    }
    if step["devices"]:
        spec["devices"] = [device_manifest(d) for d in step["devices"]]
    if step["sharedCounters"]:
        spec["sharedCounters"] = [
            {"name": s["name"], "counters": _counters(s["counters"])}
            for s in step["sharedCounters"]
        ]
    owner = {"apiVersion": "v1", "kind": "Node", "name": step["node"], "uid": node_uid}
    metadata = {"name": step["name"], "labels": labels(seed), "ownerReferences": [owner]}
    return {"metadata": metadata, "spec": spec}


def taint_rule_manifest(step: dict, seed: int) -> dict:
    return {
        "metadata": {"name": step["name"], "labels": labels(seed)},
        "spec": {
            "deviceSelector": {k: step[k] for k in ("driver", "pool", "device")},
            "taint": {"key": "example.com/rule", "effect": step["effect"]},
        },
    }


def hog_manifest(step: dict, seed: int) -> dict:
    """A pod already bound to its node (no scheduler involved) holding cpu, memory or a slot."""
    container: dict[str, Any] = {"name": "hog", "image": "example.invalid/hog:1"}
    if step["requests"]:
        container["resources"] = {"requests": step["requests"]}
    return {
        "metadata": {"name": step["name"], "namespace": NAMESPACE, "labels": labels(seed)},
        "spec": {"nodeName": step["node"], "containers": [container]},
    }


def claim_manifest(name: str, requests: list[dict], seed: int, role: str) -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": labels(seed, **{PHASE_LABEL: role}),
        },
        "spec": {"devices": {"requests": requests}},
    }


def exact_request(name: str, device_class: str, count: int, admin: bool = False) -> dict:
    exactly: dict[str, Any] = {
        "deviceClassName": device_class,
        "allocationMode": "ExactCount",
        "count": count,
    }
    if admin:
        exactly["adminAccess"] = True
    return {"name": name, "exactly": exactly}


def pinned_pod(
    name: str,
    node: str,
    claim: str,
    seed: int,
    role: str,
    tolerations: list[dict] | None = None,
    requests: dict[str, str] | None = None,
) -> dict:
    """A pod that may only go to `node` (required affinity on the node's name), using `claim`."""
    container: dict[str, Any] = {
        "name": "main",
        "image": "example.invalid/main:1",
        "resources": {"claims": [{"name": "devices"}]},
    }
    if requests:
        container["resources"]["requests"] = requests
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    spec: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        },
        "resourceClaims": [{"name": "devices", "resourceClaimName": claim}],
        "containers": [container],
        "terminationGracePeriodSeconds": 0,
    }
    if tolerations:
        spec["tolerations"] = tolerations
    return {
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": labels(seed, **{PHASE_LABEL: role}),
        },
        "spec": spec,
    }


def create_workload(client: Client, step: dict, seed: int) -> None:
    requests = [
        exact_request(f"r{i}", device_class, count, step["adminAccess"])
        for i, (device_class, count) in enumerate(sorted(step["requests"].items()))
    ]
    client.create(ResourceClaim(claim_manifest(step["name"], requests, seed, "workload")))
    for i in range(step["pods"]):
        client.create(
            Pod(pinned_pod(f"{step['name']}-p{i}", step["node"], step["name"], seed, "workload"))
        )


def settle(client: Client, state: State) -> None:
    """Wait until kube-scheduler has decided every workload; delete those it refused, so
    that nothing is placed later, while the agent is read or probed."""
    selector = labels(state.seed, **{PHASE_LABEL: "workload"})
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        pods = list(client.list(Pod, namespace=NAMESPACE, labels=selector))
        verdicts = {p["metadata"]["name"]: verdict(p) for p in pods}
        if all(v is not None for v in verdicts.values()):
            break
        if time.monotonic() > deadline:
            pytest.fail(
                f"seed {state.seed}: workloads undecided after {SETTLE_SECONDS}s: {verdicts}"
            )
        time.sleep(0.2)
    for name, decided in verdicts.items():
        if decided is not None and decided[0] != "bound":
            _delete(client, Pod, name, namespace=NAMESPACE)


def verdict(pod: dict) -> tuple[str, str] | None:
    """("bound", node), ("refused", kube-scheduler's message), or None while undecided."""
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return ("bound", node)
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return ("refused", condition.get("message") or "")
    return None


def _delete(client: Client, resource: Any, name: str, namespace: str | None = None) -> None:
    try:
        client.delete(resource, name, namespace=namespace, grace_period=0)
    except ApiError as error:
        if error.status.code != 404:
            raise


def clean_up(client: Client, state: State) -> None:
    """Delete the state's objects without waiting: the next state uses other names."""
    _delete(client, PoolObservation, state.pool.name)
    client.deletecollection(Pod, namespace=NAMESPACE, grace_period=0)
    client.deletecollection(ResourceClaim, namespace=NAMESPACE)
    for step in state.steps:
        if step["op"] == "taint-rule":
            _delete(client, DeviceTaintRule, step["name"])
        elif step["op"] == "slice":
            _delete(client, ResourceSlice, step["name"])
    for node in state.nodes:
        _delete(client, Node, node)


# --------------------------------------------------------------------------- the agent's view


def settled_view(world: World, state: State) -> tuple[dict, list[str]]:
    """The agent's per-node view of the state's pool once it covers every member and
    holds still; and the problems if the view and the published status disagree."""
    pool = state.pool.name
    deadline = time.monotonic() + 30
    previous: dict | None = None
    while True:
        view = pool_view(world.debug_nodes(), pool)
        status = (world.client.get(PoolObservation, pool).get("status")) or {}
        problems = view_problems(state, view, status)
        if not problems and view == previous:
            return view, []
        if time.monotonic() > deadline:
            return view, problems or ["the agent's view did not hold still for 0.5s"]
        previous = view
        time.sleep(0.5)


def pool_view(debug: dict, pool: str) -> dict:
    return {
        node: pools[pool] for node, pools in sorted(debug.get("nodes", {}).items()) if pool in pools
    }


def view_problems(state: State, view: dict, status: dict) -> list[str]:
    problems = []
    if sorted(view) != sorted(state.members):
        problems.append(f"the agent's view covers nodes {sorted(view)}, the pool {state.members}")
    unobserved = {n: e["unobserved"] for n, e in view.items() if "unobserved" in e}
    if unobserved:
        problems.append(f"the agent does not observe the pool: {unobserved}")
    kinds = [d["name"] for d in state.pool.devices]
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


# --------------------------------------------------------------------------- probes


@dataclass
class Probe:
    node: str
    what: str  # "exact" or "one more <kind>"
    counts: dict[str, int]  # device kind -> count
    expect_bound: bool
    name: str
    outcome: tuple[str, str] | None = None  # verdict(), or ("undecided", "")

    @property
    def disagrees(self) -> bool:
        bound = self.outcome is not None and self.outcome[0] == "bound"
        return self.outcome is None or self.outcome[0] == "undecided" or bound != self.expect_bound

    def disagreement(self) -> str:
        expected = "binds" if self.expect_bound else "does not bind"
        got = "undecided" if self.outcome is None else f"{self.outcome[0]}: {self.outcome[1]}"
        claiming = f"a pod claiming {self.counts} ({self.what})"
        return f"node {self.node}: {claiming} {expected}; kube-scheduler: {got}"


def planned_probes(state: State, view: dict) -> tuple[list[Probe], list[Probe]]:
    """("one more" probes, "exact" probes) for every node of the view."""
    kinds = [d["name"] for d in state.pool.devices]
    more, exact = [], []
    for index, (node, entry) in enumerate(sorted(view.items())):
        free = entry.get("free") or dict.fromkeys(kinds, 0)
        for k, kind in enumerate(kinds):
            counts = {**free, kind: free[kind] + 1}
            more.append(
                Probe(node, f"one more {kind}", counts, False, f"s{state.seed}-more{index}-{k}")
            )
        if "free" in entry and sum(free.values()) > 0:
            exact.append(Probe(node, "exact", dict(free), True, f"s{state.seed}-exact{index}"))
    return more, exact


def run_probes(client: Client, state: State, view: dict) -> list[Probe]:
    more, exact = planned_probes(state, view)
    decide(client, state, more, "more")
    for probe in more:
        _delete(client, Pod, probe.name, namespace=NAMESPACE)
        _delete(client, ResourceClaim, probe.name, namespace=NAMESPACE)
    # A "one more" probe that bound holds devices of its node: that node already
    # disagrees, and its exact probe would not be about the agent's view any more.
    holding = {p.node for p in more if p.outcome and p.outcome[0] == "bound"}
    exact = [p for p in exact if p.node not in holding]
    decide(client, state, exact, "exact")
    return more + exact


def decide(client: Client, state: State, probes: list[Probe], phase: str) -> None:
    classes = {d["name"]: d["deviceClassName"] for d in state.pool.devices}
    for probe in probes:
        requests = [exact_request(k, classes[k], n) for k, n in probe.counts.items() if n > 0]
        client.create(ResourceClaim(claim_manifest(probe.name, requests, state.seed, phase)))
        client.create(
            Pod(
                pinned_pod(
                    probe.name,
                    probe.node,
                    probe.name,
                    state.seed,
                    phase,
                    state.pool.tolerations,
                    state.pool.shape,
                )
            )
        )
    pending = {p.name: p for p in probes}
    deadline = time.monotonic() + DECIDE_SECONDS
    while pending and time.monotonic() < deadline:
        for pod in client.list(
            Pod, namespace=NAMESPACE, labels=labels(state.seed, **{PHASE_LABEL: phase})
        ):
            probe = pending.get(pod["metadata"]["name"])
            decided = verdict(pod)
            if probe is not None and decided is not None:
                probe.outcome = decided
                del pending[probe.name]
        time.sleep(0.2)
    for probe in pending.values():
        probe.outcome = ("undecided", f"neither bound nor Unschedulable after {DECIDE_SECONDS}s")


# --------------------------------------------------------------------------- the report


def failure_report(state: State, view: dict, probes: list[Probe], problems: list[str]) -> str:
    lines = [
        f"seed {state.seed}: kube-scheduler and the agent disagree ({len(problems)})",
        f"features: {', '.join(state.features) or 'none'}",
        *[f"  - {p}" for p in problems],
        "the agent's view (/debug/nodes):",
        *[f"  {node}: {entry}" for node, entry in view.items()],
        "probes:",
        *[f"  {p.node} {p.what} {p.counts} expect {_expected(p)}: {p.outcome}" for p in probes],
        f"replay: MODELPLANE_ORACLE_SEEDS={state.seed} make agent-oracle",
        "state:",
        yaml.safe_dump(
            dataclasses.asdict(state), sort_keys=False, default_flow_style=None, width=110
        ),
    ]
    return "\n".join(lines)


def _expected(probe: Probe) -> str:
    return "bound" if probe.expect_bound else "refused"
