"""The incremental state answers exactly what a fresh one built from the final objects does."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from modelplane_agent.pools import observe_pool
from modelplane_agent.state import (
    CLAIMS,
    CLASSES,
    NODES,
    PODS,
    POOLS,
    REPLICAS,
    RULES,
    SLICES,
    ClusterState,
)
from modelplane_agent.status import pool_status
from modelplane_testkit import agent_builders as t

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
GPU_CLASS = t.device_class("gpu", 'device.attributes["gpu.nvidia.com"].type == "gpu"')
POOLS_OBJS = [
    t.pool_observation("a100", [("gpu", t.NVIDIA, "gpu")], min_pod_requests={"cpu": "8"}),
    t.pool_observation("h100", [("gpu", t.NVIDIA, "gpu")]),
]


def random_world(rng: random.Random) -> dict[tuple[str, str], dict]:
    """Objects keyed by (kind, name): nodes and their slices (two names per node, so
    slices are replaced under new names and devices move), claims, replica pods, the
    DeviceClass and a pool (modified, never deleted)."""
    world: dict[tuple[str, str], dict] = {}
    for i in range(12):
        name = f"n{i}"
        world[(NODES, name)] = random_node(rng, name)
        world[(SLICES, f"{name}-a")] = t.resource_slice(
            name, [t.device(f"g{j}") for j in range(4)], name=f"{name}-a"
        )
    world[(SLICES, "fabric-a")] = random_slice(rng, "fabric-a")
    for i in range(10):
        world[(CLAIMS, f"c{i}")] = random_claim(rng, f"c{i}")
    for i in range(6):
        world[(PODS, f"r-{i}")] = random_pod(rng, f"r-{i}")
    for i in range(3):
        world[(RULES, f"rule{i}")] = random_rule(rng, f"rule{i}")
    world[(CLASSES, "gpu")] = GPU_CLASS
    world[(POOLS, "a100")] = POOLS_OBJS[0]
    return world


def random_rule(rng: random.Random, name: str) -> dict:
    """A DeviceTaintRule naming a device, a node's pool, both, or (rarely) nothing at all."""
    names = rng.choice([{"device": "g"}, {"pool": "n"}, {"pool": "n", "device": "g"}] * 3 + [{}])
    chosen = {
        field: f"{prefix}{rng.randrange(6 if field == 'device' else 12)}"
        for field, prefix in names.items()
    }
    effect = rng.choice(["NoSchedule", "NoExecute", "None"])
    return t.taint_rule(name, effect, driver=t.NVIDIA, **chosen)


def random_fabric(rng: random.Random, name: str, devices: list[dict]) -> dict:
    """A network-attached slice: for every node, the nodes of a zone, or per device."""
    obj = t.resource_slice(None, devices, name=name, pool="fabric")
    del obj["spec"]["allNodes"]
    zone = {"key": "zone", "operator": "In", "values": [rng.choice("ab")]}
    reach = rng.choice(
        [
            {"allNodes": True},
            {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [zone]}]}},
        ]
    )
    if rng.random() < 0.3:
        reach = {"perDeviceNodeSelection": True}
        for device in devices:
            device.update(rng.choice([{"allNodes": True}, {"nodeName": f"n{rng.randrange(12)}"}]))
    obj["spec"].update(reach)
    return obj


def random_slice(rng: random.Random, name: str) -> dict:
    node = name.rsplit("-", 1)[0]
    taint = [{"key": "xid", "effect": rng.choice(["NoSchedule", "NoExecute", "None"])}]
    devices = [
        t.device(
            f"g{j}", rng.choice(["gpu", "gpu", "vf"]), taints=taint if rng.random() < 0.1 else ()
        )
        for j in rng.sample(range(6), rng.randrange(5))
    ]
    if node == "fabric":
        return random_fabric(rng, name, devices)
    return t.resource_slice(
        node, devices, name=name, generation=rng.choice([1, 2]), slice_count=rng.choice([1, 1, 2])
    )


def random_class(rng: random.Random, name: str) -> dict:
    return rng.choice([GPU_CLASS, t.device_class(name, "true")])


