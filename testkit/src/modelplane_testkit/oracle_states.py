"""Seeded random cluster states for the live oracle test
(agent/tests/live/test_oracle.py), as plain data (no I/O).

A state is a pool (its PoolObservation: device kinds, tolerations, maybe a pod
smallest pod's requests) and a list of steps, each one API operation a driver, a user or an
operator would make, applied in order: nodes created, ResourceSlices
published (and republished under new names and generations), device taints,
workloads that kube-scheduler places, pods that take a node's cpu, memory or
pod slots, nodes cordoned or tainted late, network-attached slices, pods that
preempt others. Steps come in phases: devices, "observe" (the agent has
published them), workloads, "converge" (kube-scheduler decided every workload;
the refused are deleted), then maybe late changes (a preemption among them) and
a second wave of workloads the same way. The same seed and features give the
same state; a failing state is printed as this data, so it can be read and
replayed (`MODELPLANE_ORACLE_SEEDS=<seed>`).

Nothing here knows the agent's rules: the generator only builds situations,
kube-scheduler says what fits in them.

Features (each can be left out, or chosen alone, by name: `features_from`; those
in KNOWN_DISAGREEMENTS for the Kubernetes version under test only when named):
    republished-slices    a node's slices replaced by a newer generation under new
                          names (devices added or dropped, the old one deleted or
                          left behind), sometimes again after workloads ran
    incomplete-pools      resourceSliceCount above the slices published, also in
                          the middle of a republication
    invalid-pools         two slices of one pool publishing the same device name
    admin-access          workloads whose claims ask adminAccess
    device-taints         NoSchedule, NoExecute and None taints in the slices (on
                          devices that consume no counters)
    device-taint-rules    DeviceTaintRules (resource.k8s.io/v1alpha3), the same way
    partitionable-devices GPUs whose whole device and partitions share counters
    tainted-partitions    a taint or a DeviceTaintRule on such a device (kube-scheduler
                          v1.35.4 leaks the counters of a tainted candidate during its
                          search, kubernetes/kubernetes#140436: it may allocate less
                          than fits; by default from v1.36)
    shared-claims         one claim used by two pods
    cordoned-nodes        nodes cordoned, at creation or after workloads ran
    tainted-nodes         node taints: tolerated by the pool, untolerated
                          NoSchedule or NoExecute, PreferNoSchedule
    not-ready-nodes       Ready=False with the not-ready taint its controller sets
    node-resources        pods bound to a node taking its cpu, memory or pod slots
                          (up to or just short of the pool's minPodRequests)
    shared-pool-names     NICs published partitionable (halves sharing a NIC's
                          counters) in a resource pool named as the node's GPU pool:
                          two drivers' pools with shared counters and one name where
                          the GPUs are partitionable too (kube-scheduler v1.35 and
                          v1.36 mix their counters up, kubernetes/kubernetes#140434)
    device-class-edits    the pool's GPU kind uses a DeviceClass of the state's own,
                          whose selector is narrowed to one GPU index, or widened
                          back, after workloads ran
    terminal-pods         pods that reached Succeeded or Failed while holding a
                          claim: workloads kube-scheduler placed, finished after
                          they ran (the other pod of a shared claim may run on),
                          and pods bound before the state was observed whose claim
                          the state allocated (no kube-scheduler finalizer: their
                          allocation outlives them)
    pending-deallocations ResourceClaims allocated on a node's GPUs that no pod
                          uses: reservedFor empty, or naming a pod that never
                          existed; with kube-scheduler's finalizer or without
                          (which decides what kube-controller-manager deallocates:
                          below)
    network-attached-devices
                          ResourceSlices without nodeName, each a resource pool of
                          its own: for every node (allNodes), for the nodes a
                          nodeSelector matches (some of the state's by name or
                          label, the pools' members, all but some), or per device
                          (perDeviceNodeSelection: each device a nodeName, a
                          nodeSelector or allNodes), published before workloads
                          ran (their claims may take them) or after; GPUs of the
                          pool's kind, of another, or of none, or NICs (the agent
                          counts a device
                          pinned to one node by its nodeName there, the others on no
                          node, declaring them where a free one serves the node)
    preemption            PriorityClasses (100, 1000); on a node with GPUs, two
                          workloads of the low class taking 3 of its 8 cpus and a
                          device each, then a pod of the high class asking 4 or 7
                          cpus (and maybe a device): kube-scheduler preempts for the
                          cpu (no version preempts for devices: its DRA plugin has no
                          PreFilterExtensions, so a dry run without the victims still
                          sees their claims allocated). The victims' 30 s grace
                          period, with no kubelet to end it, keeps them terminating
                          and the preemptor nominated (status.nominatedNodeName): the
                          state is judged so, or once the victims are deleted and the
                          preemptor bound ("release"). Probes keep priority 0, no
                          higher than any workload's: they never preempt
    declared-devices      the pool declares its GPU kind's attributes (a semver
                          driverVersion, a string model) and/or its memory capacity,
                          as an InferenceCluster does; every GPU publishes them, but
                          on some nodes (every GPU alike, or some apart; a GPU's
                          partitions with it) an older driverVersion, another model,
                          less memory, or no driverVersion at all. Workloads and
                          every probe select on each declared entry, as
                          compose-model-replica writes a member's selectors into its
                          claim: true on the declaration, false on a device unlike it
                          in a value, a CEL runtime error on one lacking it (which
                          fails kube-scheduler's Filter on the node: a refusal). No
                          selector tests an entry's absence (`!has(...)`, the
                          exception design/observation.md states).

    consumable-capacity   devices that allow multiple allocations (KEP-5075), in a
                          resource pool of their own on the node, of the pool's GPU
                          kind or of a kind of their own ("vgpu"): a `memory`
                          capacity of 20Gi whose requestPolicy is a default alone,
                          a validRange or validValues (or none: a claim asking no
                          capacity takes all of it); workloads whose claims ask
                          capacity (3Gi, rounded up by the policy, to more than
                          the device has) or none, so several claims share a device
    binding-conditions    devices with bindingConditions and bindingFailureConditions
                          (KEP-5007; bindsToNode or not), of the pool's GPU kind, in
                          a resource pool of their own on the node; workloads that
                          kube-scheduler may give them (it tries such pools last).
                          The harness plays their driver: it reports the binding
                          conditions True on a claim allocated one, as kube-scheduler
                          waits for before it binds the pod (never a failure: kube-
                          scheduler would allocate the same device again)


The features after node-resources (LATER_FEATURES) are rolled with dice of their
own (`random.Random(f"{seed}-later")`), those after device-class-edits
(CLAIM_FEATURES) with others again (`f"{seed}-claims"`), each of those after
pending-deallocations (OWN_DICE_FEATURES) with its own (`f"{seed}-<name>"`),
declared-devices (DECLARATION_FEATURES) with its own (`f"{seed}-declared"`), and
consumable-capacity and binding-conditions (GATED_FEATURES) with others again
(`f"{seed}-gated"`), so adding them left every earlier seed's state as it was where
they are not used.

GATED_FEATURES need DRA feature gates (NEEDS_GATES) that a version of the matrix may
have off (GATES_OFF: v1.35.4, where they are alpha). There the API server would drop
their fields and the state would prove nothing, so such a feature is not run on that
version: the default and "all" leave it out, and naming it is refused.

The harness writes the allocation of a state's own claims ("allocated-claim" steps)
as an allocator does; kube-controller-manager's resourceclaim controller then
drops every reservedFor entry naming a pod that is gone or done, and clears the
allocation with it only where kube-scheduler's finalizer says kube-scheduler
allocated (k8s.io/kubernetes pkg/controller/resourceclaim, `syncClaim`; its
`syncPod` may name a finished pod bound without kube-scheduler again). The
harness waits for that reaction after each such step, so the agent and
kube-scheduler are judged on allocations the cluster holds still.
"""

