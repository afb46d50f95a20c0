"""Properties of deployment placement on random fleets (hypothesis).

- The same input in any order gives the same plan.
- Replaying every charge and placement on an explicit per-node model of the
  published histograms never finds a node short of devices (no over-promise).
- The pods of one gang copy always land on distinct nodes (same replay).
- A healthy replica never moves.
- A pool counted by devices (fallback DeviceCount, no fresh observation)
  never gets more devices placed on it than it declares, and no gang copy
  with more pods than it has nodes. Pools are counted by devices at random,
  so every property above also holds with them in the fleet (they keep no
  per-node trace, so the replay checks only the other pools).
- Steady mode changes nothing: the response Crossplane applies after the
  requirement loop (a footprint plan it accepted, or a fleet pass it
  escalated to) is the response one pass on the whole fleet gives.
"""

from __future__ import annotations

import copy
from collections import Counter
from datetime import timedelta

import compose_model_deployment as scheduler
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from modelplane_common.capacity.fit import fits
from modelplane_common.timeutil import format_time
from modelplane_testkit import deployment_builders as t
from modelplane_testkit import wire
from modelplane_testkit.wire import desired

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


MIXED = {"kinds": ("fresh", "fresh", "stale", "none"), "fallbacks": (None, None, "DeviceCount")}
# Every pool unobserved and counted by devices: the fleet the device-count property needs.
BY_DEVICES = {"kinds": ("stale", "none"), "fallbacks": ("DeviceCount",)}


@st.composite
def pools(draw, cluster: str, index: int, mix: dict):
    name = f"p{index}"
    per_node = draw(st.sampled_from([4, 8]))
    with_nic = draw(st.booleans())
    devices = [t.device("gpu", per_node)] + ([t.device("nic", 2)] if with_nic else [])
    nodes = draw(st.integers(0, 8))
    kind = draw(st.sampled_from(mix["kinds"]))
    fallback = draw(st.sampled_from(mix["fallbacks"]))
    entry = {
        "name": name,
        "per_node": per_node,
        "with_nic": with_nic,
        "nodes": nodes,
        "kind": kind,
        "histogram": [],
        "by_devices": fallback == "DeviceCount" and kind != "fresh",
    }
    if kind == "none":
        return t.pool(name, nodes, devices, fallback=fallback), entry
    observed_nodes = draw(st.integers(0, nodes + 1))
    schedulable = draw(st.integers(0, observed_nodes))
    histogram = []
    for _ in range(schedulable):
        free = {"gpu": draw(st.integers(0, per_node))}
        if with_nic:
            free["nic"] = draw(st.integers(0, 2))
        histogram.append((free, 1))
    entry.update(observed_nodes=observed_nodes, histogram=histogram)
    observed_at = t.ago(1) if kind == "fresh" else t.ago(30)
    return t.pool(
        name,
        nodes,
        devices,
        histogram=histogram,
        observed_at=observed_at,
        observed_nodes=observed_nodes,
        fallback=fallback,
    ), entry


@st.composite
def fleets(draw, mix: dict):
    clusters, described = [], {}
    for c in range(draw(st.integers(1, 3))):
        name = f"c{c}"
        built = [draw(pools(name, i, mix)) for i in range(draw(st.integers(1, 2)))]
        taints = draw(
            st.sampled_from(
                [
                    [],
                    [{"key": "k", "value": "v", "effect": "NoSchedule"}],
                    [{"key": "x", "value": "y", "effect": "NoExecute"}],
                ]
            )
        )
        clusters.append(
            t.cluster(
                name,
                [b[0] for b in built],
                taints=taints,
                ready=draw(st.booleans()) or draw(st.booleans()),
            )
        )
        described[name] = {"pools": {b[1]["name"]: b[1] for b in built}, "taints": taints}
    return clusters, described


@st.composite
def engines(draw):
    if draw(st.booleans()):
        return [t.standalone(gpus=draw(st.integers(0, 4)), copies=draw(st.integers(1, 3)))]
    return [
        t.gang(
            leader_gpus=draw(st.sampled_from([0, 0, 2, 4])),
            worker_gpus=draw(st.sampled_from([1, 2, 4])),
            workers=draw(st.integers(1, 3)),
            copies=draw(st.integers(1, 2)),
        )
    ]


