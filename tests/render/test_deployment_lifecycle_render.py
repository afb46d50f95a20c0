"""A deployment's life after its first placement, through the real CLI.

The first render places the replicas; its composed ModelReplicas, given a
status as compose-model-replica would publish it, become the observed
resources of the next render. That is exactly what Crossplane feeds the
function on its next reconcile.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import yaml
from modelplane_devtools import render
from modelplane_testkit.rendered import by_kind, composite, condition, results

FLEET_CLUSTERS = render.ROOT / "examples/fleet/clusters.yaml"
FLEET_REPLICAS = render.ROOT / "examples/fleet/replicas.yaml"
COMPOSITION = render.ROOT / "apis/modeldeployment/composition.yaml"


def stamp(minutes_ago: float) -> str:
    moment = datetime.now(UTC) - timedelta(minutes=minutes_ago)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def deployment() -> dict:
    return yaml.safe_load(
        (render.ROOT / "examples/deployments/single-gpu-throughput.yaml").read_text()
    )


def observed(replica: dict, status: str, reason: str, since_minutes: float) -> dict:
    """A composed replica as Crossplane observes it once compose-model-replica reported."""
    body = copy.deepcopy(replica)
    body["metadata"].pop("ownerReferences", None)
    body["status"] = {
        "pods": {"expected": 1, "observed": 1, "scheduled": 1 if status == "True" else 0},
        "conditions": [
            {
                "type": "PodsScheduled",
                "status": status,
                "reason": reason,
                "message": "the cluster scheduler: 0/4 nodes are available"
                if status == "False"
                else "",
                "lastTransitionTime": stamp(since_minutes),
            },
            {
                "type": "Ready",
                "status": status,
                "reason": "Available" if status == "True" else "Creating",
                "lastTransitionTime": stamp(since_minutes),
            },
        ],
    }
    if status == "True":
        body["status"]["scheduledAt"] = stamp(since_minutes)
    return body


def first_placement(functions) -> list[dict]:
    rendered = functions.render(
        deployment(), COMPOSITION, required=[FLEET_CLUSTERS, FLEET_REPLICAS]
    )
    replicas = by_kind(rendered, "ModelReplica")
    assert len(replicas) == 6
    return replicas


def test_a_steady_deployment_keeps_every_replica_where_it_is(functions):
    placed = first_placement(functions)
    healthy = [observed(r, "True", "AllPodsScheduled", 5) for r in placed]
    rendered = functions.render(
        deployment(), COMPOSITION, observed=healthy, required=[FLEET_CLUSTERS, FLEET_REPLICAS]
    )
    again = {r["metadata"]["name"]: r["spec"] for r in by_kind(rendered, "ModelReplica")}
    assert again == {r["metadata"]["name"]: r["spec"] for r in placed}
    xr = composite(rendered)
    assert xr["status"]["replicas"] == {"desired": 6, "scheduled": 6, "ready": 6}
    assert condition(xr, "ReplicasReady")["status"] == "True"
    assert not [r for r in results(rendered) if "placed replica" in r["message"]]


def test_an_unschedulable_replica_past_its_grace_moves_and_its_pool_is_remembered(functions):
    placed = first_placement(functions)
    stuck_name = "llama-8b-0"
    states = [
        observed(r, "False", "Unschedulable", 10)
        if r["metadata"]["name"] == stuck_name
        else observed(r, "True", "AllPodsScheduled", 10)
        for r in placed
    ]
    stuck = next(r for r in placed if r["metadata"]["name"] == stuck_name)
    stuck_cluster = stuck["spec"]["clusterName"]
    stuck_pool = stuck["spec"]["engines"][0]["members"][0]["nodePoolName"]
    # placed-at must predate the Unschedulable condition for it to count.
    for state in states:
        state["metadata"]["annotations"]["modelplane.ai/placed-at"] = stamp(15)

    rendered = functions.render(
        deployment(), COMPOSITION, observed=states, required=[FLEET_CLUSTERS, FLEET_REPLICAS]
    )
    replicas = {r["metadata"]["name"]: r for r in by_kind(rendered, "ModelReplica")}
    moved = replicas[stuck_name]["spec"]
    assert (moved["clusterName"], moved["engines"][0]["members"][0]["nodePoolName"]) != (
        stuck_cluster,
        stuck_pool,
    )
    for name, replica in replicas.items():
        if name != stuck_name:
            before = next(r for r in placed if r["metadata"]["name"] == name)
            assert replica["spec"] == before["spec"], f"healthy {name} must not move"
    (memory,) = composite(rendered)["status"]["failedPlacements"]
    assert (memory["cluster"], memory["pool"]) == (stuck_cluster, stuck_pool)
    assert memory["expiresAt"] > stamp(0)
    assert any(
        r.get("severity") == "Warning" and stuck_name in r["message"] for r in results(rendered)
    )


def test_an_unschedulable_replica_within_its_grace_stays(functions):
    placed = first_placement(functions)
    states = [
        observed(r, "False", "Unschedulable", 0.5)
        if r["metadata"]["name"] == "llama-8b-0"
        else observed(r, "True", "AllPodsScheduled", 10)
        for r in placed
    ]
    rendered = functions.render(
        deployment(), COMPOSITION, observed=states, required=[FLEET_CLUSTERS, FLEET_REPLICAS]
    )
    again = {r["metadata"]["name"]: r["spec"] for r in by_kind(rendered, "ModelReplica")}
    assert again == {r["metadata"]["name"]: r["spec"] for r in placed}
    assert composite(rendered)["status"]["failedPlacements"] == []


def test_no_matching_cluster_keeps_running_replicas_and_says_why(functions):
    placed = first_placement(functions)
    healthy = [observed(r, "True", "AllPodsScheduled", 5) for r in placed]
    xr = deployment()
    xr["spec"]["template"]["spec"]["clusterSelector"] = {
        "matchLabels": {"modelplane.ai/tier": "gone"}
    }
    rendered = functions.render(
        xr, COMPOSITION, observed=healthy, required=[FLEET_CLUSTERS, FLEET_REPLICAS]
    )
    kept = {r["metadata"]["name"]: r["spec"] for r in by_kind(rendered, "ModelReplica")}
    assert kept == {r["metadata"]["name"]: r["spec"] for r in placed}
    scheduled = condition(composite(rendered), "ReplicasScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "NoClusters")


def test_scaling_down_removes_the_highest_indices_from_the_most_packed_cluster(functions):
    placed = first_placement(functions)
    healthy = [observed(r, "True", "AllPodsScheduled", 5) for r in placed]
    xr = deployment()
    xr["spec"]["replicas"] = 4
    rendered = functions.render(
        xr, COMPOSITION, observed=healthy, required=[FLEET_CLUSTERS, FLEET_REPLICAS]
    )
    kept = {
        r["metadata"]["name"]: r["spec"]["clusterName"] for r in by_kind(rendered, "ModelReplica")
    }
    # Three on each cluster: the tie goes to the highest index, one per cluster.
    assert sorted(kept) == ["llama-8b-0", "llama-8b-1", "llama-8b-2", "llama-8b-3"]
    assert sorted(kept.values()) == ["gpu-east", "gpu-east", "gpu-west", "gpu-west"]


# --- a cluster that vanishes (design/scheduler.md) ---------------------------------------


def fleet_without(*names: str, spare: bool = False) -> list[dict]:
    """The example fleet's clusters without some; `spare` adds another production cluster."""
    clusters = [c for c in render.load_all(FLEET_CLUSTERS.read_text())]
    kept = [c for c in clusters if c["metadata"]["name"] not in names]
    if spare:
        lab = copy.deepcopy(next(c for c in clusters if c["metadata"]["name"] == "gpu-lab"))
        lab["metadata"]["name"] = "gpu-spare"
        lab["metadata"]["labels"]["modelplane.ai/tier"] = "production"
        kept.append(lab)
    return kept


