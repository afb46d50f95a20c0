"""One fleet-scale run on a running stack: set the fleet up, let the deployments arrive,
wait for it to converge, then measure.

Both arms run at once on the same API servers (`profile.ARMS`): each workload
cluster holds an Observed arm's pools and a Declared arm's pools, mirrored,
behind two InferenceClusters reaching it through the same kubeconfig; each
arm's deployments select only its own clusters (`profile.ARM_LABEL`) and live
in their own namespace. They share the machine, the API servers, Crossplane
and the functions, so the control-plane cost is the run's, both arms
together; their capacity is separate (every pod is pinned to its pool).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path

from modelplane_e2e import fleet, install, manifests
from modelplane_e2e.functions import endpoint_port
from modelplane_e2e.kube import Kube, KubectlFailed, condition, eventually
from modelplane_e2e.scale import analysis, cost, record, report
from modelplane_e2e.scale.meters import SAMPLE, Meters
from modelplane_e2e.scale.profile import (
    ARM_LABEL,
    ARMS,
    BACKGROUND,
    DECLARED,
    GPU,
    NIC,
    OBSERVED,
    Profile,
    Shape,
    background,
    background_objects,
    background_taken,
    cluster_name,
    deployment,
    pools,
    shapes,
    team,
)
from modelplane_e2e.stack import Stack

SECRETS = "scale-system"
CHUNK = 150  # objects per kubectl apply
CALM = 3  # checks in a row with nothing left to decide or bind: converged


@dataclass(frozen=True)
class ArmFleet:
    """One arm's part of one workload cluster."""

    arm: str
    index: int
    kube: Kube  # the platform's admin client of its workload cluster
    provider: Kube  # provider-kubernetes' least-privilege client of it (stack.provider_identity)
    pools: list[fleet.Pool]
    held: dict[str, int]  # node -> GPUs the background holds

    @property
    def cluster(self) -> str:
        return cluster_name(self.arm, self.index)


def _apply_chunked(kube: Kube, docs: list[dict]) -> None:
    for at in range(0, len(docs), CHUNK):
        kube.apply(docs[at : at + CHUNK])


def _node(pool: fleet.Pool, name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, fleet.POOL_LABEL: pool.name},
            "annotations": {fleet.KWOK_MANAGED: "fake"},
        },
    }


def add_nodes(kube: Kube, pool_list: list[fleet.Pool]) -> None:
    """`fleet.add_nodes` in batches: Nodes for kwok, one ResourceSlice per node and driver."""
    kube.apply(fleet.device_classes(pool_list))
    docs = []
    for pool in pool_list:
        for name in pool.node_names():
            docs += [_node(pool, name), *fleet.resource_slices(pool, name)]
    _apply_chunked(kube, docs)


def _all_ready(kube: Kube, names: set[str]) -> bool:
    """`fleet.await_ready` for many nodes at once: Ready, untainted, Lease renewed."""
    nodes = {n["metadata"]["name"]: n for n in kube.list("nodes")}
    leases = {
        lease["metadata"]["name"]
        for lease in kube.list("leases.coordination.k8s.io", "kube-node-lease")
        if lease["spec"].get("renewTime")
    }
    unready = sorted(
        name
        for name in names
        if (condition(nodes.get(name), "Ready") or {}).get("status") != "True"
        or (nodes.get(name) or {}).get("spec", {}).get("taints")
        or name not in leases
    )
    assert not unready, f"{len(unready)} nodes not Ready, untainted and leased: {unready[:5]}"
    return True


def await_nodes(kube: Kube, names: set[str]) -> None:
    eventually(partial(_all_ready, kube, names), "every node Ready", timeout=300, every=5)


def _background_bound(kube: Kube, expected: int) -> bool:
    listed = kube.list("pods", BACKGROUND)
    bound = [p for p in listed if (condition(p, "PodScheduled") or {}).get("status") == "True"]
    assert len(bound) == expected, f"{len(bound)} of {expected} background pods bound"
    return True


def set_up_workload(kube: Kube, provider: Kube, index: int, profile: Profile) -> list[ArmFleet]:
    """Both arms' pools on one workload cluster, with the background load on them."""
    kube.apply([manifests.namespace(n) for n in (*(team(a) for a in ARMS), BACKGROUND)])
    taken = background(profile)
    arms = []
    for arm in ARMS:
        arm_pools = pools(arm, index, profile.nodes)
        arms.append(
            ArmFleet(arm, index, kube, provider, arm_pools, background_taken(arm_pools, taken))
        )
    add_nodes(kube, [p for a in arms for p in a.pools])
    names = {n for a in arms for p in a.pools for n in p.node_names()}
    await_nodes(kube, names)
    objects = background_objects({n: c for a in arms for n, c in a.held.items()})
    _apply_chunked(kube, objects)
    busy = sum(1 for a in arms for c in a.held.values() if c)
    eventually(partial(_background_bound, kube, busy), "background bound", timeout=300, every=5)
    return arms


