"""No object the API server could serve, however malformed, crashes the agent's readers."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st
from modelplane_agent.state import (
    CLAIMS,
    CLASSES,
    NODES,
    PODS,
    POOLS,
    REPLICAS,
    SLICES,
    ClusterState,
)
from modelplane_testkit import agent_builders as t

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**12) | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)

# Well-formed objects of every kind, each with the fields the allocation rules read.
SAMPLES = [
    (NODES, t.node("n1")),
    (
        SLICES,
        t.resource_slice(
            "n1",
            [
                t.device("g0", taints=[{"key": "k", "effect": "NoSchedule"}]),
                t.device("g1", consumes={"c": {"m": "1"}}, binding_conditions=["ready"]),
            ],
            slice_count=2,
            shared_counters={"c": {"m": "2"}},
        ),
    ),
    (CLAIMS, t.claim("c", [("n1", "g0")], admin_access=True)),
    (CLASSES, t.device_class("gpu", "true")),
    (POOLS, t.pool_observation("a100", [("gpu", t.NVIDIA, "gpu")], min_pod_requests={"cpu": "8"})),
    (
        PODS,
        t.pod("p", node_name="n1", claims=["c"], template_claims={"x": "y"}, requests={"cpu": "1"}),
    ),
    (REPLICAS, t.replica_observation()),
]


def paths(obj, prefix=()):
    """Every path to a value inside `obj` (dict keys and list indices)."""
    yield prefix
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            yield from paths(value, (*prefix, index))


def replaced(obj, path, value):
    out = copy.deepcopy(obj)
    if not path:
        return value
    target = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return out


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(SAMPLES), st.data(), json_values)
def test_a_value_of_any_shape_anywhere_in_an_object_never_crashes_the_state(sample, data, value):
    kind, obj = sample
    path = data.draw(st.sampled_from(list(paths(obj))[1:]))
    mutant = replaced(obj, path, value)
    state = ClusterState()
    for other_kind, other in SAMPLES:
        state.apply(other_kind, "ADDED", other)
    state.apply(kind, "MODIFIED", mutant)
    for pool in state.pools:
        state.pool_report(pool)
    for key in state.replicas:
        state.replica_report(key)
    state.apply(kind, "DELETED", mutant)