def random_pool(rng: random.Random, name: str) -> dict:
    shape = rng.choice([None, {"cpu": "8"}, {"cpu": "2", "memory": "80Gi"}])
    return t.pool_observation(name, [("gpu", t.NVIDIA, "gpu")], min_pod_requests=shape)


def random_node(rng: random.Random, name: str) -> dict:
    return t.node(
        name,
        rng.choice(["a100", "h100", None]),
        ready=rng.choice([True, True, False, None]),
        cordoned=rng.random() < 0.2,
        taints=[{"key": "k", "effect": "NoSchedule"}] if rng.random() < 0.2 else [],
        extra_labels={"zone": rng.choice("ab")},
        allocatable={"cpu": rng.choice(["4", "16"]), "memory": "64Gi", "pods": "3"},
    )


def random_claim(rng: random.Random, name: str) -> dict:
    node = rng.choice([f"n{rng.randrange(12)}", "fabric"])
    devices = rng.sample([f"g{j}" for j in range(4)], rng.randrange(3))
    return t.claim(name, [(node, d) for d in devices], admin_access=rng.random() < 0.1)


def random_pod(rng: random.Random, name: str) -> dict:
    return t.pod(
        name,
        replica=rng.choice(["r", "s"]),
        node_name=rng.choice([None, "n1", "n2"]),
        unschedulable=rng.choice([None, "no room"]),
        requests={"cpu": rng.choice(["1", "6"])},
        phase=rng.choice(["Pending", "Pending", "Succeeded"]),
    )


def build(objects) -> ClusterState:
    state = ClusterState()
    for kind, obj in objects:
        state.apply(kind, "ADDED", obj)
    return state


def reports(state: ClusterState):
    """The state's reports, after checking each pool's equals one computed afresh."""
    for pool in ("a100", "h100"):
        afresh = observe_pool(
            state.pools[pool],
            state.pool_view.rules[pool],
            [state.nodes[n] for n in sorted(state.pool_view.members.get(pool, ()))],
            lambda node, pool=pool: state.pool_view.free(pool, node.name),
            lambda node, pool=pool: state.pool_view.room(pool, node.name),
        )
        assert state.pool_report(pool) == afresh
    return (
        {p: state.pool_report(p) for p in ("a100", "h100")},
        state.replica_report(("team", "r")),
    )


FIXED = [(POOLS, p) for p in POOLS_OBJS] + [
    ("deviceclasses", GPU_CLASS),
    (REPLICAS, t.replica_observation()),
]


@pytest.mark.parametrize("seed", range(20))
def test_after_random_events_the_state_equals_a_fresh_one(seed):
    rng = random.Random(seed)
    world = random_world(rng)
    state = build(FIXED + [(k, o) for (k, _), o in world.items()])
    for _ in range(120):
        kind, name = rng.choice(sorted(world))
        if kind == SLICES and rng.random() < 0.3:
            name = name[:-1] + rng.choice("ab")  # the node's other slice name
        if rng.random() < 0.15 and kind not in (CLASSES, POOLS) and (kind, name) in world:
            state.apply(kind, "DELETED", world.pop((kind, name)))
            continue
        new = {
            NODES: random_node,
            CLAIMS: random_claim,
            PODS: random_pod,
            SLICES: random_slice,
            CLASSES: random_class,
            POOLS: random_pool,
            RULES: random_rule,
        }[kind](rng, name)
        world[(kind, name)] = new
        state.apply(kind, "MODIFIED", new)
        if rng.random() < 0.5:  # as the publisher would between events: cached vectors
            for pool in state.pools:
                state.pool_report(pool)
    fresh = build(FIXED + [(k, o) for (k, _), o in world.items()])
    assert reports(state) == reports(fresh)


