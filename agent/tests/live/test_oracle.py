"""kube-scheduler is the oracle: what the agent reports free on a node is exactly what
kube-scheduler will allocate there.

For each seeded random state (`modelplane_testkit.oracle_states`) on one real
cluster (kube-apiserver, kube-controller-manager, kube-scheduler of the Kubernetes
version `MODELPLANE_KUBE_VERSION` names, with that version's DRA feature gates:
`e2e.kube_versions`), the real `modelplane-agent` process observes the state's pool.
Its per-node view (/debug/nodes) must add up to the histogram it publishes, and for
every node of the pool kube-scheduler must agree with it: a pod pinned there claiming
exactly the node's free devices binds, one claiming one device more of any kind does
not, and pods claiming one device of a kind each, placed one after another, bind as
many times as the view counts that kind free there and not once more
(`modelplane_testkit.oracle`). The expectations come from the agent's view and
kube-scheduler's binding only; nothing here re-implements a counting rule.

An under-count the agent declares in its view (`oracle.DECLARED_UNDER_COUNTS`: a
DeviceTaintRule without deviceSelector, which kube-scheduler versions apply
differently; devices allowing multiple allocations or with binding conditions, ...)
does not fail its state; the run's summary counts those states and probes apart
from agreeing and disagreeing ones. Any other disagreement fails. In states with
devices that have binding conditions the harness plays their driver
(`oracle.report_binding_conditions`), so kube-scheduler binds what it allocates them.

One cluster and one agent serve every state; a state's objects carry its own names
and are deleted after it. Every disagreement fails its state's test with the seed,
the features it used, the agent's view, every probe's verdict with kube-scheduler's
message, and the state itself. Environment:
    MODELPLANE_ORACLE_STATES      how many states (default 30; make agent-oracle: 300)
    MODELPLANE_ORACLE_FIRST_SEED  the first seed (default 1); seeds are consecutive
    MODELPLANE_ORACLE_SEEDS       explicit seeds, comma-separated (replays a failure)
    MODELPLANE_ORACLE_FEATURES    "a,b" only those features, "-a,-b" all but those,
                                  "none" none (names: modelplane_testkit.oracle_states;
                                  the default leaves out the version's known
                                  disagreements and, as "all" does, the features
                                  whose feature gates it has off; naming one is
                                  refused)
    MODELPLANE_KUBE_VERSION       v1.35.4 (default), v1.36.3 or v1.37.2 (make
                                  agent-oracle-matrix: each, 150 states)
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.types import PatchType
from modelplane_devtools.processes import free_port
from modelplane_e2e import kube_versions
from modelplane_e2e.kube import eventually
from modelplane_testkit.oracle import (
    NOT_SERVED,
    CustomResourceDefinition,
    DeviceClass,
    Namespace,
    Node,
    Oracle,
    Pod,
    PoolObservation,
    PriorityClass,
    Probe,
    ResourceClaim,
    ResourceSlice,
    ServiceAccount,
    claim_manifest,
    converged_view,
    delete,
    device_taint_rule,
    exact_request,
    pinned_pod,
    report_binding_conditions,
    sorted_verdicts,
    verdict,
)
from modelplane_testkit.oracle_states import (
    CLASSES,
    SCHEDULER_FINALIZER,
    State,
    features_from,
    generate,
)

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e

NAMESPACE = "oracle"
STATE_LABEL = "oracle.modelplane.ai/state"
ROLE_LABEL = "oracle.modelplane.ai/role"
SETTLE_SECONDS = 60


def seeds() -> list[int]:
    explicit = os.environ.get("MODELPLANE_ORACLE_SEEDS", "").strip()
    if explicit:
        return [int(s) for s in explicit.split(",") if s.strip()]
    first = int(os.environ.get("MODELPLANE_ORACLE_FIRST_SEED", "1"))
    return list(range(first, first + int(os.environ.get("MODELPLANE_ORACLE_STATES", "30"))))


# --------------------------------------------------------------------------- the cluster


@dataclass
class World:
    client: Client
    agent_port: int
    kube: kube_versions.KubeVersion
    enabled: frozenset[str]  # the features states are generated with
    timings: list[tuple[int, float]] = field(default_factory=list)
    # Per seed: "agree", "declared" (only under-counts the agent declares) or "disagree";
    # and how many probes of each.
    outcomes: dict[int, str] = field(default_factory=dict)
    probes: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        states = Counter(self.outcomes.values())
        declared = sorted(seed for seed, outcome in self.outcomes.items() if outcome == "declared")
        disagree = sorted(seed for seed, outcome in self.outcomes.items() if outcome == "disagree")
        return (
            f"{states['agree']} agree, {states['disagree']} disagree {disagree}, "
            f"{states['declared']} with under-counts the agent declares {declared}; probes: "
            f"{self.probes['agree']} agree, {self.probes['disagree']} disagree, "
            f"{self.probes['declared']} declared under-counts"
        )


@pytest.fixture(scope="module")
def world(cluster, kube_version: kube_versions.KubeVersion) -> Iterator[World]:
    client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="oracle-test")
    for path in sorted((ROOT / "deploy" / "agent" / "crds").glob("*.yaml")):
        client.create(CustomResourceDefinition(yaml.safe_load(path.read_text())))
    eventually(
        lambda: list(client.list(PoolObservation)) == [],
        "the agent CRDs are served",
        timeout=60,
        every=0.2,
        not_yet=NOT_SERVED,
    )
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
    eventually(
        lambda: bool(client.get(ServiceAccount, "default", namespace=NAMESPACE)),
        f"{NAMESPACE}'s default ServiceAccount",
        timeout=60,
        every=0.2,
        not_yet=NOT_SERVED,
    )
    for name, expression in CLASSES.items():
        client.create(
            DeviceClass(
                {
                    "metadata": {"name": name},
                    "spec": {"selectors": [{"cel": {"expression": expression}}]},
                }
            )
        )
    port = free_port()
    cluster.supervisor.start(
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
    enabled = features_from(os.environ.get("MODELPLANE_ORACLE_FEATURES", ""), kube_version.version)
    world = World(client, port, kube_version, enabled)
    eventually(lambda: _ready(port), "the agent is ready", timeout=60, every=0.2)
    yield world
    total = sum(seconds for _, seconds in world.timings)
    print(
        f"\noracle on Kubernetes {kube_version.version}: {len(world.timings)} states "
        f"in {total:.1f}s "
        f"(slowest {max((s for _, s in world.timings), default=0):.1f}s): {world.summary()}"
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
    state = generate(seed, world.enabled)
    started = time.monotonic()
    problems: list[str] = []
    probes: list[Probe] = []
    declared: list[Probe] = []
    view: dict = {}
    try:
        apply_state(world, state)
        view, problems = converged_view(world.client, world.agent_port, state.pool, state.members)
        if not problems:
            oracle = Oracle(
                world.client,
                NAMESPACE,
                labels(state.seed, role="probe"),
                attaches="binding-conditions" in state.features,
            )
            probes = oracle.judge(state.pool, view, f"s{seed}")
            verdicts = sorted_verdicts(probes, view)
            problems = [p.disagreement() for p in verdicts.disagreements]
            declared = verdicts.declared
    finally:
        clean_up(world.client, state)
        world.timings.append((seed, time.monotonic() - started))
        world.outcomes[seed] = "disagree" if problems else "declared" if declared else "agree"
        world.probes.update(
            agree=len(probes) - len(problems) - len(declared),
            disagree=len(problems),
            declared=len(declared),
        )
    if declared:
        print(f"\nseed {seed}: under-counts the agent declares: {[p.line() for p in declared]}")
    if problems:
        pytest.fail(failure_report(world.kube, state, view, probes, problems), pytrace=False)


# --------------------------------------------------------------------------- applying a state


def apply_state(world: World, state: State) -> None:
    client = world.client
    client.create(PoolObservation(pool_manifest(state)))
    uids: dict[str, str] = {}  # each node's, for the slices it owns
    for step in state.steps:
        if step["op"] == "node":
            uids[step["name"]] = create_node(client, step, state.seed)
        else:
            apply_step(world, state, step, uids)


def apply_step(world: World, state: State, step: dict, uids: Mapping[str, str]) -> None:
    """Apply one step other than creating a node."""
    client = world.client
    op = step["op"]
    if op == "observe":
        # What the agent makes of the state so far is checked at the end, not here.
        converged_view(client, world.agent_port, state.pool, state.members)
    elif op == "converge":
        converge(client, state)
    elif op in ("hog", "workload", "allocated-claim", "finish"):
        pod_step(client, step, state.seed)
    elif op == "preempt":
        preempt(client, step, state.seed)
    else:
        device_step(client, step, state.seed, uids)


def device_step(client: Client, step: dict, seed: int, uids: Mapping[str, str]) -> None:
    """A node changed, a slice published or deleted, a taint rule or a DeviceClass put."""
    op = step["op"]
    if op == "node-update":
        update_node(client, step)
    elif op == "slice":
        owner = uids[step["node"]] if step["node"] else None
        client.create(ResourceSlice(slice_manifest(step, owner, seed)))
    elif op == "delete-slice":
        delete(client, ResourceSlice, step["name"])
    elif op == "taint-rule":
        client.create(device_taint_rule(client)(taint_rule_manifest(step, seed)))
    elif op == "device-class":
        put_device_class(client, step, seed)
    elif op == "priority-class":
        metadata = {"name": step["name"], "labels": labels(seed)}
        client.create(PriorityClass({"metadata": metadata, "value": step["value"]}))
    else:
        raise ValueError(f"unknown step {op!r}")


def pod_step(client: Client, step: dict, seed: int) -> None:
    """A pod bound outside any pool, a workload, a claim the state allocates, pods done."""
    op = step["op"]
    if op == "hog":
        client.create(Pod(hog_manifest(step, seed)))
    elif op == "workload":
        create_workload(client, step, seed)
    else:
        claim_step(client, step, seed)


def labels(seed: int, role: str | None = None) -> dict[str, str]:
    return {STATE_LABEL: f"s{seed}", **({ROLE_LABEL: role} if role else {})}


def pool_manifest(state: State) -> dict:
    # A kind's "selectors" are what the fleet's claims carry, not part of the observation.
    devices = [{k: v for k, v in d.items() if k != "selectors"} for d in state.pool.devices]
    spec: dict[str, Any] = {
        "poolName": state.pool.name,
        "nodeSelector": {"matchLabels": {"modelplane.ai/pool": state.pool.name}},
        "devices": devices,
        "tolerations": state.pool.tolerations,
    }
    if state.pool.min_pod_requests is not None:
        spec["minPodRequests"] = state.pool.min_pod_requests
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
    """A state's attribute as a slice publishes it: an int, a string, or already typed
    ({"version": ...})."""
    if isinstance(value, dict):
        return value
    return {"int": value} if isinstance(value, int) else {"string": value}


def _counters(counters: dict[str, str]) -> dict:
    return {name: {"value": value} for name, value in counters.items()}


def device_manifest(device: dict) -> dict:
    out: dict[str, Any] = {
        "name": device["name"],
        "attributes": {k: _attribute(v) for k, v in device["attributes"].items()},
    }
    if device.get("capacity"):
        # A declared size is a quantity; a shareable device's comes with its request policy.
        out["capacity"] = {
            name: value if isinstance(value, dict) else {"value": value}
            for name, value in device["capacity"].items()
        }
    if "consumes" in device:
        consumes = device["consumes"]
        out["consumesCounters"] = [
            {"counterSet": consumes["counterSet"], "counters": _counters(consumes["counters"])}
        ]
    if device.get("taints"):
        out["taints"] = device["taints"]
    # Which nodes it serves, in a slice with perDeviceNodeSelection.
    out.update({k: device[k] for k in ("nodeName", "nodeSelector", "allNodes") if k in device})
    # Consumable capacity and binding conditions, as the generator spells them.
    for name in (
        "allowMultipleAllocations",
        "bindingConditions",
        "bindingFailureConditions",
        "bindsToNode",
    ):
        if name in device:
            out[name] = device[name]
    return out


def slice_manifest(step: dict, node_uid: str | None, seed: int) -> dict:
    """A node's slice (owned by the node, `node_uid`), or a network-attached one (no
    node: its `reach` says which nodes it serves)."""
    spec: dict[str, Any] = {
        "driver": step["driver"],
        "pool": {
            "name": step["pool"],
            "generation": step["generation"],
            "resourceSliceCount": step["resourceSliceCount"],
        },
        **({"nodeName": step["node"]} if step["node"] else step["reach"]),
    }
    if step["devices"]:
        spec["devices"] = [device_manifest(d) for d in step["devices"]]
    if step["sharedCounters"]:
        spec["sharedCounters"] = [
            {"name": s["name"], "counters": _counters(s["counters"])}
            for s in step["sharedCounters"]
        ]
    metadata: dict[str, Any] = {"name": step["name"], "labels": labels(seed)}
    if node_uid is not None:  # as a driver does: the slice goes with its node
        owner = {"apiVersion": "v1", "kind": "Node", "name": step["node"], "uid": node_uid}
        metadata["ownerReferences"] = [owner]
    return {"metadata": metadata, "spec": spec}


def taint_rule_manifest(step: dict, seed: int) -> dict:
    spec: dict[str, Any] = {"taint": {"key": "example.com/rule", "effect": step["effect"]}}
    if step["selector"] is not None:  # none at all: every device
        spec["deviceSelector"] = step["selector"]
    return {"metadata": {"name": step["name"], "labels": labels(seed)}, "spec": spec}


def put_device_class(client: Client, step: dict, seed: int) -> None:
    """Create the state's own DeviceClass, or replace its selector."""
    spec = {"selectors": [{"cel": {"expression": step["expression"]}}]}
    try:
        client.get(DeviceClass, step["name"])
    except ApiError as error:
        if error.status.code != 404:
            raise
        metadata = {"name": step["name"], "labels": labels(seed)}
        client.create(DeviceClass({"metadata": metadata, "spec": spec}))
        return
    client.patch(DeviceClass, step["name"], {"spec": spec}, patch_type=PatchType.MERGE)