from __future__ import annotations

import copy
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

GPU_DRIVER = "gpu.example.com"
NIC_DRIVER = "nic.example.com"
POOL_LABEL = "modelplane.ai/pool"
HOSTNAME = "kubernetes.io/hostname"
FLEET_TAINT = {"key": "modelplane.ai/fleet", "value": "gpu", "effect": "NoSchedule"}
FLEET_TOLERATION = {"operator": "Equal", **FLEET_TAINT}

# DeviceClass name -> its CEL selector. The driver test comes first: `&&` absorbs the
# error a missing attribute would raise on another driver's device.
CLASSES = {
    "whole-gpu.example.com": (
        f'device.driver == "{GPU_DRIVER}" && device.attributes["{GPU_DRIVER}"].type == "gpu"'
    ),
    "mig-1g.example.com": (
        f'device.driver == "{GPU_DRIVER}" && device.attributes["{GPU_DRIVER}"].profile == "1g"'
    ),
    "mig.example.com": (
        f'device.driver == "{GPU_DRIVER}" && device.attributes["{GPU_DRIVER}"].type == "mig"'
    ),
    "nic.example.com": f'device.driver == "{NIC_DRIVER}"',
    # Devices that allow multiple allocations, as a kind of their own ("consumable-capacity").
    "vgpu.example.com": (
        f'device.driver == "{GPU_DRIVER}" && device.attributes["{GPU_DRIVER}"].type == "vgpu"'
    ),
}

# A partitionable GPU: its counters, and the devices drawing on them (the whole GPU
# takes all; 4 x 1g or 2 x 2g fit together, or a mix).
GPU_COUNTERS = {"compute": "4", "memory": "20Gi"}
PROFILES = (("1g", 4, "1", "5Gi"), ("2g", 2, "2", "10Gi"))

# "declared-devices": what every GPU of a state using it publishes besides its type,
# profile and index (driverVersion, model; its memory by profile, in Gi), what the
# pool may declare of its GPU kind, as an InferenceCluster does (qualified names), and
# the request selector the fleet's claims carry for each entry declared, true on the
# declaration.
DRIVER_VERSION = {"version": "550.54.15"}
MODEL = "example-a100"
MEMORY_GI = {"whole": 20, "1g": 5, "2g": 10}
ATTRIBUTE_SELECTORS = {
    "driverVersion": (
        f'device.attributes["{GPU_DRIVER}"].driverVersion.isGreaterThan(semver("550.0.0"))'
    ),
    "model": f'device.attributes["{GPU_DRIVER}"].model == "{MODEL}"',
}
# The kinds whose devices all have one memory: the capacity such a kind may declare.
DECLARABLE_MEMORY = {"whole-gpu.example.com": "whole", "mig-1g.example.com": "1g"}
# How a GPU (the whole device and its partitions alike, as a driver publishes a
# partition with its GPU's attributes) may be unlike the declaration: each false under
# the selector of the entry it changes, or (no driverVersion) an error there.
VARIANTS = ("older-driver", "other-model", "less-memory", "no-driver-version")
# What a device that allows multiple allocations has ("consumable-capacity"), and the
# request policies its `memory` capacity may have (None: a claim asking none takes all).
SHARED_MEMORY = "20Gi"
REQUEST_POLICIES: tuple[dict[str, Any] | None, ...] = (
    {"default": "5Gi"},
    {"default": "5Gi", "validRange": {"min": "5Gi", "max": "20Gi", "step": "5Gi"}},
    {"default": "10Gi", "validRange": {"min": "4Gi"}},
    {"default": "10Gi", "validValues": ["5Gi", "10Gi", "20Gi"]},
    None,
)
# What a workload's claim asks of such a device's memory (None: nothing, the default).
CAPACITY_ASKED = (None, None, "3Gi", "5Gi", "10Gi", "20Gi", "25Gi")
# The conditions a device with binding conditions waits for ("binding-conditions").
BINDING_CONDITIONS = ["example.com/attached"]
BINDING_FAILURE_CONDITIONS = ["example.com/attach-failed"]

NODE_CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "20"}
MIN_POD_REQUESTS = {"cpu": "1", "memory": "4Gi"}