def test_a_relist_deletes_what_is_gone_and_touches_its_pools():
    rng = random.Random(7)
    world = random_world(rng)
    state = build(FIXED + [(k, o) for (k, _), o in world.items()])
    kept = [o for (k, name), o in world.items() if k == NODES and name != "n3"]
    touched = state.replace(NODES, kept)
    fresh = build(FIXED + [(k, o) for (k, n), o in world.items() if (k, n) != (NODES, "n3")])
    assert reports(state) == reports(fresh)
    pool = world[(NODES, "n3")]["metadata"]["labels"].get("modelplane.ai/pool")
    assert touched.pools == ({pool} if pool else set())


def test_an_event_that_changes_nothing_the_rules_read_touches_nothing():
    node = t.node("n1")
    state = build([*FIXED, (NODES, node)])
    heartbeat = {**node, "status": {**node["status"], "images": ["x"]}}
    heartbeat["metadata"] = {**node["metadata"], "resourceVersion": "42"}
    assert not state.apply(NODES, "MODIFIED", heartbeat)


def test_a_pod_bound_to_a_node_with_room_left_touches_no_pool():
    state = build([*FIXED, (NODES, t.node("n1", "a100")), (SLICES, t.resource_slice("n1", []))])
    state.pool_report("a100")
    touched = state.apply(PODS, "ADDED", t.pod("p", replica="x", node_name="n1"))
    assert not touched.pools


def test_a_pod_taking_the_last_room_of_its_node_touches_its_pool():
    state = build([*FIXED, (NODES, t.node("n1", "a100")), (SLICES, t.resource_slice("n1", []))])
    touched = state.apply(
        PODS, "ADDED", t.pod("p", replica="x", node_name="n1", requests={"cpu": "60"})
    )
    assert touched.pools == {"a100"}


def test_a_claim_event_touches_only_the_pool_of_its_node():
    state = build(
        [
            *FIXED,
            (NODES, t.node("a", "a100")),
            (NODES, t.node("h", "h100")),
            (SLICES, t.resource_slice("a", [t.device("g0")])),
            (SLICES, t.resource_slice("h", [t.device("g0")])),
        ]
    )
    touched = state.apply(CLAIMS, "ADDED", t.claim("c", [("h", "g0")]))
    assert touched.pools == {"h100"} and not touched.replicas


# --------------------------------------------------------------------------- slice churn


def four_gpus(name: str, generation: int = 1, devices=range(4), count: int = 1) -> dict:
    return t.resource_slice(
        "n1",
        [t.device(f"g{j}") for j in devices],
        name=name,
        generation=generation,
        slice_count=count,
    )


def all_four_claimed() -> list:
    return [("apply", CLAIMS, t.claim(f"c{j}", [("n1", f"g{j}")])) for j in range(4)]


def fold(state: ClusterState, steps) -> list[tuple[str, dict]]:
    """Feed `steps` to `state`; return the objects that exist at the end.

    ("apply", kind, obj) is an ADDED/MODIFIED event, ("delete", kind, obj) a
    DELETED one, ("relist", kind, objs) a relist folded object by object and
    then what it lacked deleted, as the shell does. Every pool is reported after
    each step, as the publisher would between events, so cached vectors are in play.
    """
    world: dict[tuple[str, object], tuple[str, dict]] = {}
    for action, kind, payload in steps:
        if action == "apply":
            state.apply(kind, "MODIFIED", payload)
            world[(kind, state.key_of(kind, payload))] = (kind, payload)
        elif action == "delete":
            state.apply(kind, "DELETED", payload)
            world.pop((kind, state.key_of(kind, payload)), None)
        else:
            seen = set()
            for obj in payload:
                seen.add(state.key_of(kind, obj))
                state.apply(kind, "MODIFIED", obj)
            state.delete_missing(kind, seen)
            world = {k: v for k, v in world.items() if k[0] != kind}
            world.update({(kind, state.key_of(kind, o)): (kind, o) for o in payload})
        for pool in state.pools:
            state.pool_report(pool)
    return list(world.values())