def replica_engines(shape: dict, pool: str) -> list[dict]:
    engine = shape
    member = engine["members"]
    if len(member) == 1:
        gpus = (member[0].get("nodeSelector") or {"devices": [{"count": 0}]})["devices"][0]["count"]
        return [t.replica_engine(engine["name"], pool, gpus=gpus, copies=engine["copies"])]
    leader, worker = member

    def count(m):
        return (m.get("nodeSelector") or {"devices": [{"count": 0}]})["devices"][0]["count"]

    return [
        t.replica_engine(
            engine["name"],
            pool,
            role="Gang",
            gpus=count(worker),
            leader_gpus=count(leader),
            workers=worker["worker"]["nodes"],
            copies=engine["copies"],
        )
    ]


STATES = [
    ("True", "AllPodsScheduled", 30),
    ("True", "AllPodsScheduled", 0.1),
    ("False", "PodsPending", 1),
    ("False", "Unschedulable", 10),
    ("Unknown", "NotObserved", 1),
]


@st.composite
def scenarios(draw, mix: dict = MIXED):
    clusters, described = draw(fleets(mix))
    shape = draw(engines())
    xr = t.deployment(
        replicas=draw(st.integers(0, 5)),
        engines=shape,
        # Unset (the XRD's default, Spread), Spread written out, or Pack: every property
        # holds whichever rule "cluster order" ranks the clusters by.
        cluster_spreading=draw(st.sampled_from([None, "Spread", "Pack"])),
    )
    names = [*described, "gone"]
    own, others = {}, []
    for i in range(draw(st.integers(0, 4))):
        cluster = draw(st.sampled_from(names))
        pool = draw(st.sampled_from([*described.get(cluster, {"pools": {"p0": 0}})["pools"]]))
        status, reason, minutes = draw(st.sampled_from(STATES))
        own[f"replica-{i}"] = t.model_replica(
            f"llm-{i}",
            "team-a",
            cluster,
            replica_engines(shape[0], pool),
            deployment_name="llm",
            index=i,
            pods_scheduled=status,
            reason=reason,
            since=t.ago(minutes),
            scheduled_at=t.ago(minutes),
            placed_at=t.ago(60),
        )
    for i in range(draw(st.integers(0, 4))):
        cluster = draw(st.sampled_from(names))
        pool = draw(st.sampled_from([*described.get(cluster, {"pools": {"p0": 0}})["pools"]]))
        status, reason, minutes = draw(st.sampled_from(STATES))
        others.append(
            t.model_replica(
                f"other-{i}",
                draw(st.sampled_from(["team-a", "team-b"])),
                cluster,
                [
                    t.replica_engine(
                        "e", pool, gpus=draw(st.integers(0, 8)), copies=draw(st.integers(1, 2))
                    )
                ],
                # Composed by their own deployment, so labelled with their cluster.
                deployment_name=f"other-{i}",
                pods_scheduled=status,
                reason=reason,
                scheduled_at=t.ago(minutes),
            )
        )
    return xr, clusters, described, own, others


def initial_nodes(entry: dict) -> list[list[int]]:
    """An explicit per-node model of what the pool published.

    Independent of modelplane_common.capacity.pools, which it checks.
    """
    width = 2 if entry["with_nic"] else 1
    empty = [entry["per_node"], 2][:width]
    if entry["kind"] != "fresh":
        return [list(empty) for _ in range(entry["nodes"])]
    nodes = [
        [free.get("gpu", 0), free.get("nic", 0)][:width]
        for free, n in entry["histogram"]
        for _ in range(n)
    ]
    grow = max(0, entry["nodes"] - entry["observed_nodes"])
    return nodes + [list(empty) for _ in range(grow)]


@SETTINGS
@given(scenarios(), st.randoms(use_true_random=False))
def test_the_same_input_in_any_order_gives_the_same_plan(scenario, rnd):
    xr, clusters, _, own, others = scenario
    first = t.schedule(xr, clusters, own, others)
    shuffled_clusters, shuffled_others = list(clusters), list(others)
    rnd.shuffle(shuffled_clusters)
    rnd.shuffle(shuffled_others)
    keys = list(own)
    rnd.shuffle(keys)
    again = t.schedule(xr, shuffled_clusters, {k: own[k] for k in keys}, shuffled_others)
    assert again == first