def hog_manifest(step: dict, seed: int) -> dict:
    """A pod already bound to its node (no scheduler involved) holding cpu, memory or a slot."""
    container: dict[str, Any] = {"name": "hog", "image": "example.invalid/hog:1"}
    if step["requests"]:
        container["resources"] = {"requests": step["requests"]}
    return {
        "metadata": {"name": step["name"], "namespace": NAMESPACE, "labels": labels(seed, "hog")},
        "spec": {"nodeName": step["node"], "containers": [container]},
    }


def create_workload(client: Client, step: dict, seed: int) -> None:
    requests = [
        exact_request(f"r{i}", device_class, count, step["adminAccess"], step.get("selectors", ()))
        for i, (device_class, count) in enumerate(sorted(step["requests"].items()))
    ]
    if step.get("capacity"):  # what each device's share asks of its memory
        for request in requests:
            request["exactly"]["capacity"] = {"requests": {"memory": step["capacity"]}}
    workload = labels(seed, "workload")
    client.create(ResourceClaim(claim_manifest(step["name"], NAMESPACE, requests, workload)))
    for i in range(step["pods"]):
        name = f"{step['name']}-p{i}"
        pod = pinned_pod(name, NAMESPACE, step["node"], step["name"], workload)
        client.create(Pod(prioritized(pod, step)))