# Features added after the first thirteen, rolled with their own dice (see above).
LATER_FEATURES = ("shared-pool-names", "device-class-edits")
# Features added after those, rolled with dice of their own again.
CLAIM_FEATURES = ("terminal-pods", "pending-deallocations")
# Features added after those, each rolled with dice of its own (`f"{seed}-{name}"`).
OWN_DICE_FEATURES = ("network-attached-devices", "preemption")
# And declared-devices, with dice of its own once more (`f"{seed}-declared"`).
DECLARATION_FEATURES = ("declared-devices",)
# Features whose devices need DRA feature gates (NEEDS_GATES), rolled with dice of
# their own again.
GATED_FEATURES = ("consumable-capacity", "binding-conditions")
# The feature gates a feature's API fields and allocator paths need (k8s.io/api
# resource/v1 `Device`: allowMultipleAllocations and requestPolicy, bindingConditions).
NEEDS_GATES: dict[str, tuple[str, ...]] = {
    "consumable-capacity": ("DRAConsumableCapacity",),
    "binding-conditions": ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"),
}
# Of those gates, the ones off on each version of the matrix as the oracle runs it (its
# defaults, k8s.io/kubernetes pkg/features/kube_features.go, plus the gates
# modelplane_e2e.kube_versions turns on): DRAConsumableCapacity and
# DRADeviceBindingConditions are alpha on v1.35 and beta, on by default, from v1.36.
GATES_OFF: dict[str, frozenset[str]] = {
    "v1.35.4": frozenset({"DRAConsumableCapacity", "DRADeviceBindingConditions"}),
    "v1.36.3": frozenset(),
    "v1.37.2": frozenset(),
}
# The finalizer kube-scheduler puts on a claim it allocates: the resourceclaim
# controller deallocates only claims carrying it (k8s.io/api resource/v1 `Finalizer`).
SCHEDULER_FINALIZER = "resource.kubernetes.io/delete-protection"

FEATURES = (
    "republished-slices",
    "incomplete-pools",
    "invalid-pools",
    "admin-access",
    "device-taints",
    "device-taint-rules",
    "partitionable-devices",
    "tainted-partitions",
    "shared-claims",
    "cordoned-nodes",
    "tainted-nodes",
    "not-ready-nodes",
    "node-resources",
    *LATER_FEATURES,
    *CLAIM_FEATURES,
    *OWN_DICE_FEATURES,
    *DECLARATION_FEATURES,
    *GATED_FEATURES,
)

# The devices a network-attached resource pool publishes (attributes every DeviceClass
# of CLASSES reads, so that none fails on them): a whole GPU (whole-gpu.example.com), a
# 1g partition (mig-1g.example.com, mig.example.com), or a device no class selects.
FABRIC_GPUS = (
    {"type": "gpu", "profile": "whole"},
    {"type": "mig", "profile": "1g"},
    {"type": "fpga", "profile": "none"},
)
# PriorityClasses of the "preemption" feature: the workloads' and their preemptor's. The
# probes keep the default priority (0), below both: they never preempt anything.
LOW_PRIORITY, HIGH_PRIORITY = 100, 1000


# Features on which the agent and kube-scheduler are known to disagree, each with why,
# by Kubernetes version (every version of the matrix, modelplane_e2e.kube_versions,
# has its entry); left out on that version unless named (design/agent.md, "Tests"). The
# oracle keeps them so a fix, or a release with the allocator's fix, is measured by
# naming them.
KNOWN_DISAGREEMENTS: dict[str, dict[str, str]] = {
    "v1.35.4": {
        "tainted-partitions": "kube-scheduler v1.35.4 keeps a rejected tainted device's "
        "counters reserved for the rest of its search, so it allocates less than fits",
    },
    "v1.36.3": {},
    "v1.37.2": {},
}
OLDEST = "v1.35.4"


def runnable(kube_version: str = OLDEST) -> frozenset[str]:
    """Every feature whose gates (NEEDS_GATES) are on in `kube_version`."""
    off = GATES_OFF[kube_version]
    return frozenset(f for f in FEATURES if not off & set(NEEDS_GATES.get(f, ())))


def default_features(kube_version: str = OLDEST) -> frozenset[str]:
    """Every feature `kube_version` can run but those known to disagree on it."""
    return runnable(kube_version) - set(KNOWN_DISAGREEMENTS[kube_version])


def features_from(text: str, kube_version: str = OLDEST) -> frozenset[str]:
    """`""`: every feature but the known disagreements of `kube_version`; "all": every
    feature it can run; "none": none; "a,b": only those; "-a,-b": the default but those.
    Naming a feature whose gates are off on `kube_version` is refused."""
    if text.strip() == "none":
        return frozenset()
    if text.strip() == "all":
        return runnable(kube_version)
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = {n.lstrip("-") for n in names} - set(FEATURES)
    if unknown:
        raise ValueError(f"unknown oracle features {sorted(unknown)}; known: {', '.join(FEATURES)}")
    excluded = {n[1:] for n in names if n.startswith("-")}
    included = {n for n in names if not n.startswith("-")} or set(default_features(kube_version))
    gated_off = sorted(included - runnable(kube_version))
    if gated_off:
        gates = sorted({g for f in gated_off for g in NEEDS_GATES[f]} & GATES_OFF[kube_version])
        raise ValueError(
            f"oracle features {gated_off} need the feature gates {gates}, "
            f"off on Kubernetes {kube_version}"
        )
    return frozenset(included - excluded)


@dataclass
class Pool:
    name: str
    # [{name, driver, deviceClassName}], with "declared-devices" the GPU kind's declared
    # "attributes" and "capacity" (as the PoolObservation carries them) and the
    # "selectors" the fleet's claims of the kind carry (in no PoolObservation)
    devices: list[dict[str, Any]]
    tolerations: list[dict[str, str]]
    # The requests (cpu, memory) of the smallest pod the fleet places on the pool, if
    # declared (PoolObservation.spec.minPodRequests); every probe carries them.
    min_pod_requests: dict[str, str] | None


@dataclass
class State:
    seed: int
    features: list[str]  # the features this state uses (a subset of those enabled)
    pool: Pool
    nodes: list[str]  # every node of the state, members of the pool or not
    members: list[str]
    steps: list[dict[str, Any]] = field(default_factory=list)


def generate(seed: int, enabled: frozenset[str]) -> State:
    """The state of `seed` using some of the `enabled` features.

    Every feature's dice are rolled whether it is enabled or not, so leaving one out
    mostly keeps the rest of a seed's state as it was.
    """
    rng = random.Random(seed)
    dice_of_their_own = (
        *LATER_FEATURES,
        *CLAIM_FEATURES,
        *OWN_DICE_FEATURES,
        *DECLARATION_FEATURES,
        *GATED_FEATURES,
    )
    first = [f for f in FEATURES if f not in dice_of_their_own]
    used = [f for f in first if rng.random() < 0.6 and f in enabled]
    later = random.Random(f"{seed}-later")
    used += [f for f in LATER_FEATURES if later.random() < 0.6 and f in enabled]
    claims = random.Random(f"{seed}-claims")
    used += [f for f in CLAIM_FEATURES if claims.random() < 0.6 and f in enabled]
    own = {f: random.Random(f"{seed}-{f}") for f in OWN_DICE_FEATURES}
    used += [f for f in OWN_DICE_FEATURES if own[f].random() < 0.6 and f in enabled]
    declared = random.Random(f"{seed}-declared")
    used += [f for f in DECLARATION_FEATURES if declared.random() < 0.6 and f in enabled]
    gated = random.Random(f"{seed}-gated")
    used += [f for f in GATED_FEATURES if gated.random() < 0.6 and f in enabled]
    dice = Dice(later, claims, declared, gated, own)
    builder = _Builder(rng, seed, frozenset(used), dice)
    return builder.state()