def replay(plan, described) -> dict[tuple[str, str, int], list[int]]:
    """Replay every reservation on explicit nodes; return the node ids each gang took."""
    gangs: dict[tuple[str, str, int], list[int]] = {}
    for (cluster, pool), reservations in plan.reservations.items():
        nodes = initial_nodes(described[cluster]["pools"][pool])
        for r in reservations:
            taken = gangs.get((cluster, pool, r.gang), []) if r.gang is not None else []
            candidates = [
                i for i, free in enumerate(nodes) if tuple(free) == r.node and i not in taken
            ]
            assert candidates, f"{cluster}/{pool}: no node with free {r.node} left for {r}"
            node = candidates[0]
            assert fits(tuple(nodes[node]), r.demand), f"{cluster}/{pool}: over-promise {r}"
            nodes[node] = [f - d for f, d in zip(nodes[node], r.demand, strict=True)]
            if r.gang is not None:
                gangs.setdefault((cluster, pool, r.gang), []).append(node)
        assert all(f >= 0 for free in nodes for f in free)
    return gangs


@SETTINGS
@given(scenarios())
def test_placements_never_exceed_an_exact_per_node_replay(scenario):
    xr, clusters, described, own, others = scenario
    replay(t.schedule(xr, clusters, own, others), described)


@SETTINGS
@given(scenarios())
def test_gang_pods_always_land_on_distinct_nodes(scenario):
    xr, clusters, described, own, others = scenario
    plan = t.schedule(xr, clusters, own, others)
    shape = xr["spec"]["template"]["spec"]["engines"][0]
    for where, nodes in replay(plan, described).items():
        assert len(set(nodes)) == len(nodes), f"gang {where} shares a node: {nodes}"
        # Only this deployment's engines are gangs here: each copy is one leader + workers.
        assert len(nodes) == 1 + shape["members"][1]["worker"]["nodes"]


def healthy(obj: dict, described: dict, tolerated_no_execute: bool) -> bool:
    conditions = {c["type"]: c for c in obj["status"]["conditions"]}
    if conditions["PodsScheduled"]["reason"] == "Unschedulable":
        return False
    cluster = described.get(obj["spec"]["clusterName"])
    if cluster is None:
        return False
    if any(x["effect"] == "NoExecute" for x in cluster["taints"]) and not tolerated_no_execute:
        return False
    for engine in obj["spec"]["engines"]:
        for member in engine["members"]:
            pool = cluster["pools"].get(member["nodePoolName"])
            if pool is None:
                return False
            if any(r["count"] > pool["per_node"] for r in member.get("deviceRequests", ())):
                return False
    return True


@SETTINGS
@given(scenarios())
def test_a_healthy_replica_never_moves(scenario):
    xr, clusters, described, own, others = scenario
    plan = t.schedule(xr, clusters, own, others)
    by_name = {r.name: r for r in plan.replicas}
    removed = {r.name for r in plan.removed}
    for obj in own.values():
        if not healthy(obj, described, tolerated_no_execute=False):
            continue
        name = obj["metadata"]["name"]
        if name in removed:
            continue
        kept = by_name[name]
        assert kept.cluster == obj["spec"]["clusterName"]
        assert set(kept.pools) == {
            m["nodePoolName"] for e in obj["spec"]["engines"] for m in e["members"]
        }


@settings(max_examples=20, deadline=None)
@given(scenarios())
def test_a_plan_is_a_function_of_now(scenario):
    xr, clusters, _, own, others = scenario
    assert t.schedule(xr, clusters, own, others) == t.schedule(xr, clusters, own, others)
    later = t.schedule(xr, clusters, own, others, now=t.NOW + timedelta(seconds=1))
    for r in later.replicas:
        # A first placement is stamped with `now`; a move is dated from the view
        # (test_the_same_view_decided_later_moves_every_replica_the_same).
        if r.change.value == "Placed":
            assert format_time(r.placed_at) == format_time(t.NOW + timedelta(seconds=1))


# --- the same view at another time -----------------------------------------------------------


def _overcommitted(body: dict, decided_minutes: float) -> None:
    """Its cluster refused it for its current placement, `decided_minutes` ago."""
    placed = body["metadata"]["annotations"]["modelplane.ai/placed-at"]
    body["status"]["admission"] = {
        "placedAt": placed,
        "verdict": "Overcommitted",
        "decidedAt": t.ago(decided_minutes),
        "message": "engine e does not fit pool p0",
    }