def prioritized(pod: dict, step: dict) -> dict:
    """`pod` with `step`'s PriorityClass, cpu request and grace period, where it has them."""
    spec = pod["spec"]
    if "priorityClass" in step:
        spec["priorityClassName"] = step["priorityClass"]
    if "cpu" in step:
        spec["containers"][0]["resources"]["requests"] = {"cpu": step["cpu"]}
    if "gracePeriod" in step:
        spec["terminationGracePeriodSeconds"] = step["gracePeriod"]
    return pod


def preempt(client: Client, step: dict, seed: int) -> None:
    """A pod of a high PriorityClass pinned to a node where it fits only by preempting
    lower ones: wait until kube-scheduler nominates it there (the victims it deletes
    stay terminating, with their grace period and no kubelet) or binds it; delete it if
    it refuses it with no nomination (nothing to preempt). With `release`, the victims
    are then deleted at once, as their kubelet would once they stop, and the wait goes
    on until the preemptor binds and their claims are released."""
    name, node = step["name"], step["node"]
    role = labels(seed, "preemptor")
    wanted = sorted(step["requests"].items())
    requests = [exact_request(f"r{i}", c, n) for i, (c, n) in enumerate(wanted)]
    pod = pinned_pod(name, NAMESPACE, node, name, role)
    if requests:
        client.create(ResourceClaim(claim_manifest(name, NAMESPACE, requests, role)))
    else:  # a pod asking no device: no claim
        del pod["spec"]["resourceClaims"]
        del pod["spec"]["containers"][0]["resources"]["claims"]
    client.create(Pod(prioritized(pod, step)))
    state = preemption(client, name)
    if state == "refused":
        delete(client, Pod, name, NAMESPACE)
        return
    if state == "bound":
        return
    # kube-scheduler deletes the victims after it nominates (asynchronously from v1.33);
    # those without a grace period go at once, and the preemptor may bind then.
    after, victims = eventually(
        lambda: nominated_or_bound(client, seed, name, node),
        f"{name}'s victims terminating on {node}, or {name} bound",
        timeout=SETTLE_SECONDS,
        every=0.2,
    )
    if after == "nominated" and step["release"]:
        for victim in victims:
            delete(client, Pod, victim["metadata"]["name"], NAMESPACE)
        released(client, {v["metadata"]["uid"] for v in victims})
        if preemption(client, name, until_bound=True) != "bound":
            pytest.fail(f"preemptor {name} not bound once its victims were gone")