def inference_cluster(part: ArmFleet, max_age: str) -> dict:
    doc = fleet.inference_cluster(
        part.cluster, part.pools, labels={ARM_LABEL: part.arm}, secrets=SECRETS, max_age=max_age
    )
    if part.arm == DECLARED:
        doc["spec"]["observation"]["mode"] = "Declared"
    return doc


def _published(control: Kube, part: ArmFleet) -> bool:
    """The cluster is Ready; an Observed one publishes every pool, background counted."""
    ic = control.get("inferencecluster", part.cluster) or {}
    ready = condition(ic, "Ready") or {}
    assert ready.get("status") == "True", f"{part.cluster} Ready: {ready}"
    if part.arm != OBSERVED:
        return True
    published = {p["name"]: p for p in (ic.get("status") or {}).get("gpuPools") or []}
    for pool in part.pools:
        buckets = published.get(pool.name, {}).get("nodesByFreeDevices") or []
        free = sum(b["nodes"] * b["free"].get("gpu", 0) for b in buckets)
        want = sum(GPU.count - part.held[n] for n in pool.node_names())
        assert free == want, f"{part.cluster}/{pool.name}: {free} free GPUs published, want {want}"
    return True


def set_up_control(control: Kube, parts: list[ArmFleet], max_age: str) -> None:
    control.apply([manifests.namespace(n) for n in (SECRETS, *(team(a) for a in ARMS))])
    eventually(
        lambda: install.apis_served_by_the_configuration(control), "the Configuration's APIs"
    )
    for part in parts:
        control.apply(fleet.kubeconfig_secret(part.cluster, SECRETS, part.provider))
        control.apply(inference_cluster(part, max_age))
    for part in parts:
        eventually(
            partial(_published, control, part), f"{part.cluster} published", timeout=300, every=5
        )


def meters(stack: Stack, kubes: list[Kube]) -> Meters:
    assert stack.control_plane and stack.installed, "install Modelplane first"
    recorder = record.Recorder(stack.supervisor)
    for kind in record.CONTROL_KINDS:
        recorder.watch(stack.control_plane.kube, kind)
    for kube in kubes:
        for kind in record.WORKLOAD_KINDS:
            recorder.watch(kube, kind)
    functions = stack.installed.functions
    wire = cost.Wire({name: endpoint_port(address) for name, address in functions.items()})
    port = cost.metrics_port(stack.supervisor.processes)
    return Meters(
        recorder,
        wire,
        port,
        cpu_before=cost.snapshot(stack.supervisor.processes),
        requests_before=cost.requests_sent(port, list(functions)),
    )


def arrive(control: Kube, arrivals: list[Shape], instruments: Meters) -> None:
    """Each deployment, both arms' at once, at its offset from now; every deployment
    already due goes in one apply, so a slow API server delays arrivals without
    accumulating the delay."""
    began = time.monotonic()
    pending = list(arrivals)
    while pending:
        instruments.wait(began + pending[0].at - time.monotonic())
        now = time.monotonic() - began
        due = [s for s in pending if s.at <= now]
        pending = pending[len(due) :]
        if due:
            control.apply([deployment(s, arm) for s in due for arm in ARMS])
            created = len(arrivals) - len(pending)
            elapsed = time.monotonic() - began
            print(f"arrivals: {created} of {len(arrivals)} per arm, {elapsed:.0f} s", flush=True)


def unconverged(
    arm: str,
    deployments: list[dict],
    replicas: list[dict],
    pods: list[dict],
    given: dict[str, Shape],
) -> list[str]:
    """Why an arm has not converged yet: a deployment still deciding, a pod not bound, or a
    replica admitted for its placement whose pods are not all bound, which includes pods
    not created yet (its workloads may still be on their way to the workload cluster)."""
    why = []
    for md in deployments:
        reason = (condition(md, "ReplicasScheduled") or {}).get("reason", "")
        if reason not in ("AllReplicasScheduled", "InsufficientCapacity"):
            why.append(f"{arm}/{md['metadata']['name']}: {reason or 'no condition'}")
    bound: Counter[str] = Counter()
    for pod in pods:
        if (condition(pod, "PodScheduled") or {}).get("status") != "True":
            why.append(f"{arm}/pod {pod['metadata']['name']} not bound")
        elif not pod["metadata"].get("deletionTimestamp"):
            bound[(pod["metadata"].get("labels") or {}).get(analysis.REPLICA_LABEL, "")] += 1
    for replica in replicas:
        meta = replica["metadata"]
        verdict = ((replica.get("status") or {}).get("admission") or {}).get("verdict")
        if verdict != "Admitted" or meta.get("deletionTimestamp"):
            continue
        labels = meta.get("labels") or {}
        deployment = labels.get(analysis.DEPLOYMENT_LABEL) or meta["name"].rsplit("-", 1)[0]
        wanted = given[deployment].pods_per_replica if deployment in given else 1
        if bound[meta["name"]] < wanted:
            why.append(
                f"{arm}/{meta['name']}: admitted, {bound[meta['name']]} of {wanted} pods bound"
            )
    return why