def _pods_not_created(body: dict, since_minutes: float) -> None:
    """Its cluster refused its pods past missingPodsGracePeriod, since `since_minutes` ago."""
    body["status"]["conditions"].append(
        {
            "type": "PodsCreated",
            "status": "False",
            "reason": "NotCreated",
            "message": "the workload cluster refused its pods: quota exceeded",
            "lastTransitionTime": t.ago(since_minutes),
        }
    )


def _on_a_vanished_pool(body: dict) -> None:
    for engine in body["spec"]["engines"]:
        for member in engine["members"]:
            member["nodePoolName"] = "vanished"


@st.composite
def healing_views(draw):
    """A deployment whose replicas may have to move for every reason there is: the
    scenarios' pod states (Unschedulable past the grace among them), a verdict of
    Overcommitted (old enough that its pools are no longer avoided, or recent), pods
    not created, a pool gone, a cluster drained NoExecute, deleted ("gone"), or
    missing past the grace. Every failure fell due at least a minute before NOW, and
    no time in the view is within a minute of a threshold, so a later `now` up to a
    minute on sees the same failures, freshness and memories."""
    xr, clusters, _, own, others = draw(scenarios())
    if draw(st.booleans()):
        # Somewhere for a replica that must move to go: an empty, unobserved cluster.
        devices = [t.device("gpu", 8), t.device("nic", 2)]
        clusters = [*clusters, t.cluster("spare", [t.pool("p0", 8, devices)])]
    for body in own.values():
        cause = draw(st.sampled_from(["as drawn", "overcommitted", "not created", "pool gone"]))
        if cause == "overcommitted":
            _overcommitted(body, draw(st.sampled_from([3, 40])))
        elif cause == "not created":
            _pods_not_created(body, draw(st.sampled_from([2, 20])))
        elif cause == "pool gone":
            _on_a_vanished_pool(body)
    if draw(st.booleans()):
        used = sorted({b["spec"]["clusterName"] for b in own.values()} or {"gone"})
        since = t.ago(draw(st.sampled_from([2, 10])))
        xr["status"] = {"missingClusters": [{"name": draw(st.sampled_from(used)), "since": since}]}
    return xr, clusters, own, others


def placements(rsp: fnv1.RunFunctionResponse, own: dict) -> dict[str, tuple]:
    """Each existing replica's desired place: (cluster, pools, placed-at), by resource name."""
    out = {}
    for key, body in desired(rsp).items():
        if key not in own:
            continue  # a first placement is stamped with `now` (design/admission.md)
        pools = {m["nodePoolName"] for e in body["spec"]["engines"] for m in e["members"]}
        placed = body["metadata"].get("annotations", {}).get("modelplane.ai/placed-at")
        out[key] = (body["spec"]["clusterName"], sorted(pools), placed)
    return out


@SETTINGS
@given(healing_views(), st.integers(1, 59))
def test_the_same_view_decided_later_moves_every_replica_the_same(scenario, seconds):
    """Crossplane reconciles the same (possibly stale) view again: every healed, drained
    or moved replica gets the same cluster, pools and placed-at, whatever the clock says,
    so the second apply changes nothing."""
    xr, clusters, own, others = scenario
    req = t.request(xr, clusters, others, own)
    first = scheduler.run_function(req, t.NOW, t.stand_in_matcher)
    later = scheduler.run_function(req, t.NOW + timedelta(seconds=seconds), t.stand_in_matcher)
    before, after = placements(first, own), placements(later, own)
    for key, (cluster, _, placed) in before.items():
        was = own[key]
        if placed != was["metadata"]["annotations"].get("modelplane.ai/placed-at"):
            where = "another cluster" if cluster != was["spec"]["clusterName"] else "its cluster"
            event(f"a replica placed anew on {where}")
    assert after == before


def wire_pods(engines: list[dict]) -> list[int]:
    """The GPUs of each pod of a ModelReplica's engines, read from the wire here
    independently of the readers."""
    pods: list[int] = []
    for engine in engines:
        for _ in range(engine["copies"]):
            for member in engine["members"]:
                worker = member.get("worker", {}) if member["role"] == "Worker" else {}
                gpus = sum(r["count"] for r in member.get("deviceRequests", ()))
                pods.extend([gpus] * worker.get("nodes", 1))
    return pods