def nominated_or_bound(client: Client, seed: int, name: str, node: str) -> tuple[str, list[dict]]:
    """("bound", []) once the preemptor `name` is bound, else ("nominated", the state's
    pods on `node` being deleted: its victims); fails (not yet) while there are none."""
    if client.get(Pod, name, namespace=NAMESPACE)["spec"].get("nodeName"):
        return ("bound", [])
    victims = [
        p
        for p in client.list(Pod, namespace=NAMESPACE, labels=labels(seed))
        if p["metadata"].get("deletionTimestamp") and p["spec"].get("nodeName") == node
    ]
    assert victims, f"no pod of the state terminating on {node} yet"
    return ("nominated", victims)


def preemption(client: Client, name: str, until_bound: bool = False) -> str:
    """Where kube-scheduler has put the preemptor `name`: "bound", "nominated" (to the
    node it preempts on), or "refused" (unschedulable, nothing nominated for a second:
    the nomination comes with the refusal or just after it); with `until_bound`, only
    "bound" ends the wait."""
    deadline = time.monotonic() + SETTLE_SECONDS
    refused_at: float | None = None
    while time.monotonic() < deadline:
        pod = client.get(Pod, name, namespace=NAMESPACE)
        decided = verdict(pod)
        if decided is not None and decided[0] == "bound":
            return "bound"
        if not until_bound and (pod.get("status") or {}).get("nominatedNodeName"):
            return "nominated"
        if decided is None:
            refused_at = None
        elif refused_at is None:
            refused_at = time.monotonic()
        elif not until_bound and time.monotonic() - refused_at > 1.0:
            return "refused"
        time.sleep(0.2)
    pytest.fail(f"preemptor {name} undecided in {SETTLE_SECONDS}s")


