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
    CLAIM_FEATURES,
    CLASSES,
    DECLARATION_FEATURES,
    FEATURES,
    GATED_FEATURES,
    GPU_DRIVER,
    LATER_FEATURES,
    NIC_DRIVER,
    OWN_DICE_FEATURES,
    VARIANTS,
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
    "network-attached-devices": lambda step: step["op"] == "slice" and step["node"] is None,
    "preemption": lambda step: step["op"] in ("preempt", "priority-class"),
    "declared-devices": lambda step: (
        "selectors" in step
        or any(
            "capacity" in d and not d.get("allowMultipleAllocations")
            for d in step.get("devices", [])
        )
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


# The features added side by side after the claim features, each with dice of its own:
# every pinned state below is the generator's from before them, so each pin leaves them
# all out.
NEWEST = ",".join(f"-{f}" for f in (*OWN_DICE_FEATURES, *DECLARATION_FEATURES, *GATED_FEATURES))

# States the default gave before "declared-devices" existed, on v1.37.2.
BEFORE_DECLARATION_FEATURES = {
    5: "50de4a7b0571c562",
    40: "325f9e2a8c93c021",
    120: "32e3b7785eacc080",
}


@pytest.mark.parametrize("seed", sorted(BEFORE_DECLARATION_FEATURES))
def test_with_declared_devices_left_out_a_seed_replays_the_state_it_gave_before(seed):
    assert _digest(seed, NEWEST) == BEFORE_DECLARATION_FEATURES[seed]


def test_a_seed_that_does_not_roll_declared_devices_is_the_state_it_was_without_it():
    for seed in SEEDS:
        state = generate(seed, features_from("", "v1.37.2"))
        if "declared-devices" not in state.features:
            assert dataclasses.asdict(state) == dataclasses.asdict(
                generate(seed, features_from("-declared-devices", "v1.37.2"))
            )


# States the default gave on v1.37.2 before the gated features (GATED_FEATURES) existed.
BEFORE_GATED_FEATURES = {2: "e9604318af3f45c7", 14: "5658bbfd8bfe6b00", 29: "65c9b321eb444986"}


@pytest.mark.parametrize("seed", sorted(BEFORE_LATER_FEATURES))
def test_with_the_later_features_left_out_a_seed_replays_the_state_it_gave_before(seed):
    later = ",".join(f"-{f}" for f in (*LATER_FEATURES, *CLAIM_FEATURES))
    assert _digest(seed, f"{later},{NEWEST}") == BEFORE_LATER_FEATURES[seed]


@pytest.mark.parametrize("seed", sorted(BEFORE_CLAIM_FEATURES))
def test_with_the_claim_features_left_out_a_seed_replays_the_state_it_gave_before(seed):
    claims = ",".join(f"-{f}" for f in CLAIM_FEATURES)
    assert _digest(seed, f"{claims},{NEWEST}") == BEFORE_CLAIM_FEATURES[seed]


# States the default gave before the features with dice of their own (OWN_DICE_FEATURES)
# existed, on v1.37.2.
BEFORE_OWN_DICE_FEATURES = {5: "50de4a7b0571c562", 42: "3eab306eb9055be5", 120: "32e3b7785eacc080"}


@pytest.mark.parametrize("seed", sorted(BEFORE_OWN_DICE_FEATURES))
def test_with_the_own_dice_features_left_out_a_seed_replays_the_state_it_gave_before(seed):
    assert _digest(seed, NEWEST) == BEFORE_OWN_DICE_FEATURES[seed]


@pytest.mark.parametrize("seed", sorted(BEFORE_GATED_FEATURES))
def test_with_the_gated_features_left_out_a_seed_replays_the_state_it_gave_before(seed):
    assert _digest(seed, NEWEST) == BEFORE_GATED_FEATURES[seed]


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


def _network_slices(state) -> list[dict]:
    return [s for s in state.steps if s["op"] == "slice" and s["node"] is None]


NETWORK_STATES = [generate(s, features_from("network-attached-devices")) for s in SEEDS]


@pytest.mark.parametrize(
    ("spec", "holds"),
    [
        pytest.param(
            "each network slice names exactly one way of serving nodes",
            lambda state, step: (
                len(step["reach"]) == 1
                and set(step["reach"]) <= {"allNodes", "nodeSelector", "perDeviceNodeSelection"}
            ),
        ),
        pytest.param(
            "each device of a per-device slice names exactly one way, and only there",
            lambda state, step: all(
                len({"nodeName", "nodeSelector", "allNodes"} & set(d))
                == (1 if "perDeviceNodeSelection" in step["reach"] else 0)
                for d in step["devices"]
            ),
        ),
        pytest.param(
            "a network slice is a complete resource pool of its own, one generation",
            lambda state, step: (
                step["pool"] == step["name"]
                and (step["generation"], step["resourceSliceCount"]) == (1, 1)
                and not step["sharedCounters"]
            ),
        ),
        pytest.param(
            "a device node name is one of the state's nodes",
            lambda state, step: all(
                d["nodeName"] in state.nodes for d in step["devices"] if "nodeName" in d
            ),
        ),
        pytest.param(
            "a network GPU carries every attribute the classes read, so none fails on it",
            lambda state, step: (
                step["driver"] != GPU_DRIVER
                or all(
                    {"type", "profile", "index"} <= set(d["attributes"]) for d in step["devices"]
                )
            ),
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_network_slices(spec, holds):
    slices = [(state, step) for state in NETWORK_STATES for step in _network_slices(state)]
    assert slices
    assert all(holds(state, step) for state, step in slices), spec


def test_network_slices_serve_nodes_every_way_and_offer_devices_of_a_kind_and_of_none():
    slices = [step for state in NETWORK_STATES for step in _network_slices(state)]
    ways = {way for step in slices for way in step["reach"]}
    assert ways == {"allNodes", "nodeSelector", "perDeviceNodeSelection"}
    per_device = {
        way
        for step in slices
        for d in step["devices"]
        for way in ("nodeName", "nodeSelector", "allNodes")
        if way in d
    }
    assert per_device == {"nodeName", "nodeSelector", "allNodes"}
    types = {d["attributes"].get("type") for step in slices for d in step["devices"]}
    assert {"gpu", "mig", "fpga", None} <= types  # None: a network NIC


PREEMPTION_STATES = [generate(s, features_from("preemption")) for s in SEEDS]


def test_a_preemptor_comes_after_the_workloads_it_may_preempt_converged():
    for state in PREEMPTION_STATES:
        ops = [s["op"] for s in state.steps]
        for i, step in enumerate(state.steps):
            if step["op"] != "preempt":
                continue
            victims = [
                j
                for j, s in enumerate(state.steps)
                if s["op"] == "workload"
                and s.get("priorityClass") == f"s{state.seed}-low"
                and s["node"] == step["node"]
            ]
            assert len(victims) == 2
            assert max(victims) < ops.index("converge") < i


@pytest.mark.parametrize(
    ("spec", "holds"),
    [
        pytest.param(
            "the preemptor's class is higher than its victims', both above the probes' 0",
            lambda steps: [s["value"] for s in steps if s["op"] == "priority-class"] == [100, 1000],
        ),
        pytest.param(
            "victims keep a grace period, so they stay terminating while nominated",
            lambda steps: all(
                s["gracePeriod"] > 0 for s in steps if s.get("priorityClass", "").endswith("-low")
            ),
        ),
        pytest.param(
            "a preemptor asks more cpu than its two victims leave of the node's 8",
            lambda steps: all(int(s["cpu"]) > 8 - 2 * 3 for s in steps if s["op"] == "preempt"),
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_preemption_states(spec, holds):
    with_preemption = [s.steps for s in PREEMPTION_STATES if "preemption" in s.features]
    assert any(any(s["op"] == "preempt" for s in steps) for steps in with_preemption)
    assert all(holds(steps) for steps in with_preemption), spec


def test_preemptors_are_observed_both_nominated_and_bound():
    releases = {
        s["release"] for state in PREEMPTION_STATES for s in state.steps if s["op"] == "preempt"
    }
    assert releases == {True, False}


# ------------------------------------------------------------------ declared devices

DECLARING = [
    generate(s, features_from("declared-devices,partitionable-devices,republished-slices"))
    for s in range(1, 121)
]
DECLARING = [state for state in DECLARING if "declared-devices" in state.features]


def _gpu_devices_of(state) -> list[tuple[str, dict]]:
    """(node, device) of every GPU device the state publishes, any generation."""
    return [
        (step["node"], device)
        for step in state.steps
        if step["op"] == "slice" and step["driver"] == GPU_DRIVER
        for device in step["devices"]
    ]


def _view(device: dict) -> tuple:
    """What a selector sees of a published device (the harness's wire form)."""
    attributes = {
        name: value if isinstance(value, dict) else {"string": value}
        for name, value in device["attributes"].items()
        if not isinstance(value, int)
    }
    capacity = {name: {"value": value} for name, value in device.get("capacity", {}).items()}
    return device_view({"driver": GPU_DRIVER, "attributes": attributes, "capacity": capacity})


def _as_declared(declared: dict, device: dict) -> bool:
    """Whether `device` publishes every entry of the kind's `declared` attributes and
    capacity, with the declared value (slices name them in the driver's domain)."""
    attributes = {
        f"{GPU_DRIVER}/{n}": v if isinstance(v, dict) else {"string": v}
        for n, v in device["attributes"].items()
    }
    capacity = {f"{GPU_DRIVER}/{n}": {"value": v} for n, v in device.get("capacity", {}).items()}
    return all(attributes.get(n) == v for n, v in declared.get("attributes", {}).items()) and all(
        capacity.get(n) == v for n, v in declared.get("capacity", {}).items()
    )


def test_a_declaring_state_declares_its_gpu_kind_and_claims_of_it_select_on_each_entry():
    assert len(DECLARING) > 20
    for state in DECLARING:
        gpu = state.pool.devices[0]
        entries = len(gpu.get("attributes", {})) + len(gpu.get("capacity", {}))
        assert entries > 0, f"seed {state.seed}: the GPU kind declares nothing"
        assert len(gpu["selectors"]) == entries
        assert all("selectors" not in kind for kind in state.pool.devices[1:])
        for step in state.steps:
            if step["op"] == "workload" and "nic.example.com" not in step["requests"]:
                attributes = [e for e in gpu["selectors"] if e.startswith("device.attributes")]
                assert step.get("selectors", []) == attributes


def test_no_selector_tests_the_absence_of_an_entry():
    assert not any("!has(" in e for state in DECLARING for e in state.pool.devices[0]["selectors"])


def test_the_selectors_are_true_on_the_declaration():
    for state in DECLARING:
        gpu = state.pool.devices[0]
        declared = device_view({**gpu, "driver": GPU_DRIVER})
        assert all(evaluate(e, declared)[0] == MATCH for e in gpu["selectors"]), state.seed


def test_the_selectors_take_the_devices_as_declared_and_no_other():
    as_declared = unlike = 0
    for state in DECLARING:
        gpu = state.pool.devices[0]
        of_kind = CLASSES[gpu["deviceClassName"]]
        for _, device in _gpu_devices_of(state):
            if evaluate(of_kind, _view(device))[0] != MATCH:
                continue
            taken = all(evaluate(e, _view(device))[0] == MATCH for e in gpu["selectors"])
            assert taken == _as_declared(gpu, device), (state.seed, device)
            as_declared += taken
            unlike += not taken
    assert as_declared and unlike


@pytest.mark.parametrize("variant", VARIANTS)
def test_some_gpus_are_unlike_the_declaration_in_each_way_whole_and_partitioned(variant):
    changed = {
        "older-driver": lambda d: d["attributes"].get("driverVersion") == {"version": "535.161.8"},
        "other-model": lambda d: d["attributes"]["model"] != "example-a100",
        "less-memory": lambda d: d["capacity"]["memory"] in ("19Gi", "4Gi", "9Gi"),
        "no-driver-version": lambda d: "driverVersion" not in d["attributes"],
    }[variant]
    devices = [d for state in DECLARING for _, d in _gpu_devices_of(state) if changed(d)]
    assert any(d["attributes"]["profile"] == "whole" for d in devices)
    assert any(d["attributes"]["profile"] != "whole" for d in devices)


def test_a_gpus_partitions_publish_what_the_gpu_does():
    for state in DECLARING:
        published: dict[tuple[str, int], set] = {}
        for node, device in _gpu_devices_of(state):
            attributes = {
                k: v for k, v in device["attributes"].items() if k not in ("type", "profile")
            }
            published.setdefault((node, device["attributes"]["index"]), set()).add(
                json.dumps(attributes, sort_keys=True)
            )
        assert all(len(seen) == 1 for seen in published.values()), state.seed


def test_a_node_mid_rollout_has_gpus_as_declared_beside_gpus_unlike_it():
    mixed = 0
    for state in DECLARING:
        gpu = state.pool.devices[0]
        for node in state.nodes:
            devices = [d for n, d in _gpu_devices_of(state) if n == node]
            kinds = {_as_declared(gpu, d) for d in devices}
            mixed += kinds == {True, False}
    assert mixed


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