def planned_pods(replica) -> list[tuple[int, tuple | None]]:
    """(GPUs, gang copy or None) per pod of a planned replica; a gang copy is named by
    (replica, engine, copy) so that copies of different replicas stay apart."""
    pods: list[tuple[int, tuple | None]] = []
    for engine in replica.engines:
        for copy_index in range(engine.copies):
            gang = (replica.name, engine.name, copy_index) if engine.is_gang else None
            for member in engine.members:
                gpus = sum(r.count for r in member.requests)
                pods.extend([(gpus, gang)] * member.pods_per_copy)
    return pods


def pods_on(plan, others, cluster: str, pool: str) -> tuple[list[int], list]:
    """The GPUs of every pod already on the pool (other replicas, kept ones), and the
    pods this pass places there."""
    held = [
        gpus
        for o in others
        if o["spec"]["clusterName"] == cluster
        and o["spec"]["engines"][0]["members"][0]["nodePoolName"] == pool
        for gpus in wire_pods(o["spec"]["engines"])
    ]
    new: list[tuple[int, tuple | None]] = []
    for r in plan.replicas:
        if r.cluster != cluster or pool not in r.pools:
            continue
        if r.change.value in ("Placed", "Moved"):
            new.extend(planned_pods(r))
        elif r.change.value in ("Kept", "Reshaped"):
            held.extend(gpus for gpus, _ in planned_pods(r))
    return held, new


@SETTINGS
@given(scenarios(BY_DEVICES))
def test_pools_counted_by_devices_never_promise_more_than_they_declare(scenario):
    xr, clusters, described, own, others = scenario
    plan = t.schedule(xr, clusters, own, others)
    for cluster, about in described.items():
        for pool, entry in about["pools"].items():
            if not entry["by_devices"]:
                continue
            held, new = pods_on(plan, others, cluster, pool)
            declared = entry["nodes"] * entry["per_node"]
            if any(g > entry["per_node"] for g in held) or sum(held) > declared:
                event("a pool counted by devices is over-committed already")
                continue  # some existing pods hold nothing: outside what the rule promises
            event(f"a pool counted by devices takes {'some' if new else 'no'} new pods")
            assert sum(held) + sum(g for g, _ in new) <= declared, (cluster, pool)
            assert all(g <= entry["per_node"] for g, _ in new), (cluster, pool)
            gangs = Counter(gang for _, gang in new if gang is not None)
            assert all(pods <= entry["nodes"] for pods in gangs.values()), (cluster, pool)


# --- steady mode ---------------------------------------------------------------------------