def claim_step(client: Client, step: dict, seed: int) -> None:
    """A claim the state allocates ("allocated-claim") or pods that finish ("finish");
    then wait for kube-controller-manager to drop the reservations of pods gone or done."""
    if step["op"] == "allocated-claim":
        gone = create_allocated_claim(client, step, seed)
    else:
        gone = finish_pods(client, step)
    if gone:
        released(client, gone)


def create_allocated_claim(client: Client, step: dict, seed: int) -> set[str]:
    """A claim holding `step`'s devices, its allocation written as an allocator does; its
    holder a pod that finished on the node ("Succeeded", "Failed"), none, or a pod that
    never existed ("ghost"). Returns the uids its reservedFor names."""
    name, node, holder = step["name"], step["node"], step["holder"]
    held = labels(seed, "held")
    reserved: list[dict] = []
    if holder in ("Succeeded", "Failed"):
        pod = hog_manifest({"name": name, "node": node, "requests": step["requests"]}, seed)
        pod["metadata"]["labels"] = held
        pod["spec"]["resourceClaims"] = [{"name": "devices", "resourceClaimName": name}]
        resources = pod["spec"]["containers"][0].setdefault("resources", {})
        resources["claims"] = [{"name": "devices"}]
        uid = client.create(Pod(pod))["metadata"]["uid"]
        reserved = [{"resource": "pods", "name": name, "uid": uid}]
    elif holder == "ghost":
        reserved = [{"resource": "pods", "name": f"{name}-ghost", "uid": step["uid"]}]
    # The request the results answer (the API server checks they name one of the spec's).
    request = exact_request("r0", "whole-gpu.example.com", len(step["devices"]))
    claim = claim_manifest(name, NAMESPACE, [request], held)
    if step["finalizer"]:
        claim["metadata"]["finalizers"] = [SCHEDULER_FINALIZER]
    client.create(ResourceClaim(claim))
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    allocation = {
        "devices": {"results": [{"request": "r0", **device} for device in step["devices"]]},
        "nodeSelector": {"nodeSelectorTerms": [term]},
    }
    status: dict[str, Any] = {"allocation": allocation}
    if reserved:
        status["reservedFor"] = reserved
    client.patch(
        ResourceClaim.Status,
        name,
        {"status": status},
        namespace=NAMESPACE,
        patch_type=PatchType.MERGE,
    )
    if holder in ("Succeeded", "Failed"):
        finish(client, name, holder)
    return {r["uid"] for r in reserved}