@dataclass(frozen=True)
class Dice:
    """The dice of the features added later, apart from the first features' (see above)."""

    later: random.Random  # LATER_FEATURES'
    claims: random.Random  # CLAIM_FEATURES'
    declared: random.Random  # DECLARATION_FEATURES'
    gated: random.Random  # GATED_FEATURES'
    own: Mapping[str, random.Random] = field(default_factory=dict)  # OWN_DICE_FEATURES'

    def of(self, feature: str, first: random.Random) -> random.Random:
        if feature in self.own:
            return self.own[feature]
        if feature in LATER_FEATURES:
            return self.later
        if feature in DECLARATION_FEATURES:
            return self.declared
        if feature in GATED_FEATURES:
            return self.gated
        return self.claims if feature in CLAIM_FEATURES else first


class _Builder:
    def __init__(self, rng: random.Random, seed: int, features: frozenset[str], dice: Dice) -> None:
        self.rng = rng
        self.dice = dice
        self.later = dice.later  # the LATER_FEATURES' dice
        self.claims = dice.claims  # the CLAIM_FEATURES' dice
        self.seed = seed
        self.features = features
        self.prefix = f"s{seed}"
        # The state's phases, in order; "observe" between them lets the agent publish
        # what came before (a driver republishes long before the next pod arrives).
        self.steps: list[dict[str, Any]] = []  # nodes, slices, taints, hogs
        self.work: list[dict[str, Any]] = []  # workloads
        self.late: list[dict[str, Any]] = []  # node changes, republications after workloads
        self.late_work: list[dict[str, Any]] = []  # workloads after those
        self.published: dict[str, list[str]] = {}  # node -> its GPU pool's current slices
        self.narrowed = False  # the state's own DeviceClass, as created ("device-class-edits")
        # "declared-devices": how each node's GPUs are unlike the declaration (the same
        # variant for all, or one per GPU, or none), and each GPU's (node, index) variant.
        self.rollouts: dict[str, tuple[str | None, str]] = {}
        self.variants: dict[tuple[str, int], str | None] = {}
        self.selectors: list[str] = []  # the GPU kind's request selectors
        self.gpu_class = "whole-gpu.example.com"  # the pool's GPU kind's class, as CLASSES names it
        self.shared_class = ""  # the kind of its own of shared devices, if any

    def on(self, feature: str, chance: float) -> bool:
        roll = self.dice.of(feature, self.rng).random()
        return feature in self.features and roll < chance

    def state(self) -> State:
        rng = self.rng
        gpu_class = rng.choice(["whole-gpu.example.com", "mig-1g.example.com", "mig.example.com"])
        if "partitionable-devices" not in self.features:
            gpu_class = "whole-gpu.example.com"
        devices: list[dict[str, Any]] = [
            {"name": "gpu", "driver": GPU_DRIVER, "deviceClassName": self.own_class(gpu_class)}
        ]
        if rng.random() < 0.5:
            devices.append(
                {"name": "nic", "driver": NIC_DRIVER, "deviceClassName": "nic.example.com"}
            )
        devices[0].update(self.declaration(gpu_class))
        self.gpu_class = gpu_class
        if self.on("consumable-capacity", 0.5):  # else shared devices are of the GPU kind
            self.shared_class = "vgpu.example.com"
            devices.append(
                {"name": "vgpu", "driver": GPU_DRIVER, "deviceClassName": self.shared_class}
            )
        declared = rng.random() < 0.5 or "node-resources" in self.features
        smallest = dict(MIN_POD_REQUESTS) if declared else None
        pool = Pool(self.prefix, devices, [FLEET_TOLERATION], smallest)
        count = rng.randint(3, 6)
        names = [f"{self.prefix}-n{i}" for i in range(count)]
        members = [n for n in names if n != names[-1] or rng.random() < 0.7]
        partitioned = {
            n for n in names if "partitionable-devices" in self.features and rng.random() < 0.6
        }
        if gpu_class != "whole-gpu.example.com" and not partitioned:
            partitioned.add(names[0])
        if "preemption" in self.features:
            self.steps += [
                {"op": "priority-class", "name": f"{self.prefix}-low", "value": LOW_PRIORITY},
                {"op": "priority-class", "name": f"{self.prefix}-high", "value": HIGH_PRIORITY},
            ]
        for name in names:
            self.node(name, name in members, name in partitioned)
        self.network(names, nics=any(d["driver"] == NIC_DRIVER for d in devices))
        self.edit_class(gpu_class)
        steps = [*self.steps, {"op": "observe"}, *self.work, {"op": "converge"}]
        if self.late or self.late_work:
            steps += [*self.late, {"op": "observe"}, *self.late_work, {"op": "converge"}]
        return State(self.seed, sorted(self.features), pool, names, members, steps)

    def own_class(self, gpu_class: str) -> str:
        """The GPU kind's DeviceClass: with "device-class-edits" one of the state's own
        (created first, as `gpu_class` selects, or narrowed to GPU index 0), else
        `gpu_class` itself."""
        if "device-class-edits" not in self.features:
            return gpu_class
        name = f"{self.prefix}-{gpu_class}"
        narrow = self.later.random() < 0.5
        self.steps.append(
            {"op": "device-class", "name": name, "expression": _narrowed(gpu_class, narrow)}
        )
        self.narrowed = narrow
        return name

    def edit_class(self, gpu_class: str) -> None:
        """After workloads ran, the state's own DeviceClass narrowed, or widened back."""
        if "device-class-edits" in self.features:
            name = f"{self.prefix}-{gpu_class}"
            edited = _narrowed(gpu_class, not self.narrowed)
            self.late.append({"op": "device-class", "name": name, "expression": edited})

    def declaration(self, gpu_class: str) -> dict[str, Any]:
        """With "declared-devices", what the pool declares its GPU kind has (some of the
        attributes every GPU publishes, and its memory where the kind's devices all
        have one), and the request selectors the fleet's claims carry for the kind: one
        per entry declared, true on the declaration, so that no claim gets a device
        unlike it. No selector tests an entry's absence (`!has(...)`)."""
        if "declared-devices" not in self.features:
            return {}
        dice = self.dice.declared
        attributes = [name for name in ATTRIBUTE_SELECTORS if dice.random() < 0.6]
        profile = DECLARABLE_MEMORY.get(gpu_class)
        memory = profile is not None and dice.random() < 0.6
        if not attributes and not memory:
            attributes = ["driverVersion"]
        typed = {"driverVersion": dict(DRIVER_VERSION), "model": {"string": MODEL}}
        out: dict[str, Any] = {
            "attributes": {f"{GPU_DRIVER}/{name}": typed[name] for name in attributes}
        }
        self.selectors = [ATTRIBUTE_SELECTORS[name] for name in attributes]
        if memory and profile is not None:
            amount = f"{MEMORY_GI[profile]}Gi"
            out["capacity"] = {f"{GPU_DRIVER}/memory": {"value": amount}}
            self.selectors.append(
                f'device.capacity["{GPU_DRIVER}"].memory.compareTo(quantity("{amount}")) >= 0'
            )
        return {**out, "selectors": list(self.selectors)}

    def dress(self, node: str, devices: list[dict]) -> None:
        """With "declared-devices", what `node`'s GPU devices publish: the declared values,
        or (a node mid driver rollout: every GPU alike, or some GPUs apart) a variant."""
        if "declared-devices" not in self.features:
            return
        dice = self.dice.declared
        if node not in self.rollouts:
            self.rollouts[node] = (dice.choice([None, None, "node", "gpu"]), dice.choice(VARIANTS))
        rollout, every = self.rollouts[node]
        for device in devices:
            key = (node, device["attributes"]["index"])
            if key not in self.variants:
                apart = dice.choice([None, *VARIANTS])  # rolled whatever the rollout
                self.variants[key] = every if rollout == "node" else apart if rollout else None
            _publish(device, self.variants[key])

    # ------------------------------------------------------------------ one node

    def node(self, name: str, member: bool, partitioned: bool) -> None:
        rng = self.rng
        labels = {HOSTNAME: name, **({POOL_LABEL: self.prefix} if member else {})}
        capacity, hogs = self.hogs()
        change = self.conditions()
        late = rng.random() < 0.5
        node = {"op": "node", "name": name, "labels": labels, "capacity": capacity}
        self.steps.append(node if late else {**node, **change})
        for i, requests in enumerate(hogs):
            self.steps.append(
                {"op": "hog", "name": f"{name}-hog{i}", "node": name, "requests": requests}
            )
        gpus = rng.randint(1, 2) if partitioned else rng.randint(0, 4)
        inventory = _gpu_devices(gpus, partitioned)
        self.dress(name, inventory)
        self.taint_devices(name, inventory)
        self.slices(name, inventory, partitioned, generation=1, into=self.steps)
        if self.on("republished-slices", 0.6):
            changed = [dict(d) for d in inventory]
            if not partitioned and changed and rng.random() < 0.4:
                changed = changed[:-1] if rng.random() < 0.5 else [*changed, _gpu(len(changed))]
                self.dress(name, changed)  # a GPU added publishes as the others do
            self.republish(name, changed, partitioned, generation=2, into=self.steps)
        nics = rng.choice([0, 2, 4])
        if nics and self.on("shared-pool-names", 0.6):
            self.steps.extend(_partitionable_nics(name, nics))
        elif nics:
            nic_devices = [{"name": f"nic-{i}", "attributes": {"index": i}} for i in range(nics)]
            self.steps.append(
                _slice(
                    f"{name}-nics", name, SlicePool(NIC_DRIVER, f"{name}-nics", 1, 1), nic_devices
                )
            )
        self.hold(name, inventory)
        gated = [*self.shared_devices(name), *self.bound_devices(name)]
        first_wave = self.workloads(name, gpus, partitioned, nics, wave=1)
        self.work.extend(first_wave)
        self.work.extend(gated)
        self.finish(first_wave)
        self.preempt(name, gpus, partitioned)
        if late and change:
            self.late.append({"op": "node-update", "name": name, **change})
        if self.on("republished-slices", 0.25):
            # Republished again after workloads ran: their allocations must stay counted.
            self.republish(name, inventory, partitioned, generation=3, into=self.late)
            self.late_work.extend(self.workloads(name, gpus, partitioned, nics, wave=2))

    def hogs(self) -> tuple[dict[str, str], list[dict[str, str]]]:
        """The node's capacity and the requests of the pods bound to it outside any pool."""
        capacity = dict(NODE_CAPACITY)
        if self.on("node-resources", 0.2):
            capacity["pods"] = "2"
            return capacity, [{}, {}]
        if self.on("node-resources", 0.4):
            resource = self.rng.choice(["cpu", "memory"])
            short = self.rng.random() < 0.7  # else exactly the smallest pod fits
            return capacity, [{resource: _leave(resource, short)}]
        return capacity, []

    def conditions(self) -> dict[str, Any]:
        """Cordon, taints, readiness (applied at the node's creation or after workloads)."""
        rng = self.rng
        change: dict[str, Any] = {}
        if self.on("cordoned-nodes", 0.3):
            change["unschedulable"] = True
        if self.on("tainted-nodes", 0.4):
            change["taints"] = [
                rng.choice(
                    [
                        FLEET_TAINT,
                        {"key": "maintenance", "effect": "NoSchedule"},
                        {"key": "maintenance", "effect": "NoExecute"},
                        {"key": "maintenance", "effect": "PreferNoSchedule"},
                    ]
                )
            ]
        if self.on("not-ready-nodes", 0.25):
            change["ready"] = False
            not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
            change["taints"] = [*change.get("taints", []), not_ready]
        return change

    # ------------------------------------------------------------------ devices

    def taint_devices(self, node: str, inventory: list[dict]) -> None:
        """Taints in the slices, or DeviceTaintRules, on some devices: on devices that
        consume no counters ("device-taints", "device-taint-rules"), or on devices that do
        ("tainted-partitions")."""
        plain = [d for d in inventory if "consumes" not in d]
        shared = [d for d in inventory if "consumes" in d]
        if self.on("device-taints", 0.5) and plain:
            self.taint_in_slices(plain)
        if self.on("device-taint-rules", 0.4) and plain:
            self.taint_rule(node, plain)
        if self.on("tainted-partitions", 0.6) and shared:
            if self.rng.random() < 0.5:
                self.taint_in_slices(shared)
            else:
                self.taint_rule(node, shared)

    def taint_in_slices(self, devices: list[dict]) -> None:
        for device in self.rng.sample(devices, min(len(devices), self.rng.randint(1, 2))):
            effect = self.rng.choice(["NoSchedule", "NoExecute", "None"])
            device["taints"] = [{"key": "example.com/unhealthy", "effect": effect}]

    def taint_rule(self, node: str, devices: list[dict]) -> None:
        """A rule naming one device of the node's GPU pool by driver, pool and name, or the
        whole pool; without partitionable devices in the state (a rule reaching past the
        node could taint one), also one naming a device name in every pool, or one with
        no selector at all (every device of the cluster)."""
        device = self.rng.choice(devices)
        reach = ["device", "device", "pool"]
        if "partitionable-devices" not in self.features:
            # Partitionable NICs ("shared-pool-names") are named apart from GPUs, and a
            # rule on every device leaves no partition of theirs untainted.
            reach += ["name", "everything"]
        selector = {
            "device": {"driver": GPU_DRIVER, "pool": node, "device": device["name"]},
            "pool": {"driver": GPU_DRIVER, "pool": node},
            "name": {"device": device["name"]},
            "everything": None,
        }[self.rng.choice(reach)]
        self.steps.append(
            {
                "op": "taint-rule",
                "name": f"{node}-{device['name']}",
                "selector": selector,
                "effect": self.rng.choice(["NoSchedule", "NoExecute", "None"]),
                "consumesCounters": "consumes" in device,
            }
        )

    def republish(
        self, node: str, inventory: list[dict], partitioned: bool, generation: int, into: list
    ) -> None:
        """As a driver does: the new generation under new names first, then the old one
        deleted (or, sometimes, left behind); the new one may be published only in part."""
        old = self.published.get(node, [])
        before = len(into)
        self.slices(node, inventory, partitioned, generation, into)
        new = into[before:]
        if self.on("incomplete-pools", 0.3) and len(new) > 1:
            missing = new[self.rng.randrange(len(new))]
            into.remove(missing)  # one slice of the new generation not published yet
            self.published[node].remove(missing["name"])
        if self.rng.random() < 0.8:
            into.extend({"op": "delete-slice", "name": n} for n in old)

    def slices(
        self, node: str, inventory: list[dict], partitioned: bool, generation: int, into: list
    ) -> None:
        """One generation of the node's GPU pool, split over one or more slices."""
        rng = self.rng
        parts = [inventory] if len(inventory) < 2 or rng.random() < 0.6 else _split(inventory, rng)
        groups: list[tuple[list[dict], list[dict]]] = [(p, []) for p in parts]
        if partitioned:  # in v1.35 counters and the devices drawing on them are in separate slices
            counters = [
                {"name": d["consumes"]["counterSet"], "counters": dict(GPU_COUNTERS)}
                for d in inventory
                if d["attributes"]["type"] == "gpu"
            ]
            groups.append(([], counters))
        if self.on("invalid-pools", 0.25) and inventory:
            groups.append(([dict(rng.choice(inventory), taints=[])], []))  # a duplicate name
        declared = len(groups)
        if generation == 1 and self.on("incomplete-pools", 0.3):
            declared += 1  # a slice the driver has not published (yet)
        names = [f"{node}-gpus-g{generation}-{i}" for i in range(len(groups))]
        pool = SlicePool(GPU_DRIVER, node, generation, declared)
        for slice_name, (devices, counters) in zip(names, groups, strict=True):
            into.append(_slice(slice_name, node, pool, devices, counters))
        self.published[node] = names

    def network(self, nodes: list[str], nics: bool) -> None:
        """Network-attached resource pools ("network-attached-devices"), one or two, each
        in a slice of its own without `nodeName`: for every node (`allNodes`), for the
        nodes a selector matches (some of the state's, its pool's members, all but
        some), or per device (`perDeviceNodeSelection`, each device naming a node, a
        selector or every node). Their devices are GPUs of a kind the pool counts or of
        none (`FABRIC_GPUS`), or NICs where the pool counts NICs."""
        if "network-attached-devices" not in self.features:
            return
        dice = self.dice.own["network-attached-devices"]
        ways = dice.sample(["all-nodes", "node-selector", "per-device"], dice.randint(1, 2))
        for i, way in enumerate(ways):
            driver = NIC_DRIVER if nics and dice.random() < 0.3 else GPU_DRIVER
            devices = []
            for j in range(dice.randint(1, 2)):
                attributes: dict[str, Any] = {"index": 10 + j}
                if driver == GPU_DRIVER:
                    attributes = {**dice.choice(FABRIC_GPUS), "index": 10 + j}
                device: dict[str, Any] = {"name": f"fabric-{j}", "attributes": attributes}
                if way == "per-device":
                    device.update(_device_reach(nodes, dice))
                devices.append(device)
            reach = {
                "all-nodes": lambda: {"allNodes": True},
                "node-selector": lambda: {"nodeSelector": _node_selector(nodes, dice)},
                "per-device": lambda: {"perDeviceNodeSelection": True},
            }[way]()
            pool = f"{self.prefix}-fabric{i}"
            # Published before workloads ran (which may take its devices), or after.
            into = self.steps if dice.random() < 0.5 else self.late
            into.append(
                {
                    **_slice(pool, "", SlicePool(driver, pool, 1, 1), devices),
                    "node": None,
                    "reach": reach,
                }
            )

    def shared_devices(self, node: str) -> list[dict]:
        """Devices that allow multiple allocations ("consumable-capacity"), in a resource
        pool of their own on `node`; returns workloads whose claims share them."""
        if not self.on("consumable-capacity", 0.7):
            return []
        dice = self.dice.gated
        device_class = self.shared_class or self.gpu_class
        devices = []
        for i in range(dice.randint(1, 2)):
            capacity: dict[str, Any] = {"value": SHARED_MEMORY}
            policy = dice.choice(REQUEST_POLICIES)
            if policy is not None:
                capacity["requestPolicy"] = copy.deepcopy(policy)
            devices.append(
                {
                    "name": f"shared-{i}",
                    "attributes": _kind_attributes(device_class, 8 + i),
                    "allowMultipleAllocations": True,
                    "capacity": {"memory": capacity},
                }
            )
        pool = SlicePool(GPU_DRIVER, f"{node}-shared", 1, 1)
        self.steps.append(_slice(f"{node}-shared", node, pool, devices))
        return [
            _workload(
                f"{node}-share{i}",
                node,
                {device_class: dice.randint(1, len(devices))},
                extra={"capacity": dice.choice(CAPACITY_ASKED)},
            )
            for i in range(dice.randint(0, 4))
        ]

    def bound_devices(self, node: str) -> list[dict]:
        """Devices of the pool's GPU kind with binding conditions ("binding-conditions"),
        in a resource pool of their own on `node`; returns workloads that may get them."""
        if not self.on("binding-conditions", 0.7):
            return []
        dice = self.dice.gated
        devices = [
            {
                "name": f"attached-{i}",
                "attributes": _kind_attributes(self.gpu_class, 12 + i),
                "bindingConditions": list(BINDING_CONDITIONS),
                "bindingFailureConditions": list(BINDING_FAILURE_CONDITIONS),
                "bindsToNode": dice.random() < 0.5,
            }
            for i in range(dice.randint(1, 2))
        ]
        pool = SlicePool(GPU_DRIVER, f"{node}-attached", 1, 1)
        self.steps.append(_slice(f"{node}-attached", node, pool, devices))
        return [
            _workload(f"{node}-attach{i}", node, {self.gpu_class: dice.randint(1, 2)})
            for i in range(dice.randint(0, 2))
        ]

    # ------------------------------------------------------------------ claims

    def hold(self, node: str, inventory: list[dict]) -> None:
        """Claims the state allocates on some of `node`'s GPUs before workloads run, each
        on GPUs of its own (one device each: a partitionable GPU's counters fit any one).
        The holder: "Succeeded" or "Failed", a pod bound to `node` that finished holding
        it, maybe after asking most of the node's cpu or memory ("terminal-pods");
        "none", no pod and reservedFor empty, or "ghost", reservedFor naming a pod
        (`uid`) that never existed ("pending-deallocations")."""
        dice = self.claims
        indices = sorted({d["attributes"]["index"] for d in inventory})
        dice.shuffle(indices)
        holders = []
        if self.on("terminal-pods", 0.4):
            holders.append(dice.choice(["Succeeded", "Failed"]))
        if self.on("pending-deallocations", 0.5):
            holders.append(dice.choice(["none", "ghost"]))
        for i, holder in enumerate(holders):
            if not indices:
                return
            ghost = str(uuid.UUID(int=dice.getrandbits(128)))
            # What the finished pod asked of its node: room it no longer takes.
            requests = dice.choice([{}, {"cpu": "7500m"}, {"memory": "29Gi"}])
            taken = [indices.pop() for _ in range(dice.randint(1, min(2, len(indices))))]
            devices = [
                dice.choice([d for d in inventory if d["attributes"]["index"] == g]) for g in taken
            ]
            self.steps.append(
                {
                    "op": "allocated-claim",
                    "name": f"{node}-held{i}",
                    "node": node,
                    "devices": [
                        {"driver": GPU_DRIVER, "pool": node, "device": d["name"]} for d in devices
                    ],
                    "holder": holder,
                    **({"uid": ghost} if holder == "ghost" else {}),
                    **({"requests": requests} if holder in ("Succeeded", "Failed") else {}),
                    "finalizer": dice.random() < 0.5,
                }
            )

    def finish(self, workloads: list[dict]) -> None:
        """After the first wave ran, some of its pods reach Succeeded or Failed (of a
        claim shared by two pods, maybe only one: the other keeps it reserved)."""
        for workload in workloads:
            if not self.on("terminal-pods", 0.4):
                continue
            pods = [f"{workload['name']}-p{i}" for i in range(workload["pods"])]
            if len(pods) > 1 and self.claims.random() < 0.5:
                pods = pods[:1]
            phase = self.claims.choice(["Succeeded", "Failed"])
            self.late.append({"op": "finish", "pods": pods, "phase": phase})

    # ------------------------------------------------------------------ workloads

    def preempt(self, node: str, gpus: int, partitioned: bool) -> None:
        """("preemption") Two workloads of the low PriorityClass, each taking 3 of the
        node's 8 cpus and a device; after they ran, a pod of the high class asking for
        more cpu than they leave (maybe a device too), pinned to the node: kube-scheduler
        preempts one or both (or none, where it cannot make room: the pod is then
        deleted). The victims have a grace period and no kubelet ends them: they stay
        terminating, holding their cpu and devices, and the preemptor nominated to the
        node, unless the step `release`s them (deleted at once: the preemptor binds)."""
        if not gpus or not self.on("preemption", 0.5):
            return
        dice = self.dice.own["preemption"]
        kind = "mig-1g.example.com" if partitioned else "whole-gpu.example.com"
        for i in range(2):
            self.work.append(
                _workload(
                    f"{node}-low{i}",
                    node,
                    {kind: 1},
                    extra={"priorityClass": f"{self.prefix}-low", "cpu": "3", "gracePeriod": 30},
                )
            )
        self.late.append(
            {
                "op": "preempt",
                "name": f"{node}-preemptor",
                "node": node,
                "requests": {kind: 1} if dice.random() < 0.5 else {},
                "priorityClass": f"{self.prefix}-high",
                "cpu": dice.choice(["4", "7"]),
                "release": dice.random() < 0.5,
            }
        )

    def workloads(
        self, node: str, gpus: int, partitioned: bool, nics: int, wave: int
    ) -> list[dict]:
        """Pods kube-scheduler places on `node`, each with one claim; those it cannot
        place are deleted once every workload is decided ("converge")."""
        rng = self.rng
        choices: list[tuple[str, int]] = []
        if gpus:
            choices.append(("whole-gpu.example.com", gpus))
        if partitioned:
            choices += [("mig-1g.example.com", 4 * gpus), ("mig.example.com", 4 * gpus)]
        if nics:
            choices.append(("nic.example.com", nics))
        steps = []
        for i in range(rng.randint(0, 3) if choices else 0):
            device_class, most = rng.choice(choices)
            admin = self.on("admin-access", 0.3)
            steps.append(
                _workload(
                    f"{node}-w{wave}{i}",
                    node,
                    {device_class: rng.randint(1, most)},
                    admin,
                    2 if self.on("shared-claims", 0.3) else 1,
                    extra=self.selecting(device_class),
                )
            )
        if gpus and self.on("admin-access", 0.3):
            steps.insert(
                rng.randint(0, len(steps)),
                _workload(
                    f"{node}-admin{wave}",
                    node,
                    {"whole-gpu.example.com": gpus},
                    True,
                    extra=self.selecting("whole-gpu.example.com"),
                ),
            )
        return steps

    def selecting(self, device_class: str) -> dict[str, list[str]]:
        """With "declared-devices", the selectors a workload's claim of `device_class` carries:
        those of the declared attributes, which every GPU device of the kind has (not the
        memory: the classes' devices differ in it), as the fleet's claims do."""
        if "declared-devices" not in self.features or device_class == "nic.example.com":
            return {}
        attributes = [e for e in self.selectors if e.startswith("device.attributes")]
        return {"selectors": attributes} if attributes else {}