def roomy(cluster: dict) -> dict:
    """The cluster as it was when the replicas were placed: Ready, untainted, 8 nodes
    per pool, nothing observed (whole nodes free)."""
    was = copy.deepcopy(cluster)
    was["spec"].pop("taints", None)
    for spec in was["spec"]["nodePools"]:
        spec["nodeCount"] = 8
    was["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]}
    return was


def _pods_drawn_afresh(draw, own: dict) -> None:
    for body in own.values():
        body["metadata"].setdefault("annotations", {})["modelplane.ai/placed-at"] = t.ago(60)
        if draw(st.integers(0, 5)) == 0:
            status, reason, minutes = draw(st.sampled_from(STATES))
            body["status"]["conditions"][0].update(
                status=status, reason=reason, lastTransitionTime=t.ago(minutes)
            )


def _fates_drawn(draw, clusters: list[dict]) -> list[dict]:
    """The clusters now: some deleted, unselected or tainted NoExecute."""
    now = []
    for cluster in clusters:
        fate = draw(st.integers(0, 7))
        if fate == 0:
            continue  # deleted
        if fate == 1:
            cluster["metadata"]["labels"] = {"tier": "2"}  # no longer selected
        elif fate == 2:
            # Its replicas must move: where to is the fleet's question.
            cluster["spec"]["taints"] = [{"key": "x", "value": "y", "effect": "NoExecute"}]
        now.append(cluster)
    return now


def _memory_drawn(draw, own: dict) -> dict:
    """status.missingClusters: nothing, or one of the replicas' clusters missing for a while."""
    if draw(st.integers(0, 3)) != 0:
        return {}
    used = sorted({b["spec"]["clusterName"] for b in own.values()} or {"c0"})
    since = t.ago(draw(st.sampled_from([1, 10])))
    return {"missingClusters": [{"name": draw(st.sampled_from(used)), "since": since}]}


@st.composite
def reconciles(draw):
    """A deployment some passes after it was placed: its replicas as the fleet pass placed
    them, then their pods' states, spec.replicas, the engine shape, the clusters' labels
    and existence, other replicas, the namespace's quota and the deployment's memory
    drawn afresh. Returns (deployment, own replicas, everything Crossplane could fetch)."""
    clusters, _ = draw(fleets(MIXED))
    for cluster in clusters:
        cluster["metadata"]["labels"] = {"tier": draw(st.sampled_from(["1", "1", "2"]))}
    shape = draw(engines())
    selector = draw(st.sampled_from([None, {"tier": "1"}]))
    first = t.deployment(replicas=draw(st.integers(1, 4)), engines=shape, match_labels=selector)
    plan = t.schedule(first, [roomy(c) for c in clusters], {}, [])
    own = t.own_from_plan(first, plan, scheduled_at=t.ago(30), since=t.ago(30))
    _pods_drawn_afresh(draw, own)
    if draw(st.integers(0, 7)) == 0:
        shape = draw(engines())  # an edited shape
    xr = t.deployment(
        replicas=max(0, len(own) + draw(st.sampled_from([-2, -1, 0, 0, 0, 1]))),
        engines=shape,
        match_labels=selector,
    )
    memory = _memory_drawn(draw, own)
    if memory:
        xr["status"] = memory
    clusters = _fates_drawn(draw, clusters)
    _, _, _, _, others = draw(scenarios())
    quotas = []
    if draw(st.booleans()):
        quotas = [t.device_quota({"gpu.example.com": draw(st.integers(0, 24))})]
    # The other deployments label their replicas as they see these clusters.
    others = t.charge_labelled(others, clusters)
    return xr, own, [*clusters, *own.values(), *others, t.namespace("team-a"), *quotas]


def _call(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
    return scheduler.run_function(req, t.NOW, t.stand_in_matcher)


def _applied(rsp: fnv1.RunFunctionResponse) -> fnv1.RunFunctionResponse:
    """What Crossplane applies from a response: all of it but the requirements."""
    out = fnv1.RunFunctionResponse()
    out.CopyFrom(rsp)
    out.ClearField("requirements")
    return out


def _fleet_pass(xr: dict, own: dict, fetchable: list[dict]) -> fnv1.RunFunctionResponse:
    """One call with every selected cluster and EVERY ModelReplica fetched: what every pass
    planned on before steady mode and the charge label."""
    asks = _call(
        wire.request(xr, own, {scheduler.CLUSTERS: [], scheduler.PENDING_REPLICAS: []})
    ).requirements
    fetched = wire.answer(asks, fetchable)
    replicas = [body for body in fetchable if body.get("kind") == "ModelReplica"]
    return _call(
        t.request(
            xr,
            fetched[scheduler.CLUSTERS],
            replicas,
            own,
            namespaces=fetched[scheduler.NAMESPACE],
            quotas=fetched[scheduler.QUOTAS],
        )
    )


@SETTINGS
@given(reconciles())
def test_what_the_requirement_loop_applies_is_what_a_pass_on_every_replica_gives(scenario):
    """Steady mode on the footprint, and the fleet pass on the pending replicas plus
    the whole sets and the namespace's, apply exactly what one pass that reads every
    selected cluster and every ModelReplica applies."""
    xr, own, fetchable = scenario
    calls = wire.reconcile(_call, xr, own, fetchable)
    last = calls[-1][1]
    accepted = scheduler.CLUSTERS not in last.requirements.resources
    event("accepted on the footprint" if accepted else f"{len(calls)} calls, the fleet")
    assert _applied(last) == _applied(_fleet_pass(xr, own, fetchable))


@SETTINGS
@given(reconciles())
def test_a_reconcile_seeded_with_the_last_ones_requirements_applies_the_same(scenario):
    """Crossplane v2.4 seeds a reconcile with the requirements the last one ended on
    (wire.reconcile's `seeded`): it stabilizes, and applies what one pass on every
    replica gives, whichever loop ran before it."""
    xr, own, fetchable = scenario
    last = wire.reconcile(_call, xr, own, fetchable)[-1][1]
    seeded = wire.reconcile(_call, xr, own, fetchable, seeded=last.requirements)
    accepted = scheduler.CLUSTERS not in seeded[-1][1].requirements.resources
    event(f"seeded: {len(seeded)} calls, {'the footprint' if accepted else 'the fleet'}")
    assert _applied(seeded[-1][1]) == _applied(_fleet_pass(xr, own, fetchable))