def _unconverged(control: Kube, kubes: list[Kube], given: dict[str, Shape]) -> list[str]:
    """`unconverged` on what the API servers list now. A list an overloaded API server
    fails (it answered a full run's third check with an HTTP/2 INTERNAL_ERROR) is
    a reason in itself: nothing is known converged, and the next check lists again."""
    why = []
    for arm in ARMS:
        try:
            deployments = control.list("modeldeployments.modelplane.ai", team(arm))
            replicas = control.list("modelreplicas.modelplane.ai", team(arm))
            pods = [pod for kube in kubes for pod in kube.list("pods", team(arm))]
        except KubectlFailed as failed:
            why.append(f"{arm}: {failed}")
            continue
        why += unconverged(arm, deployments, replicas, pods, given)
    return why


def converge(
    control: Kube, kubes: list[Kube], given: list[Shape], instruments: Meters, limit: float
) -> list[str]:
    """Wait until nothing is left to decide or bind for `CALM` checks in a row, `SAMPLE`
    seconds apart, or `limit` seconds; returns what had still not converged (empty when
    converged)."""
    deadline = time.monotonic() + limit
    calm = 0
    why: list[str] = []
    while time.monotonic() < deadline and calm < CALM:
        instruments.wait(SAMPLE)
        why = _unconverged(control, kubes, {s.name: s for s in given})
        calm = 0 if why else calm + 1
        left = deadline - time.monotonic()
        print(f"converging: {len(why)} unconverged, at most {left:.0f} s left", flush=True)
    return why


Logs = Callable[[Kube | None, str], list[dict]]


def _arm(
    name: str,
    parts: list[ArmFleet],
    given: list[Shape],
    logs: Logs,
    end: float,
    max_age: float,
) -> analysis.Arm:
    mine = [p for p in parts if p.arm == name]
    pool_list = [pool for p in mine for pool in p.pools]
    pod_events = [e for p in mine for e in logs(p.kube, "pods")]
    observation_events = [
        e for p in mine for e in logs(p.kube, "poolobservations.agent.modelplane.ai")
    ]
    namespace = team(name)
    replica_events = logs(None, "modelreplicas.modelplane.ai")
    deployment_events = logs(None, "modeldeployments.modelplane.ai")
    return analysis.Arm(
        name=name,
        observed=name == OBSERVED,
        max_age=max_age,
        shapes={s.name: s for s in given},
        pods=analysis.pods(pod_events, namespace),
        replicas=analysis.replicas(replica_events, namespace),
        observations=analysis.observations(observation_events, {p.name for p in pool_list}),
        deployments=analysis.deployments(deployment_events, namespace),
        background={n: c for p in mine for n, c in p.held.items()},
        node_pools={n: pool.name for pool in pool_list for n in pool.node_names()},
        nic_pools=frozenset(pool.name for pool in pool_list if NIC in pool.devices),
        end=end,
        stale=analysis.stale_writes(replica_events, deployment_events, namespace),
    )


@dataclass(frozen=True)
class Outcome:
    table: str
    figures: dict[str, analysis.Figures]
    unconverged: list[str]
    folder: Path


def run(
    stack: Stack, kubes: list[Kube], providers: list[Kube], profile: Profile, out: Path
) -> Outcome:
    """The whole run on a stack with Modelplane installed and an agent on every workload
    cluster in `kubes` (admin clients; `providers` holds provider-kubernetes' identity on
    each, in the same order); the table goes to `out` and is returned."""
    assert stack.control_plane is not None
    control = stack.control_plane.kube
    began = time.monotonic()
    parts = [
        part
        for i, (kube, provider) in enumerate(zip(kubes, providers, strict=True))
        for part in set_up_workload(kube, provider, i, profile)
    ]
    print(f"set-up: {profile.nodes_in_all} nodes Ready, background bound", flush=True)
    set_up_control(control, parts, profile.max_age)
    set_up_seconds = time.monotonic() - began
    print(f"set-up: every InferenceCluster published, {set_up_seconds:.0f} s", flush=True)
    arrivals = shapes(profile)
    instruments = meters(stack, kubes)
    start_wall, start = time.time(), time.monotonic()
    arrive(control, arrivals, instruments)
    still = converge(control, kubes, arrivals, instruments, profile.converge_timeout)
    seconds = time.monotonic() - start
    measured = report.Measured.take(stack, instruments, seconds)
    instruments.recorder.stop()
    end = time.time()

    # Both arms read the same control-plane watches: each log is parsed once.
    @cache
    def logs(kube: Kube | None, kind: str) -> list[dict]:
        return record.events(instruments.recorder.log(kube or control, kind))

    figures = {
        arm: analysis.figures(
            _arm(arm, parts, arrivals, logs, end, profile.max_age_seconds), start_wall
        )
        for arm in ARMS
    }
    apiserver = stack.control_plane.apiserver.process
    assert apiserver is not None
    resets = analysis.watch_cache_resets(apiserver.log.read_text(errors="replace"))
    gaps = instruments.recorder.gaps()
    run_facts = report.Facts(profile, len(kubes), set_up_seconds, seconds, still, resets, gaps)
    table = report.table(run_facts, figures, measured)
    return Outcome(table, figures, still, report.write(out, table, figures, measured))
