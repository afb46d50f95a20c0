"""A fleet's life on a real control plane, one step per test, in file order.

The functions run as installed Function packages behind Crossplane core;
provider-kubernetes carries their Objects to a second API server whose
kube-scheduler places the pods on fake GPU nodes (see
`modelplane_e2e`). Each step is asserted through the API servers
only. Every PoolObservation and ReplicaObservation status is the real
agent's (`modelplane_e2e.agent`, installed by the session with its
CRDs and RBAC and run with its service account's token); LeaderWorkerSet
pods come from LWS's own controller, and kwok runs every pod in the
kubelets' place (Running, Ready, removed once deleted). Later steps build on
earlier ones: when one fails, the rest fail with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections import Counter

import pytest
import yaml
from modelplane_common.timeutil import parse_time
from modelplane_devtools.paths import ROOT
from modelplane_e2e import agent, fleet, install, kwok, lws, manifests
from modelplane_e2e.binaries import binary
from modelplane_e2e.kube import Kube, condition, eventually

pytestmark = pytest.mark.e2e

CLUSTER = "gpu-east"
SECRETS = "modelplane-system"
TEAM = "team-a"
DEPLOYMENT = "chat"
H100 = {"productName": {"string": "NVIDIA-H100-80GB-HBM3"}}
POOLS = [
    fleet.Pool(
        "h100",
        4,
        (fleet.DeviceKind("gpu", "gpu.nvidia.com", 8, H100, {"memory": {"value": "80Gi"}}),),
    ),
    fleet.Pool(
        "l40s",
        2,
        (
            fleet.DeviceKind(
                "gpu", "gpu.nvidia.com", 4, {"productName": {"string": "NVIDIA-L40S"}},
                {"memory": {"value": "48Gi"}},
            ),
            fleet.DeviceKind("nic", "rdma.mellanox.com", 2, {"linkSpeedGbps": {"int": 200}}, {}),
        ),
    ),
]  # fmt: skip


# The suite's agent heartbeats well inside maxAge, which it reads from the
# PoolObservations; short, so that the stale step waits one minute, not five.
INFERENCE_CLUSTER = fleet.inference_cluster(
    CLUSTER,
    POOLS,
    labels={"modelplane.ai/tier": "production"},
    secrets=SECRETS,
    max_age=agent.MAX_AGE,
)

H100_ONLY = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA-H100-80GB-HBM3"'
BIG_ENOUGH = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'


def _member(role: str, gpus: int, expression: str, **extra) -> dict:
    return {
        "role": role,
        **extra,
        "nodeSelector": {
            "devices": [
                {"name": "gpu", "count": gpus, "selectors": [{"cel": {"expression": expression}}]}
            ]
        },
        "template": {
            "spec": {"containers": [{"name": "engine", "image": "example.invalid/engine:v1"}]}
        },
    }


MODEL_DEPLOYMENT = manifests.model_deployment(
    DEPLOYMENT,
    namespace=TEAM,
    replicas=3,
    engines=[
        # One Standalone engine, one GPU of at least 40 GiB anywhere.
        {"name": "router", "members": [_member("Standalone", 1, BIG_ENOUGH)]},
        # A gang: a leader and one worker, two H100s each, on distinct nodes.
        {
            "name": "model",
            "members": [
                _member("Leader", 2, H100_ONLY),
                _member("Worker", 2, H100_ONLY, worker={"nodes": 1}),
            ],
        },
    ],
)
PODS_PER_REPLICA = 3


def _true(kube: Kube, kind: str, name: str, kind_of_condition: str, namespace: str | None = None):
    obj = kube.get(kind, name, namespace)
    c = condition(obj, kind_of_condition)
    assert c and c["status"] == "True", f"{kind} {name} {kind_of_condition}: {c}"
    return obj


def _replicas(control: Kube) -> dict[str, dict]:
    return {r["metadata"]["name"]: r for r in control.list("modelreplicas.modelplane.ai", TEAM)}


def _pods(workload: Kube) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in workload.list("pods", TEAM)}


def test_a_cluster_in_observed_mode_gets_its_provider_config_and_pool_observations(
    planes, e2e_stack
):
    control, workload = planes
    # The platform's part: GPU nodes with their devices (the session installed LWS, the
    # agent and provider-kubernetes' least-privilege role, and kwok runs the nodes). The
    # tenant namespace is not created here: the replicas compose it.
    assert e2e_stack.provider is not None
    fleet.add_nodes(workload, POOLS)
    fleet.await_ready(workload, POOLS)

    control.kubectl("create", "namespace", SECRETS)
    control.kubectl("create", "namespace", TEAM)
    control.apply(fleet.kubeconfig_secret(CLUSTER, SECRETS, e2e_stack.provider))
    # The APIs are the Configuration's (the session installed it): every
    # Composition step names a Function the package manager installed for one
    # of its dependencies.
    referenced = eventually(
        lambda: install.apis_served_by_the_configuration(control), "the Configuration's APIs"
    )
    assert sorted(referenced) == sorted(e2e_stack.installed.functions)
    # ...named as examples/functions.yaml (the install without the Configuration) names them.
    by_hand = yaml.safe_load_all((ROOT / "examples" / "functions.yaml").read_text())
    assert sorted(referenced) == sorted(f["metadata"]["name"] for f in by_hand)
    control.apply(INFERENCE_CLUSTER)

    eventually(
        lambda: control.get("clusterproviderconfigs.kubernetes.m.crossplane.io", CLUSTER),
        "the ClusterProviderConfig named after the cluster",
    )
    for pool in POOLS:
        eventually(
            lambda p=pool: workload.get("poolobservations.agent.modelplane.ai", p.name),
            f"PoolObservation {pool.name} on the workload cluster",
            timeout=180,
        )
    for pool in POOLS:
        # The cluster's maxAge reaches the agent on each PoolObservation: no --max-age.
        observation = workload.get("poolobservations.agent.modelplane.ai", pool.name)
        assert observation["spec"]["maxAge"] == agent.MAX_AGE
    objects = control.list("objects.kubernetes.m.crossplane.io", SECRETS)
    assert {o["spec"]["forProvider"]["manifest"]["kind"] for o in objects} >= {
        "CustomResourceDefinition",
        "PoolObservation",
    }
    present = eventually(
        lambda: (
            (control.get("inferencecluster", CLUSTER) or {})
            .get("status", {})
            .get("agent", {})
            .get("present")
        ),
        "InferenceCluster status.agent.present",
    )
    assert present is True


def test_b_the_agents_reports_reach_the_inference_cluster_status(planes, e2e_stack):
    control, _ = planes

    def published() -> dict:
        status = (control.get("inferencecluster", CLUSTER) or {}).get("status") or {}
        pools = {p["name"]: p for p in status.get("gpuPools") or []}
        assert set(pools) == {p.name for p in POOLS}, f"gpuPools: {sorted(pools)}"
        waiting = [n for n, p in pools.items() if "nodesByFreeDevices" not in p]
        assert not waiting, f"no histogram yet for {waiting}"
        return pools

    pools = eventually(
        published, "both pools' histograms in InferenceCluster.status.gpuPools", timeout=120
    )
    assert pools["h100"]["nodesByFreeDevices"] == [{"free": {"gpu": 8}, "nodes": 4}]
    assert pools["l40s"]["nodesByFreeDevices"] == [{"free": {"gpu": 4, "nic": 2}, "nodes": 2}]
    assert pools["h100"]["observedNodes"] == 4
    _true(control, "inferencecluster", CLUSTER, "CapacityObserved")
    followed = f"heartbeats follow maxAge {agent.MAX_AGE} (from PoolObservations)"
    assert followed in e2e_stack.agent.tail(lines=100_000), e2e_stack.agent.tail()


def test_c_three_replicas_are_placed_and_their_pods_bound_gangs_on_distinct_nodes(planes):
    control, workload = planes
    control.apply(MODEL_DEPLOYMENT)

    replicas = eventually(
        lambda: len(found := _replicas(control)) == 3 and found, "3 ModelReplicas", timeout=120
    )
    assert {r["spec"]["clusterName"] for r in replicas.values()} == {CLUSTER}

    def workloads() -> bool:
        deployments = workload.list("deployments", TEAM)
        sets = workload.list(f"leaderworkersets.{lws.GROUP}", TEAM)
        templates = workload.list("resourceclaimtemplates.resource.k8s.io", TEAM)
        assert (len(deployments), len(sets), len(templates)) == (3, 3, 9), (
            f"deployments {len(deployments)}, leaderworkersets {len(sets)}, "
            f"claim templates {len(templates)}"
        )
        return True

    eventually(
        workloads, "a Deployment, a LeaderWorkerSet and 3 claim templates per replica", timeout=180
    )

    def bound() -> dict:
        pods = _pods(workload)
        unbound = [n for n, p in pods.items() if not p["spec"].get("nodeName")]
        assert len(pods) == 3 * PODS_PER_REPLICA and not unbound, (
            f"{len(pods)} pods, unbound {unbound}"
        )
        return pods

    pods = eventually(bound, "9 pods bound by kube-scheduler", timeout=180)
    gangs: dict[str, list[str]] = {}
    for pod in pods.values():
        key = pod["metadata"]["labels"].get(lws.GROUP_KEY)
        if key:
            gangs.setdefault(key, []).append(pod["spec"]["nodeName"])
    assert len(gangs) == 3
    for nodes in gangs.values():
        assert len(nodes) == 2 and len(set(nodes)) == 2, f"a gang shares a node: {nodes}"
        assert all(n.startswith("h100-") for n in nodes)
    claims = workload.list("resourceclaims.resource.k8s.io", TEAM)
    assert len(claims) == 9 and all((c.get("status") or {}).get("allocation") for c in claims)

    # The agent's histograms, relayed to the control plane, hold what kube-scheduler
    # allocated: 12 GPUs of the H100 pool, 3 of the L40S pool (routers may land there).
    def histograms_hold_the_allocations() -> bool:
        status = (control.get("inferencecluster", CLUSTER) or {}).get("status") or {}
        published = {p["name"]: p.get("nodesByFreeDevices") for p in status.get("gpuPools") or []}
        expected = {p.name: fleet.expected_histogram(workload, p) for p in POOLS}
        assert published == expected, f"published {published}, allocations say {expected}"
        return True

    eventually(
        histograms_hold_the_allocations,
        "InferenceCluster.status.gpuPools equal to the workload cluster's allocations",
        timeout=120,
    )

    for name in replicas:
        eventually(
            lambda n=name: _true(control, "modelreplica", n, "PodsScheduled", TEAM),
            f"ModelReplica {name} PodsScheduled=True",
            timeout=120,
        )
    eventually(
        lambda: (
            ((control.get("modeldeployment", DEPLOYMENT, TEAM) or {}).get("status") or {})
            .get("replicas", {})
            .get("scheduled")
            == 3
        ),
        "ModelDeployment status.replicas.scheduled = 3",
        timeout=120,
    )


def _wait_ready(control: Kube, timeout: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(control.kubectl_path), f"--kubeconfig={control.kubeconfig}", "wait",
         "--for=condition=Ready", f"modeldeployment/{DEPLOYMENT}", "-n", TEAM,
         f"--timeout={timeout}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def _deployment_ready(control: Kube, status: str, ready: str) -> dict:
    deployment = control.get("modeldeployment", DEPLOYMENT, TEAM) or {}
    c = condition(deployment, "Ready")
    counts = (deployment.get("status") or {}).get("ready")
    assert c and c["status"] == status and counts == ready, f"Ready {c}, ready {counts}"
    return c


def test_d_kubectl_wait_ready_on_the_deployment(planes):
    """kwok runs every pod, the Deployments become Available and LWS's controller
    reports its groups ready, so each replica's workloads are ready and so is the
    deployment: `kubectl wait --for=condition=Ready` returns, and the deployment
    comes to rest at Ready with READY 3/3.

    Comes to rest, not "reads at once": Crossplane v2.3.4 can write an XR status
    computed from a cached copy older than its own last write, so for a
    moment after Ready the deployment (or a replica) may read an earlier
    status; the next reconcile, at the latest the function's TTL, puts it
    back (design/reconcile.md, "Stale status writes")."""
    control, _ = planes
    done = _wait_ready(control, "240s")
    ready = condition(control.get("modeldeployment", DEPLOYMENT, TEAM), "Ready")
    assert done.returncode == 0, f"not Ready: {done.stdout} {done.stderr} {ready}"
    eventually(
        lambda: _deployment_ready(control, "True", "3/3"),
        "ModelDeployment Ready=True with READY 3/3",
        timeout=60,
    )


def test_d_running_replicas_are_labelled_counted_once_the_agent_observes_their_pods(planes):
    """Each replica was composed `modelplane.ai/charge=pending`; once its pods are bound
    and the agent's next report contains them, its deployment relabels it `counted`, so
    admission on this cluster stops reading it (design/admission.md, "What admission
    reads")."""
    control, _ = planes

    def all_counted() -> dict[str, str]:
        found = {
            name: r["metadata"].get("labels", {}).get("modelplane.ai/charge", "")
            for name, r in _replicas(control).items()
        }
        assert len(found) == 3 and set(found.values()) == {"counted"}, found
        return found

    eventually(all_counted, "every running replica labelled modelplane.ai/charge=counted")


XR_KINDS = ("inferencecluster", "modelreplica", "modeldeployment")


def _get(control: Kube, *args: str) -> str:
    """`kubectl get` with its own discovery cache: shortNames and categories come from
    discovery, which a cache filled before the XRDs existed would not know yet."""
    with tempfile.TemporaryDirectory(prefix="modelplane-kubectl-cache-") as cache:
        return control.kubectl("get", f"--cache-dir={cache}", *args)


def _table(text: str) -> list[dict[str, str]]:
    """kubectl's table output as rows keyed by header (no cell here contains spaces)."""
    header, *rows = text.splitlines()
    names = header.split()
    return [dict(zip(names, row.split(), strict=True)) for row in rows]


def test_d_kubectl_get_prints_each_levels_reason_for_the_ready_deployment(planes):
    """The printer columns as the real API server evaluates them: the deployment's
    counts and ReplicasScheduled reason, each replica's admission, pods and workloads."""
    control, _ = planes
    (row,) = _table(_get(control, "mdep", DEPLOYMENT, "-n", TEAM))
    assert row["SCHEDULED"] == "3/3" and row["READY-REPLICAS"] == "3/3", row
    assert row["REASON"] == "AllReplicasScheduled" and row["READY"] == "True", row
    replicas = _table(_get(control, "mrep", "-n", TEAM))
    assert len(replicas) == 3, replicas
    for r in replicas:
        assert (r["CLUSTER"], r["ADMITTED"], r["SCHEDULED"]) == (
            CLUSTER, "Admitted", "AllPodsScheduled"
        ), r  # fmt: skip
        assert r["WORKLOADS"] == "AllWorkloadsReady", r
    (cluster,) = _table(_get(control, "ic", CLUSTER))
    assert (cluster["OBSERVED"], cluster["REASON"]) == ("2/2", "AllPoolsObserved"), cluster
    kinds = {line.split("/")[0] for line in _get(control, "modelplane", "-A", "-o", "name").split()}
    assert kinds == {f"{k}.modelplane.ai" for k in XR_KINDS}, kinds


def _trace(control: Kube, *args: str) -> str:
    done = subprocess.run(
        [str(binary("crossplane")), "resource", "trace", "modeldeployment", DEPLOYMENT,
         "-n", TEAM, *args],
        env={**os.environ, "KUBECONFIG": str(control.kubeconfig)},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _reasons(node: dict) -> dict[str, str]:
    return {c["type"]: c["reason"] for c in node["object"].get("status", {}).get("conditions", [])}


def test_d_crossplane_trace_walks_every_level_and_carries_each_reason(planes):
    """`crossplane resource trace` (CLI v2.5.0's name for `beta trace`): its STATUS
    column reads only Ready and Synced, which a function cannot word (design/api.md,
    "What kubectl get shows"), so the tree names every level and its JSON carries
    each level's own conditions."""
    control, _ = planes
    tree = _trace(control)
    names = set(_replicas(control))
    assert all(f"ModelReplica/{n}" in tree for n in names), tree
    root = json.loads(_trace(control, "-o", "json"))
    assert _reasons(root)["ReplicasScheduled"] == "AllReplicasScheduled", _reasons(root)
    by_kind: dict[str, dict[str, dict]] = {}
    for child in root.get("children", []):
        obj = child["object"]
        by_kind.setdefault(obj["kind"], {})[obj["metadata"]["name"]] = child
    # Its replicas, and the workload Namespace it composes once per cluster they run on.
    assert set(by_kind) == {"ModelReplica", "Object"}, set(by_kind)
    children = by_kind["ModelReplica"]
    assert set(children) == names, set(children)
    (namespace,) = by_kind["Object"].values()
    manifest = namespace["object"]["spec"]["forProvider"]["manifest"]
    assert (manifest["kind"], manifest["metadata"]["name"]) == ("Namespace", TEAM), manifest
    for child in children.values():
        reasons = _reasons(child)
        assert (
            reasons["Admitted"] == "Admitted" and reasons["WorkloadsReady"] == "AllWorkloadsReady"
        ), reasons
        assert child.get("children"), f"{child['object']['metadata']['name']} has no composed level"
        for grandchild in child["children"]:
            assert "Ready" in _reasons(grandchild) or "Synced" in _reasons(grandchild), grandchild


def test_d_a_pod_turned_not_ready_makes_the_deployment_not_ready_until_it_recovers(planes):
    """A router pod's readiness probe fails (its Ready condition written False, as its
    kubelet would): that replica's workloads are not ready, so neither is the
    deployment; ready again, the deployment is Ready again."""
    control, workload = planes
    standalone = sorted(
        n for n, p in _pods(workload).items() if lws.GROUP_KEY not in p["metadata"]["labels"]
    )
    assert len(standalone) == 3, standalone
    kwok.set_pod_ready(workload, standalone[0], TEAM, ready=False)
    try:
        eventually(
            lambda: _deployment_ready(control, "False", "2/3"),
            f"the deployment not Ready while {standalone[0]} is not ready",
            timeout=120,
        )
    finally:
        kwok.set_pod_ready(workload, standalone[0], TEAM, ready=True)
    eventually(
        lambda: _deployment_ready(control, "True", "3/3"),
        f"the deployment Ready again once {standalone[0]} is ready",
        timeout=120,
    )


def test_d_a_deleted_gang_worker_is_recreated_by_lws_and_its_replica_recovers(planes):
    """A gang's worker pod deleted (a node drained, a pod evicted): LWS's controller
    brings the group back, kube-scheduler binds it again on two distinct H100 nodes,
    and the replica's PodsScheduled and the deployment's Ready return."""
    control, workload = planes
    workers = sorted(
        (n, p["metadata"]["uid"])
        for n, p in _pods(workload).items()
        if p["metadata"]["labels"].get("leaderworkerset.sigs.k8s.io/worker-index") == "1"
    )
    assert len(workers) == 3, workers
    name, uid = workers[0]
    workload.kubectl("delete", "pod", name, "-n", TEAM, "--wait=true", "--timeout=60s")

    def regrouped() -> bool:
        pods = _pods(workload)
        assert pods.get(name, {}).get("metadata", {}).get("uid") not in (None, uid), (
            f"{name} not recreated yet"
        )
        key = pods[name]["metadata"]["labels"][lws.GROUP_KEY]
        gang = [p for p in pods.values() if p["metadata"]["labels"].get(lws.GROUP_KEY) == key]
        nodes = [p["spec"].get("nodeName") for p in gang]
        assert len(gang) == 2 and all(nodes) and len(set(nodes)) == 2, f"gang on {nodes}"
        return True

    eventually(regrouped, f"{name} recreated by LWS and its gang bound again", timeout=180)
    for replica in _replicas(control):
        eventually(
            lambda n=replica: _true(control, "modelreplica", n, "PodsScheduled", TEAM),
            f"ModelReplica {replica} PodsScheduled=True",
            timeout=120,
        )
    eventually(
        lambda: _deployment_ready(control, "True", "3/3"),
        "the deployment Ready again once the gang is back",
        timeout=180,
    )


def _workload_uids(workload: Kube) -> dict[str, str]:
    kinds = ["deployments", f"leaderworkersets.{lws.GROUP}", "pods"]
    return {
        f"{kind}/{o['metadata']['name']}": o["metadata"]["uid"]
        for kind in kinds
        for o in workload.list(kind, TEAM)
    }


def test_e_scaling_to_two_removes_one_replica_and_only_its_workloads(planes):
    control, workload = planes
    before = _replicas(control)
    uids_before = _workload_uids(workload)
    # Through the scale subresource, as `kubectl scale` and autoscalers do.
    control.kubectl("scale", f"modeldeployment/{DEPLOYMENT}", "--replicas=2", "-n", TEAM)
    scale = json.loads(
        control.kubectl(
            "get",
            "--raw",
            f"/apis/modelplane.ai/v1alpha1/namespaces/{TEAM}/modeldeployments/{DEPLOYMENT}/scale",
        )
    )
    assert scale["spec"]["replicas"] == 2, scale

    after = eventually(
        lambda: len(found := _replicas(control)) == 2 and found, "2 ModelReplicas", timeout=120
    )
    (gone,) = set(before) - set(after)
    assert {n: r["metadata"]["uid"] for n, r in after.items()} == {
        n: before[n]["metadata"]["uid"] for n in after
    }

    def collected() -> dict[str, str]:
        uids = _workload_uids(workload)
        leftovers = [k for k in uids if gone in k]
        assert not leftovers, f"still there: {leftovers}"
        return uids

    uids_after = eventually(
        collected, f"{gone}'s workloads and pods garbage-collected", timeout=180
    )
    assert uids_after == {k: v for k, v in uids_before.items() if gone not in k}
    assert len([k for k in uids_after if k.startswith("pods/")]) == 2 * PODS_PER_REPLICA


def test_f_a_malformed_selector_keeps_running_replicas_and_names_the_defect(planes):
    control, workload = planes
    replicas = {n: r["metadata"]["uid"] for n, r in _replicas(control).items()}
    uids = _workload_uids(workload)
    path = (
        "/spec/template/spec/engines/0/members/0/nodeSelector/devices/0/selectors/0/cel/expression"
    )
    bad = 'device.driver == "gpu.nvidia.com" &&'
    control.patch(
        "modeldeployment", DEPLOYMENT, [{"op": "replace", "path": path, "value": bad}],
        namespace=TEAM, kind_of_patch="json",
    )  # fmt: skip

    def reported() -> dict:
        deployment = control.get("modeldeployment", DEPLOYMENT, TEAM)
        defects = [
            c for c in (deployment.get("status") or {}).get("conditions") or []
            if c.get("reason") == "InvalidSelector"
        ]  # fmt: skip
        assert defects, f"conditions: {(deployment.get('status') or {}).get('conditions')}"
        return defects[0]

    defect = eventually(reported, "a condition with reason InvalidSelector", timeout=120)
    assert defect["status"] == "False"
    assert "router" in defect["message"], defect["message"]
    time.sleep(10)  # a few reconciles of everything involved
    assert {n: r["metadata"]["uid"] for n, r in _replicas(control).items()} == replicas
    assert _workload_uids(workload) == uids
    assert all(p["spec"].get("nodeName") for p in _pods(workload).values())

    control.patch(
        "modeldeployment", DEPLOYMENT, [{"op": "replace", "path": path, "value": BIG_ENOUGH}],
        namespace=TEAM, kind_of_patch="json",
    )  # fmt: skip
    eventually(
        lambda: (
            not any(
                c.get("reason") == "InvalidSelector"
                for c in (control.get("modeldeployment", DEPLOYMENT, TEAM).get("status") or {}).get(
                    "conditions"
                )
                or []
            )
        ),
        "the InvalidSelector condition cleared once the selector is fixed",
        timeout=120,
    )


def test_g_an_agent_stopped_for_longer_than_max_age_falls_back_without_deleting_work(
    e2e_stack, planes
):
    """The agent stops (a crash, an eviction): its last reports stay; once older than
    maxAge the pools fall back to whole-node accounting and nothing running is deleted.
    Started again, it reports within seconds and the pools are observed again."""
    control, workload = planes
    running = e2e_stack.agent
    assert running
    replicas = {n: r["metadata"]["uid"] for n, r in _replicas(control).items()}
    uids = _workload_uids(workload)
    stopped = running.stop()
    try:
        assert stopped == 0, "the agent exits 0 on SIGTERM"
        _stopped_agent_falls_back(control, workload, replicas, uids)
    finally:
        running.start()  # also when the step failed: later modules need the agent

    def observed_again() -> dict:
        c = condition(control.get("inferencecluster", CLUSTER), "CapacityObserved")
        assert c and (c["status"], c["reason"]) == ("True", "AllPoolsObserved"), c
        return c

    eventually(observed_again, "CapacityObserved=True once the agent reports again")
    for name in replicas:
        eventually(
            lambda n=name: _true(control, "modelreplica", n, "PodsScheduled", TEAM),
            f"ModelReplica {name} PodsScheduled=True again",
        )


def _stopped_agent_falls_back(
    control: Kube, workload: Kube, replicas: dict[str, str], uids: dict[str, str]
) -> None:
    last = {
        p.name: workload.get("poolobservations.agent.modelplane.ai", p.name)["status"]
        for p in POOLS
    }

    def fell_back() -> dict:
        c = condition(control.get("inferencecluster", CLUSTER), "CapacityObserved")
        assert c and (c["status"], c["reason"]) == ("False", "NoPoolObserved"), c
        return c

    observed = eventually(
        fell_back,
        f"CapacityObserved=False/NoPoolObserved once the last reports are {agent.MAX_AGE} old",
        timeout=180,
    )
    assert "h100" in observed["message"] and "l40s" in observed["message"], observed["message"]
    pools = {p["name"]: p for p in control.get("inferencecluster", CLUSTER)["status"]["gpuPools"]}
    # Still published: what the agent last said (first seen no later than its last
    # report), judged not current.
    for name, said in last.items():
        published = pools[name]
        assert published["current"] is False, published
        assert published["observedNodes"] == said["observedNodes"], (published, said)
        assert parse_time(published["observedAt"]) <= parse_time(said["observedAt"])
    time.sleep(15)
    assert {n: r["metadata"]["uid"] for n, r in _replicas(control).items()} == replicas
    assert _workload_uids(workload) == uids
    counted = Counter(bool(p["spec"].get("nodeName")) for p in _pods(workload).values())
    assert counted == {True: 2 * PODS_PER_REPLICA}
