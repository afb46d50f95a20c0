"""The incremental state answers exactly what a fresh one built from the final objects does."""

from __future__ import annotations

import random

import pytest
from modelplane_agent.pools import observe_pool
from modelplane_agent.state import CLAIMS, NODES, PODS, POOLS, REPLICAS, SLICES, ClusterState
from modelplane_devtools import agent_builders as t

GPU_CLASS = t.device_class("gpu", 'device.attributes["gpu.nvidia.com"].type == "gpu"')
POOLS_OBJS = [
    t.pool_observation("a100", [("gpu", t.NVIDIA, "gpu")]),
    t.pool_observation("h100", [("gpu", t.NVIDIA, "gpu")]),
]


def random_world(rng: random.Random) -> dict[tuple[str, str], dict]:
    """Objects keyed by (kind, name): nodes, slices, claims, replica pods."""
    world: dict[tuple[str, str], dict] = {}
    for i in range(12):
        name = f"n{i}"
        world[(NODES, name)] = random_node(rng, name)
        world[(SLICES, name)] = t.resource_slice(name, [t.device(f"g{j}") for j in range(4)])
    for i in range(10):
        world[(CLAIMS, f"c{i}")] = random_claim(rng, f"c{i}")
    for i in range(6):
        world[(PODS, f"r-{i}")] = random_pod(rng, f"r-{i}")
    return world


def random_node(rng: random.Random, name: str) -> dict:
    return t.node(
        name,
        rng.choice(["a100", "h100", None]),
        ready=rng.choice([True, True, False, None]),
        cordoned=rng.random() < 0.2,
        taints=[{"key": "k", "effect": "NoSchedule"}] if rng.random() < 0.2 else [],
    )


def random_claim(rng: random.Random, name: str) -> dict:
    node = f"n{rng.randrange(12)}"
    devices = rng.sample([f"g{j}" for j in range(4)], rng.randrange(3))
    return t.claim(name, [(node, d) for d in devices])


def random_pod(rng: random.Random, name: str) -> dict:
    return t.pod(
        name,
        replica=rng.choice(["r", "s"]),
        node_name=rng.choice([None, "n1"]),
        unschedulable=rng.choice([None, "no room"]),
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
            state.rules[pool],
            [state.nodes[n] for n in sorted(state.members.get(pool, ()))],
            lambda node, pool=pool: state._free(pool, node.name),
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


@pytest.mark.parametrize("seed", range(6))
def test_after_random_events_the_state_equals_a_fresh_one(seed):
    rng = random.Random(seed)
    world = random_world(rng)
    state = build(FIXED + [(k, o) for (k, _), o in world.items()])
    for _ in range(80):
        kind, name = rng.choice(sorted(world))
        if rng.random() < 0.15:
            state.apply(kind, "DELETED", world.pop((kind, name)))
            continue
        new = {
            NODES: random_node,
            CLAIMS: random_claim,
            PODS: random_pod,
            SLICES: lambda r, n: t.resource_slice(
                n, [t.device(f"g{j}") for j in range(r.randrange(5))]
            ),
        }[kind](rng, name)
        world[(kind, name)] = new
        state.apply(kind, "MODIFIED", new)
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