def fleet_replicas() -> list[dict]:
    return render.load_all(FLEET_REPLICAS.read_text())


def steady_replicas(functions) -> list[dict]:
    return [observed(r, "True", "AllPodsScheduled", 30) for r in first_placement(functions)]


def specs(rendered: list[dict]) -> dict[str, dict]:
    return {r["metadata"]["name"]: r["spec"] for r in by_kind(rendered, "ModelReplica")}


def test_replicas_on_a_vanished_cluster_stay_within_the_grace_period(functions):
    healthy = steady_replicas(functions)
    before = {r["metadata"]["name"]: r["spec"] for r in healthy}
    rendered = functions.render(
        deployment(),
        COMPOSITION,
        observed=healthy,
        required=[*fleet_without("gpu-west"), *fleet_replicas()],
    )
    assert specs(rendered) == before, "nothing moves within the grace period"
    xr = composite(rendered)
    scheduled = condition(xr, "ReplicasScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "ClusterUnavailable")
    assert "InferenceCluster gpu-west is missing" in scheduled["message"]
    on_west = sum(1 for s in before.values() if s["clusterName"] == "gpu-west")
    assert xr["status"]["replicas"]["scheduled"] == 6 - on_west
    (memory,) = xr["status"]["missingClusters"]
    assert memory["name"] == "gpu-west" and memory["since"] >= stamp(1)


def test_replicas_on_a_cluster_missing_past_the_grace_period_move(functions):
    healthy = steady_replicas(functions)
    before = {r["metadata"]["name"]: r["spec"] for r in healthy}
    xr = deployment()
    xr["status"] = {"missingClusters": [{"name": "gpu-west", "since": stamp(6)}]}
    rendered = functions.render(
        xr, COMPOSITION, observed=healthy, required=[*fleet_without("gpu-west"), *fleet_replicas()]
    )
    after = specs(rendered)
    assert after.keys() == before.keys()
    for name, spec in before.items():
        if spec["clusterName"] == "gpu-east":
            assert after[name] == spec, f"{name} on a present cluster must not move"
        else:
            assert after[name]["clusterName"] == "gpu-east", f"{name} must leave gpu-west"
    assert any("moved replica" in r["message"] for r in results(rendered))


def test_nothing_moves_when_every_cluster_the_deployment_uses_vanishes(functions):
    healthy = steady_replicas(functions)
    before = {r["metadata"]["name"]: r["spec"] for r in healthy}
    xr = deployment()
    # Long past the grace period, and another production cluster is there to take them.
    xr["status"] = {
        "missingClusters": [
            {"name": "gpu-east", "since": stamp(60)},
            {"name": "gpu-west", "since": stamp(60)},
        ]
    }
    rendered = functions.render(
        xr,
        COMPOSITION,
        observed=healthy,
        required=[*fleet_without("gpu-east", "gpu-west", spare=True), *fleet_replicas()],
    )
    assert specs(rendered) == before
    scheduled = condition(composite(rendered), "ReplicasScheduled")
    assert scheduled["reason"] == "ClusterUnavailable"
    assert "every InferenceCluster this deployment runs on is missing" in scheduled["message"]


# --- steady mode (design/scheduler.md, "Steady mode") --------------------------------------


STEP = 'Pipeline step "compose": '


def ours(found: dict | None) -> dict:
    """A composed resource's labels without those Crossplane adds (crossplane.io/...)."""
    return {k: v for k, v in (found or {}).items() if not k.startswith("crossplane.io/")}


def fleet_pass(xr: dict, healthy: list[dict], clusters: list[dict] | None = None) -> dict:
    """The function's answer in process with the whole fleet fetched (every
    ModelReplica, t.request): what every reconcile of a steady deployment computed
    before steady mode and the charge label."""
    import compose_model_deployment as scheduler
    from modelplane_testkit import deployment_builders as t
    from modelplane_testkit import wire

    fetched = {
        path: render.load_all(render.fill_time_tokens(path.read_text()))
        for path in (FLEET_CLUSTERS, FLEET_REPLICAS)
    }
    own = {
        r["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: r for r in healthy
    }
    rsp = scheduler.run_function(
        t.request(
            xr,
            fetched[FLEET_CLUSTERS] if clusters is None else clusters,
            fetched[FLEET_REPLICAS],
            own,
            namespaces=[],
            quotas=[],
        ),
        datetime.now(UTC),
        scheduler.default_matcher(),
    )
    desired = wire.desired(rsp).values()
    return {
        "replicas": {
            d["metadata"]["name"]: (d["spec"], ours(d["metadata"].get("labels")))
            for d in desired
            if d["kind"] == "ModelReplica"
        },
        # The workload Namespace on each cluster the replicas run on (namespaces.py).
        "namespaces": {d["metadata"]["name"]: d["spec"] for d in desired if d["kind"] == "Object"},
        "status": {k: v for k, v in wire.desired_status(rsp).items() if k != "conditions"},
        "conditions": {c: (s, r, m) for c, (s, r, m) in wire.conditions(rsp).items()},
        "events": sorted(m for _, m in wire.events(rsp)),
    }


def test_a_steady_deployment_rendered_with_the_fleet_gives_what_a_fleet_pass_gives(functions):
    # Crossplane's requirement loop runs inside the render: the function asks for the two
    # clusters its replicas run on by name, plans on them and stops there.
    healthy = [observed(r, "True", "AllPodsScheduled", 5) for r in first_placement(functions)]
    rendered = functions.render(
        deployment(), COMPOSITION, observed=healthy, required=[FLEET_CLUSTERS, FLEET_REPLICAS]
    )
    xr = composite(rendered)
    got = {
        "replicas": {
            r["metadata"]["name"]: (r["spec"], ours(r["metadata"].get("labels")))
            for r in by_kind(rendered, "ModelReplica")
        },
        "namespaces": {o["metadata"]["name"]: o["spec"] for o in by_kind(rendered, "Object")},
        "status": {k: v for k, v in xr["status"].items() if k != "conditions"},
        "conditions": {
            c["type"]: (c["status"], c["reason"], c.get("message", ""))
            for c in xr["status"]["conditions"]
            if c["type"] in ("ReplicasScheduled", "ReplicasReady", "InputsValid", "PodsCreated")
        },
        # The function's events, as Crossplane prefixes them; not Crossplane's own.
        "events": sorted(
            r["message"].removeprefix(STEP)
            for r in results(rendered)
            if r["message"].startswith(STEP)
        ),
    }
    assert got == fleet_pass(deployment(), healthy)
    assert len(got["namespaces"]) == len({r["spec"]["clusterName"] for r in healthy})


def test_a_steady_render_reads_only_its_clusters_so_an_invalid_other_one_goes_unnoticed(
    functions,
):
    # The one deliberate difference between the modes, and so the proof that the render
    # ran in steady mode: a selected InferenceCluster no replica runs on, with an invalid
    # spec, is an input problem of a fleet pass and unseen by a steady one.
    invalid = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "gpu-broken", "labels": {"modelplane.ai/tier": "production"}},
        "spec": {"nodePools": [{"name": "p", "nodeCount": -1, "devices": []}]},
    }
    fleet = [*render.load_all(FLEET_CLUSTERS.read_text()), invalid]
    healthy = [observed(r, "True", "AllPodsScheduled", 5) for r in first_placement(functions)]
    rendered = functions.render(
        deployment(), COMPOSITION, observed=healthy, required=[*fleet, *fleet_replicas()]
    )
    assert "gpu-broken" in fleet_pass(deployment(), healthy, fleet)["conditions"]["InputsValid"][2]
    inputs = condition(composite(rendered), "InputsValid")
    assert "gpu-broken" not in inputs.get("message", "")
    assert not [r for r in results(rendered) if "gpu-broken" in r["message"]]
    assert condition(composite(rendered), "ReplicasScheduled")["reason"] == "AllReplicasScheduled"
