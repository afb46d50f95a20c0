"""The Kubernetes versions the agent is proven on: one patch release per supported
minor (design/agent.md, "Version matrix").

A `KubeVersion` is what a workload cluster of that minor runs: where its
kube-apiserver, kube-controller-manager and kube-scheduler are (built from the
module in tools/ that pins it, by the scripts/e2e-tools.sh target it names), the
feature gates and API versions it is started with, and the version it serves
DeviceTaintRule as. etcd and kubectl are the shared ones in .tools/bin for every
minor (etcd v3.6 is what v1.35 to v1.37 are released with; kubectl only creates and
reads objects here).

Each minor runs what its users get by default; the only additions are the gates
and API versions DeviceTaintRules need while they are off by default, so that the
agent's reading of them is proven on every minor:

- v1.35.4: DRADeviceTaints, DRADeviceTaintRules and DRAPartitionableDevices (all
  alpha, off by default) and `resource.k8s.io/v1alpha3` served; DRAAdminAccess
  (beta, on) named anyway, so a change of default cannot turn it off unnoticed.
- v1.36.3: DRADeviceTaintRules (beta, off by default: it depends on the off-by-default
  beta API) and `resource.k8s.io/v1beta2/devicetaintrules` served. DRADeviceTaints,
  DRAPartitionableDevices, DRAConsumableCapacity, DRADeviceBindingConditions and
  DRAExtendedResource are beta and on by default; DRAAdminAccess and
  DRAPrioritizedList are GA.
- v1.37.2: nothing: DRADeviceTaints and DRADeviceTaintRules are GA and on,
  DeviceTaintRule is served as `resource.k8s.io/v1`, DRAPartitionableDevices,
  DRAConsumableCapacity and DRADeviceBindingConditions are beta and on,
  DRAResourceClaimDeviceStatus is GA.

So the oracle's features that need DRAConsumableCapacity or DRADeviceBindingConditions
(`oracle_states.GATED_FEATURES`) run by default on v1.36.3 and v1.37.2, CI's v1.37.2
leg included, and not at all on v1.35.4, where those gates are alpha and off
(`oracle_states.GATES_OFF`).

(k8s.io/kubernetes pkg/features/kube_features.go and pkg/controlplane/instance.go of
each version say so.) `MODELPLANE_KUBE_VERSION` chooses the version the agent's live
tests and the oracle run on (`selected`); the rest of the e2e runs `DEFAULT`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from modelplane_devtools.paths import ROOT

VERSION_ENV = "MODELPLANE_KUBE_VERSION"
# The commands each version's own build provides; everything else is shared.
COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


@dataclass(frozen=True)
class KubeVersion:
    version: str  # "v1.37.2"
    bin: Path  # its COMMANDS
    build: str  # the command that builds them
    feature_gates: tuple[str, ...]  # on in every component
    runtime_config: tuple[str, ...]  # kube-apiserver's --runtime-config
    device_taint_rules: str  # the resource.k8s.io version DeviceTaintRule is served as

    @property
    def minor(self) -> str:
        return self.version.lstrip("v").rsplit(".", 1)[0]


def _newer_minor(
    version: str, gates: tuple[str, ...], runtime_config: tuple[str, ...], taint_rules: str
) -> KubeVersion:
    """A minor after v1.35: its own folder under .tools/kubernetes, its own build target."""
    minor = version.lstrip("v").rsplit(".", 1)[0]
    return KubeVersion(
        version,
        ROOT / ".tools" / "kubernetes" / version / "bin",
        f"bash scripts/e2e-tools.sh kubernetes-{minor}",
        gates,
        runtime_config,
        taint_rules,
    )


V1_35 = KubeVersion(
    version="v1.35.4",
    bin=ROOT / ".tools" / "bin",
    build="make e2e-tools",
    feature_gates=(
        "DRAAdminAccess",
        "DRADeviceTaints",
        "DRADeviceTaintRules",
        "DRAPartitionableDevices",
    ),
    runtime_config=("resource.k8s.io/v1alpha3=true",),
    device_taint_rules="v1alpha3",
)
V1_36 = _newer_minor(
    "v1.36.3",
    ("DRADeviceTaintRules",),
    ("resource.k8s.io/v1beta2/devicetaintrules=true",),
    "v1beta2",
)
V1_37 = _newer_minor("v1.37.2", (), (), "v1")

MATRIX = (V1_35, V1_36, V1_37)
DEFAULT = V1_35


def find(text: str) -> KubeVersion:
    """The version named "v1.37.2", "1.37.2", "v1.37" or "1.37"; "" is `DEFAULT`."""
    wanted = text.strip().lstrip("v")
    if not wanted:
        return DEFAULT
    for kube in MATRIX:
        if wanted in (kube.version.lstrip("v"), kube.minor):
            return kube
    known = ", ".join(k.version for k in MATRIX)
    raise ValueError(f"{VERSION_ENV}={text!r} is not a supported version; supported: {known}")


def selected() -> KubeVersion:
    """The version `MODELPLANE_KUBE_VERSION` names (`DEFAULT` when unset)."""
    return find(os.environ.get(VERSION_ENV, ""))