CHURN = [
    pytest.param(
        [
            ("apply", SLICES, four_gpus("old")),
            ("apply", SLICES, four_gpus("new", 2)),
            ("delete", SLICES, four_gpus("old")),
            *all_four_claimed(),
        ],
        (0,),
        id="a slice republished under a new name before the old one is deleted keeps its devices",
    ),
    pytest.param(
        [
            ("apply", SLICES, four_gpus("old")),
            ("relist", SLICES, [four_gpus("new", 2)]),
            *all_four_claimed(),
        ],
        (0,),
        id="a relist folding the new slice then deleting the old one keeps the devices",
    ),
    pytest.param(
        [
            ("apply", SLICES, four_gpus("a", devices=range(2), count=2)),
            ("apply", SLICES, four_gpus("b", devices=range(2, 4), count=2)),
            ("apply", SLICES, four_gpus("b", devices=range(1, 4), count=2)),
            ("apply", SLICES, four_gpus("a", devices=range(1), count=2)),
            ("apply", CLAIMS, t.claim("c", [("n1", "g1")])),
        ],
        (3,),
        id="a device moved to the other slice of its pool, added there first, keeps its node",
    ),
    pytest.param(
        [
            ("apply", SLICES, four_gpus("a", devices=range(2), count=2)),
            ("apply", SLICES, four_gpus("b", devices=range(2, 4), count=2)),
            ("apply", SLICES, four_gpus("a", devices=range(1), count=2)),
            ("apply", SLICES, four_gpus("b", devices=range(1, 4), count=2)),
            ("apply", CLAIMS, t.claim("c", [("n1", "g1")])),
        ],
        (3,),
        id="a device moved to the other slice of its pool, removed first, keeps its node",
    ),
]


@pytest.mark.parametrize(("steps", "free"), CHURN)
def test_slice_churn_keeps_every_device_on_its_node(steps, free):
    start = [*FIXED, (NODES, t.node("n1", "a100"))]
    state = build(start)
    final = fold(state, steps)
    report = state.pool_report("a100")
    assert report.histogram is not None and report.histogram.buckets == ((free, 1),)
    assert reports(state) == reports(build([*start, *final]))


# --------------------------------------------------------------------------- rejoining a pool

ANY_GPU = t.device_class("gpu", "true")
NIC_CLASS = t.device_class("nic", 'device.driver == "nic.example.com"')
MIXED = t.resource_slice("n1", [t.device("g0"), t.device("vf0", "virtual")])
NICS = t.resource_slice("n1", [t.device("nic0", "nic")], driver=t.NIC_DRIVER)
GPU_AND_NIC = t.pool_observation("a100", [("gpu", t.NVIDIA, "gpu"), ("nic", t.NIC_DRIVER, "nic")])

# GPU_CLASS with a driver guard: unguarded, it fails on n1's NIC (test_pools.py).
NARROWED = t.device_class(
    "gpu", 'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"'
)

REJOIN = [
    pytest.param(
        [("apply", CLASSES, NARROWED)],
        ((1,), ("gpu",)),
        id="a node away while its pool's DeviceClass narrowed rejoins with the narrowed count",
    ),
    pytest.param(
        [("apply", CLASSES, NIC_CLASS), ("apply", POOLS, GPU_AND_NIC)],
        ((2, 1), ("gpu", "nic")),
        id="a node away while its pool gained a kind rejoins with a count of every kind",
    ),
]


@pytest.mark.parametrize(("while_away", "expected"), REJOIN)
def test_a_node_rejoining_its_pool_is_counted_afresh(while_away, expected):
    free, kinds = expected
    state = build([*FIXED, (CLASSES, ANY_GPU), (NODES, t.node("n1", "a100"))])
    fold(
        state,
        [
            ("apply", SLICES, MIXED),
            ("apply", SLICES, NICS),
            ("apply", NODES, t.node("n1", None)),
            *while_away,
            ("apply", NODES, t.node("n1", "a100")),
        ],
    )
    report = state.pool_report("a100")
    assert report.histogram is not None and report.histogram.buckets == ((free, 1),)
    status = pool_status(report, state.pools["a100"].kind_names, NOW, None, 1)
    by_kind = dict(zip(kinds, free, strict=True))
    assert status["nodesByFreeDevices"] == [{"free": by_kind, "nodes": 1}]