def _node_selector(nodes: list[str], dice: random.Random) -> dict:
    """A node selector of one term matching some of `nodes` by name (a label; one by its
    name field), every member of some pool, or every node but some."""
    some = sorted(dice.sample(nodes, dice.randint(1, len(nodes))))
    term = dice.choice(
        [
            {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": some}]},
            # The API allows one value in a field requirement.
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": some[:1]}]},
            {"matchExpressions": [{"key": POOL_LABEL, "operator": "Exists"}]},
            {"matchExpressions": [{"key": HOSTNAME, "operator": "NotIn", "values": some}]},
        ]
    )
    return {"nodeSelectorTerms": [term]}


def _device_reach(nodes: list[str], dice: random.Random) -> dict:
    """Which nodes one device of a `perDeviceNodeSelection` slice serves."""
    way = dice.choice(["nodeName", "nodeSelector", "allNodes"])
    if way == "nodeName":
        return {"nodeName": dice.choice(nodes)}
    return {"nodeSelector": _node_selector(nodes, dice)} if way == "nodeSelector" else {way: True}


def _narrowed(gpu_class: str, narrow: bool) -> str:
    """`gpu_class`'s selector, or (`narrow`) only the devices of GPU index 0."""
    expression = CLASSES[gpu_class]
    return f'{expression} && device.attributes["{GPU_DRIVER}"].index == 0' if narrow else expression


def _kind_attributes(device_class: str, index: int) -> dict:
    """Attributes by which `device_class` (of CLASSES) selects a device, GPU `index`
    (past the node's GPUs: a class narrowed to GPU 0 leaves it out)."""
    kind = {
        "whole-gpu.example.com": {"type": "gpu", "profile": "whole"},
        "mig-1g.example.com": {"type": "mig", "profile": "1g"},
        "mig.example.com": {"type": "mig", "profile": "2g"},
        "vgpu.example.com": {"type": "vgpu", "profile": "shared"},
    }[device_class]
    return {**kind, "index": index}


def _partitionable_nics(node: str, nics: int) -> list[dict]:
    """The node's NICs as a partitionable driver publishes them, in a resource pool named
    as its GPU pool: each NIC's two halves share its counters (both fit together), the
    counter sets in a slice of their own (v1.35)."""
    halves = [
        {
            "name": f"nic-{i}-half-{j}",
            "attributes": {"index": i},
            "consumes": {"counterSet": f"nic-{i}", "counters": {"lanes": "4"}},
        }
        for i in range(nics)
        for j in range(2)
    ]
    counters = [{"name": f"nic-{i}", "counters": {"lanes": "8"}} for i in range(nics)]
    pool = SlicePool(NIC_DRIVER, node, 1, 2)
    return [
        _slice(f"{node}-nics", node, pool, halves),
        _slice(f"{node}-nic-counters", node, pool, [], counters),
    ]


def _leave(resource: str, short: bool) -> str:
    """A request that leaves the pool's smallest pod's `resource` on a node, or just short."""
    if resource == "cpu":
        return "7500m" if short else "7"
    return "29Gi" if short else "28Gi"


def _publish(device: dict, variant: str | None) -> None:
    """Write what a GPU device publishes under "declared-devices": the declared values,
    unless `variant` changes one (or, "no-driver-version", leaves driverVersion out)."""
    attributes = {**device["attributes"], "driverVersion": dict(DRIVER_VERSION), "model": MODEL}
    memory = MEMORY_GI[device["attributes"]["profile"]]
    if variant == "older-driver":
        attributes["driverVersion"] = {"version": "535.161.8"}
    elif variant == "other-model":
        attributes["model"] = "example-l4"
    elif variant == "less-memory":
        memory -= 1
    elif variant == "no-driver-version":
        del attributes["driverVersion"]
    device["attributes"] = attributes
    device["capacity"] = {"memory": f"{memory}Gi"}


def _gpu(index: int) -> dict:
    return {
        "name": f"gpu-{index}",
        "attributes": {"type": "gpu", "profile": "whole", "index": index},
    }


def _gpu_devices(gpus: int, partitioned: bool) -> list[dict]:
    devices = []
    for g in range(gpus):
        whole = _gpu(g)
        if not partitioned:
            devices.append(whole)
            continue
        whole["consumes"] = {"counterSet": f"gpu-{g}", "counters": dict(GPU_COUNTERS)}
        devices.append(whole)
        for profile, count, compute, memory in PROFILES:
            for j in range(count):
                devices.append(
                    {
                        "name": f"gpu-{g}-{profile}-{j}",
                        "attributes": {"type": "mig", "profile": profile, "index": g},
                        "consumes": {
                            "counterSet": f"gpu-{g}",
                            "counters": {"compute": compute, "memory": memory},
                        },
                    }
                )
    return devices


def _split(inventory: list[dict], rng: random.Random) -> list[list[dict]]:
    cut = rng.randint(1, len(inventory) - 1)
    return [inventory[:cut], inventory[cut:]]


@dataclass(frozen=True)
class SlicePool:
    """The DRA pool a slice belongs to: its driver and name, the generation the slice is
    of and how many slices that generation has (resourceSliceCount)."""

    driver: str
    name: str
    generation: int
    slices: int


def _workload(
    name: str,
    node: str,
    requests: Mapping[str, int],
    admin: bool = False,
    pods: int = 1,
    extra: Mapping[str, Any] | None = None,
) -> dict:
    """A workload step: `pods` pods pinned to `node` sharing one claim of `requests`
    (device class -> count), with whatever else the feature adds (`extra`)."""
    return {
        "op": "workload",
        "name": name,
        "node": node,
        "requests": dict(requests),
        "adminAccess": admin,
        "pods": pods,
        **(extra or {}),
    }


def _slice(
    name: str, node: str, pool: SlicePool, devices: list[dict], counters: list[dict] | None = None
) -> dict:
    return {
        "op": "slice",
        "name": name,
        "node": node,
        "driver": pool.driver,
        "pool": pool.name,
        "generation": pool.generation,
        "resourceSliceCount": pool.slices,
        "devices": devices,
        "sharedCounters": counters or [],
    }
