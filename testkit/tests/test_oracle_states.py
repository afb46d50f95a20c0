"""The oracle's state generator: reproducible by seed, and each feature switchable by name."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest
from modelplane_common.cel.devices import MATCH, evaluate
from modelplane_common.cel.quantity import Quantity
from modelplane_common.devices import device_view
from modelplane_testkit.oracle_states import (
    CLASSES,
    FEATURES,
    GATED_FEATURES,
    GPU_DRIVER,
    NIC_DRIVER,
    features_from,
    generate,
)

SEEDS = range(1, 61)


def test_a_seed_gives_the_same_state_every_time():
    assert all(
        dataclasses.asdict(generate(s, features_from("")))
        == dataclasses.asdict(generate(s, features_from("")))
        for s in SEEDS
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "",
            set(FEATURES) - {"tainted-partitions", *GATED_FEATURES},
            id="nothing named enables every feature v1.35.4 can run but the known disagreements",
        ),
        pytest.param(
            "all",
            set(FEATURES) - set(GATED_FEATURES),
            id="all enables every feature whose feature gates v1.35.4 has on",
        ),
        pytest.param("none", set(), id="none enables no feature"),
        pytest.param(
            "admin-access,shared-claims",
            {"admin-access", "shared-claims"},
            id="names enable only those",
        ),
        pytest.param(
            "-admin-access",
            set(FEATURES) - {"admin-access", "tainted-partitions", *GATED_FEATURES},
            id="a minus leaves one out of the default",
        ),
        pytest.param(
            "tainted-partitions",
            {"tainted-partitions"},
            id="a known disagreement runs when named",
        ),
    ],
)
def test_features_are_chosen_by_name(text, expected):
    assert features_from(text) == expected


@pytest.mark.parametrize(
    ("kube_version", "expected"),
    [
        pytest.param(
            "v1.35.4",
            set(FEATURES) - {"tainted-partitions", "consumable-capacity", "binding-conditions"},
            id="v1.35.4 leaves out tainted partitions, on which its scheduler leaks counters, "
            "and the features its alpha gates keep off",
        ),
        pytest.param("v1.36.3", set(FEATURES), id="v1.36.3 runs every feature by default"),
        pytest.param("v1.37.2", set(FEATURES), id="v1.37.2 runs every feature by default"),
    ],
)
def test_the_default_leaves_out_only_the_versions_known_disagreements(kube_version, expected):
    assert features_from("", kube_version) == expected
    assert features_from("-admin-access", kube_version) == expected - {"admin-access"}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        pytest.param(
            "consumable-capacity",
            "\\['consumable-capacity'\\] need the feature gates \\['DRAConsumableCapacity'\\]",
            id="consumable capacity named on v1.35.4 is refused naming its gate",
        ),
        pytest.param(
            "binding-conditions,admin-access",
            "\\['binding-conditions'\\] need the feature gates \\['DRADeviceBindingConditions'\\]",
            id="binding conditions named on v1.35.4 is refused naming the gate it has off",
        ),
    ],
)
def test_a_feature_whose_gates_are_off_is_refused_not_run_to_prove_nothing(text, named):
    with pytest.raises(ValueError, match=f"oracle features {named}, off on Kubernetes v1.35.4"):
        features_from(text, "v1.35.4")
    assert features_from(text, "v1.36.3") == set(text.split(","))


def test_an_unknown_feature_is_refused_with_the_known_names():
    with pytest.raises(
        ValueError, match="unknown oracle features \\['typo'\\]; known: republished-slices"
    ):
        features_from("typo")


# What in a state shows a feature was used: the steps only that feature produces.
SIGNS = {
    "admin-access": lambda step: step.get("adminAccess") is True,
    "device-taint-rules": lambda step: step["op"] == "taint-rule" and not step["consumesCounters"],
    "device-taints": lambda step: any(
        d.get("taints") and "consumes" not in d for d in step.get("devices", [])
    ),
    "tainted-partitions": lambda step: (
        step.get("consumesCounters") is True
        or any(d.get("taints") and "consumes" in d for d in step.get("devices", []))
    ),
    "shared-claims": lambda step: step.get("pods") == 2,
    "cordoned-nodes": lambda step: step.get("unschedulable") is True,
    "not-ready-nodes": lambda step: step.get("ready") is False,
    "node-resources": lambda step: step["op"] == "hog",
    "partitionable-devices": lambda step: (
        bool(step.get("sharedCounters")) and step["driver"] == GPU_DRIVER
    ),
    "shared-pool-names": lambda step: (
        step.get("driver") == NIC_DRIVER and step["pool"] == step["node"]
    ),
    "device-class-edits": lambda step: step["op"] == "device-class",
    "republished-slices": lambda step: step.get("generation", 1) > 1,
    "terminal-pods": lambda step: (
        step["op"] == "finish"
        or (step["op"] == "allocated-claim" and step["holder"] in ("Succeeded", "Failed"))
    ),
    "pending-deallocations": lambda step: (
        step["op"] == "allocated-claim" and step["holder"] in ("none", "ghost")
    ),
    "consumable-capacity": lambda step: (
        any(d.get("allowMultipleAllocations") for d in step.get("devices", []))
        or (step["op"] == "workload" and "capacity" in step)
    ),
    "binding-conditions": lambda step: any(
        d.get("bindingConditions") for d in step.get("devices", [])
    ),
}


# A feature that only shows on what another builds (a partitionable device to taint).
NEEDS = {"tainted-partitions": {"partitionable-devices"}}


@pytest.mark.parametrize("feature", sorted(SIGNS))
def test_a_feature_left_out_never_appears_and_enabled_it_does(feature):
    needed = NEEDS.get(feature, set())
    without = [generate(s, features_from(f"-{feature}", "v1.37.2")) for s in SEEDS]
    alone = [generate(s, features_from(",".join({feature, *needed}), "v1.37.2")) for s in SEEDS]
    assert not any(SIGNS[feature](step) for state in without for step in state.steps)
    assert any(SIGNS[feature](step) for state in alone for step in state.steps)
    assert all(set(state.features) <= {feature, *needed} for state in alone)


# States measured before the later features existed (design/agent.md, "Tests"), by the
# first 16 hex digits of the sha256 of their JSON (the generator before them gave these
# states; hashed as spelt since the step that waits for kube-scheduler became "converge").
BEFORE_LATER_FEATURES = {18: "74ec6dc9887cd8da", 100: "249361abe2dfd909", 145: "4ca7b6ec782995a6"}


# States the default gave before the claim features (CLAIM_FEATURES) existed, on v1.37.2
# (hashed with the converge step so spelt; with "settle" they hash as first measured).
BEFORE_CLAIM_FEATURES = {3: "66d0e504a85a3690", 31: "3325b56ef73f55e2", 77: "c3d8664cec11099a"}


def _digest(seed: int, features: str) -> str:
    state = generate(seed, features_from(features, "v1.37.2"))
    text = json.dumps(dataclasses.asdict(state), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# States the default gave on v1.37.2 before the gated features (GATED_FEATURES) existed.
BEFORE_GATED_FEATURES = {2: "e9604318af3f45c7", 14: "5658bbfd8bfe6b00", 29: "65c9b321eb444986"}
WITHOUT_GATED = "-consumable-capacity,-binding-conditions"


@pytest.mark.parametrize("seed", sorted(BEFORE_LATER_FEATURES))
def test_with_the_later_features_left_out_a_seed_replays_the_state_it_gave_before(seed):
    later = "-shared-pool-names,-device-class-edits,-terminal-pods,-pending-deallocations"
    assert _digest(seed, f"{later},{WITHOUT_GATED}") == BEFORE_LATER_FEATURES[seed]


@pytest.mark.parametrize("seed", sorted(BEFORE_CLAIM_FEATURES))
def test_with_the_claim_features_left_out_a_seed_replays_the_state_it_gave_before(seed):
    claims = "-terminal-pods,-pending-deallocations"
    assert _digest(seed, f"{claims},{WITHOUT_GATED}") == BEFORE_CLAIM_FEATURES[seed]


@pytest.mark.parametrize("seed", sorted(BEFORE_GATED_FEATURES))
def test_with_the_gated_features_left_out_a_seed_replays_the_state_it_gave_before(seed):
    assert _digest(seed, WITHOUT_GATED) == BEFORE_GATED_FEATURES[seed]


def test_a_class_edit_narrows_or_widens_the_pools_own_class_after_workloads_ran():
    for seed in SEEDS:
        state = generate(seed, features_from("device-class-edits"))
        edits = [i for i, s in enumerate(state.steps) if s["op"] == "device-class"]
        if not edits:
            continue
        created, edited = (state.steps[i] for i in edits)
        assert created["name"] == edited["name"] == state.pool.devices[0]["deviceClassName"]
        assert created["expression"] != edited["expression"]
        converge = next(i for i, s in enumerate(state.steps) if s["op"] == "converge")
        assert edits[0] < converge < edits[1]


def _held(state) -> list[dict]:
    return [s for s in state.steps if s["op"] == "allocated-claim"]


def test_claims_the_state_allocates_hold_published_devices_of_their_node_one_per_gpu():
    states = [
        generate(s, features_from("terminal-pods,pending-deallocations,partitionable-devices"))
        for s in SEEDS
    ]
    assert any(_held(state) for state in states)
    for state in states:
        published = {
            (step["node"], device["name"]): device["attributes"]["index"]
            for step in state.steps
            if step["op"] == "slice" and step["driver"] == GPU_DRIVER
            for device in step["devices"]
        }
        for node in state.nodes:
            held = [d for c in _held(state) if c["node"] == node for d in c["devices"]]
            assert all(d["pool"] == node for d in held)
            gpus = [published[(node, d["device"])] for d in held]
            assert len(gpus) == len(set(gpus)), f"seed {state.seed}: two held devices of one GPU"


def test_claims_are_allocated_before_workloads_and_pods_finish_only_after_they_ran():
    for seed in SEEDS:
        steps = generate(seed, features_from("terminal-pods,pending-deallocations")).steps
        ops = [s["op"] for s in steps]
        first_workload = ops.index("workload") if "workload" in ops else len(ops)
        converged = ops.index("converge")
        assert all(i < first_workload for i, op in enumerate(ops) if op == "allocated-claim")
        assert all(i > converged for i, op in enumerate(ops) if op == "finish")
        workloads = {
            f"{s['name']}-p{i}" for s in steps if s["op"] == "workload" for i in range(s["pods"])
        }
        assert all(set(s["pods"]) <= workloads for s in steps if s["op"] == "finish")


# --------------------------------------------------------------------------- gated features


def _gated_states() -> list:
    return [generate(s, features_from(",".join(GATED_FEATURES), "v1.37.2")) for s in SEEDS]


def _devices(state, key: str) -> list[tuple[dict, dict]]:
    """(slice step, device) for every device of `state` carrying `key`."""
    return [
        (step, d)
        for step in state.steps
        if step["op"] == "slice"
        for d in step["devices"]
        if key in d
    ]


def _q(text: str) -> Quantity:
    return Quantity.parse(text)


def _policy_problem(value: str, policy: dict) -> str | None:
    """What the API server would refuse in a requestPolicy (k8s.io/kubernetes
    pkg/apis/resource/validation `validateRequestPolicy`), or None."""
    default = _q(policy["default"]).value
    if default > _q(value).value:
        return "default above the capacity"
    values = [_q(v).value for v in policy.get("validValues", [])]
    if values and (
        values != sorted(values) or default not in values or max(values) > _q(value).value
    ):
        return "validValues unsorted, past the capacity or without the default"
    span = policy.get("validRange")
    if span is None:
        return None
    low, high = _q(span["min"]).value, _q(span.get("max", value)).value
    step = _q(span["step"]).value if "step" in span else None
    if not low <= default <= high <= _q(value).value:
        return "default outside the range, or the range past the capacity"
    if step is not None and ((default - low) % step or (high - low) % step):
        return "default or max off the step"
    return None


def test_devices_allowing_multiple_allocations_are_shaped_as_the_api_requires():
    shared = [
        pair for state in _gated_states() for pair in _devices(state, "allowMultipleAllocations")
    ]
    assert {tuple(sorted(d["capacity"]["memory"].get("requestPolicy", {}))) for _, d in shared} >= {
        (),
        ("default",),
        ("default", "validRange"),
        ("default", "validValues"),
    }
    for step, device in shared:
        memory = device["capacity"]["memory"]
        assert device["allowMultipleAllocations"] is True
        assert step["pool"].endswith("-shared") and not step["sharedCounters"]
        assert "consumes" not in device and not device.get("taints")
        policy = memory.get("requestPolicy")
        assert policy is None or _policy_problem(memory["value"], policy) is None, device


def test_devices_with_binding_conditions_are_shaped_as_the_api_requires():
    attached = [pair for state in _gated_states() for pair in _devices(state, "bindingConditions")]
    assert {d["bindsToNode"] for _, d in attached} == {True, False}
    for step, device in attached:
        conditions, failures = device["bindingConditions"], device["bindingFailureConditions"]
        assert 0 < len(conditions) <= 4 and 0 < len(failures) <= 4  # both or neither
        assert not set(conditions) & set(failures)
        assert step["pool"].endswith("-attached") and "consumes" not in device


def _selects(device_class: str, device: dict) -> bool:
    """Whether `device_class` (of CLASSES) selects the generated `device`."""
    attributes = {
        k: {"int": v} if isinstance(v, int) else {"string": v}
        for k, v in device["attributes"].items()
    }
    view = device_view({"driver": GPU_DRIVER, "attributes": attributes})
    return evaluate(CLASSES[device_class], view)[0] == MATCH


def test_gated_devices_are_of_a_kind_the_pool_counts_and_workloads_ask_them():
    asked = set()
    for state in _gated_states():
        kinds = [
            d["deviceClassName"].removeprefix(f"{state.pool.name}-") for d in state.pool.devices
        ]
        gated = _devices(state, "allowMultipleAllocations") + _devices(state, "bindingConditions")
        for _, device in gated:
            assert any(_selects(kind, device) for kind in kinds if kind != "nic.example.com"), (
                state.seed,
                device,
            )
        asked |= {s["capacity"] for s in state.steps if s["op"] == "workload" and "capacity" in s}
    assert {None, "3Gi", "20Gi", "25Gi"} <= asked, "claims asking no capacity, some, all, too much"