def finish_pods(client: Client, step: dict) -> set[str]:
    """The pods of `step` still bound (the converge step deleted those refused) reach its phase, as
    their kubelet would report; returns their uids."""
    uids = set()
    for name in step["pods"]:
        try:
            pod = client.get(Pod, name, namespace=NAMESPACE)
        except ApiError as error:
            if error.status.code != 404:
                raise
            continue
        if pod["spec"].get("nodeName"):
            finish(client, name, step["phase"])
            uids.add(pod["metadata"]["uid"])
    return uids


def finish(client: Client, pod: str, phase: str) -> None:
    status = {"status": {"phase": phase}}
    client.patch(Pod.Status, pod, status, namespace=NAMESPACE, patch_type=PatchType.MERGE)


def released(client: Client, uids: set[str]) -> None:
    """Wait until no claim is reserved for the pods `uids` (gone or done): the
    resourceclaim controller's reaction, which in the same write deallocates the
    claims it leaves unreserved that carry kube-scheduler's finalizer. What a claim
    holds is fixed from then on; its reservedFor may not be: the controller's pod
    sync reserves an allocated claim for a pod bound to a node without checking that
    the pod is done, so a finished pod may be named again (the agent counts
    allocations, never reservations)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        claims = client.list(ResourceClaim, namespace=NAMESPACE)
        holding = {
            c["metadata"]["name"]
            for c in claims
            for r in (c.get("status") or {}).get("reservedFor") or []
            if r.get("uid") in uids
        }
        if not holding:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"claims {sorted(holding)} still reserved for pods gone or done")
        time.sleep(0.2)


def converge(client: Client, state: State) -> None:
    """Wait until kube-scheduler has decided every workload; delete those it refused, so
    that nothing is placed later, while the agent is read or probed."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        if "binding-conditions" in state.features:
            report_binding_conditions(client, NAMESPACE)
        pods = client.list(Pod, namespace=NAMESPACE, labels=labels(state.seed, "workload"))
        verdicts = {p["metadata"]["name"]: verdict(p) for p in pods}
        if all(v is not None for v in verdicts.values()):
            break
        if time.monotonic() > deadline:
            pytest.fail(f"seed {state.seed}: workloads undecided in {SETTLE_SECONDS}s: {verdicts}")
        time.sleep(0.2)
    for name, decided in verdicts.items():
        if decided is not None and decided[0] != "bound":
            delete(client, Pod, name, NAMESPACE)


def clean_up(client: Client, state: State) -> None:
    """Delete the state's objects without waiting: the next state uses other names."""
    delete(client, PoolObservation, state.pool.name)
    client.deletecollection(Pod, namespace=NAMESPACE, grace_period=0)
    client.deletecollection(ResourceClaim, namespace=NAMESPACE)
    for step in state.steps:
        if step["op"] == "taint-rule":
            delete(client, device_taint_rule(client), step["name"])
        elif step["op"] == "slice":
            delete(client, ResourceSlice, step["name"])
        elif step["op"] == "device-class":
            delete(client, DeviceClass, step["name"])
        elif step["op"] == "priority-class":
            delete(client, PriorityClass, step["name"])
    for node in state.nodes:
        delete(client, Node, node)


# --------------------------------------------------------------------------- the report


def failure_report(
    kube: kube_versions.KubeVersion,
    state: State,
    view: dict,
    probes: list[Probe],
    problems: list[str],
) -> str:
    lines = [
        f"seed {state.seed}: kube-scheduler {kube.version} and the agent disagree "
        f"({len(problems)})",
        f"features: {', '.join(state.features) or 'none'}",
        *[f"  - {p}" for p in problems],
        "the agent's view (/debug/nodes):",
        *[f"  {node}: {entry}" for node, entry in view.items()],
        "probes:",
        *[f"  {p.line()}" for p in probes],
        f"replay: MODELPLANE_KUBE_VERSION={kube.version} MODELPLANE_ORACLE_SEEDS={state.seed} "
        "make agent-oracle",
        "state:",
        yaml.safe_dump(
            dataclasses.asdict(state), sort_keys=False, default_flow_style=None, width=110
        ),
    ]
    return "\n".join(lines)
