"""The demo's fleet, read from the repository's examples: what to build and what to expect.

Pure functions over the example manifests: the kwok nodes an example
InferenceCluster declares (`pools`), and how many pods an example
ModelDeployment asks for (`pods_wanted`), which `placed` compares with what
kube-scheduler bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from modelplane_devtools.paths import ROOT

from modelplane_e2e import fleet

CLUSTERS = ROOT / "examples" / "clusters"
DEPLOYMENTS = ROOT / "examples" / "deployments"

# Two Observed clusters, each with its agent: gpu-east (H100 and L40S+NIC
# pools, tainted) and gpu-edge (L40S and a small H100 pool). Not a Declared
# one: no agent reports its replicas' pods, so they stay `PodsScheduled`
# Unknown/NotObserved and a deployment with a replica there never reads Ready
# (design/model-replica.md, "PodsScheduled"), which the demo promises.
CLUSTER_NAMES = ("gpu-east", "gpu-edge")


@dataclass(frozen=True)
class Example:
    """An example manifest: its file's stem (the README's `$CLUSTER` or `$DEPLOYMENT`)
    and the object it holds."""

    stem: str
    manifest: dict

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.manifest["metadata"].get("namespace", "")


def load(path: Path) -> Example:
    (manifest,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return Example(path.stem, manifest)


def clusters() -> list[Example]:
    return [load(CLUSTERS / f"{name}.yaml") for name in CLUSTER_NAMES]


def deployments() -> list[Example]:
    """Every placeable example deployment (examples/deployments/*.yaml, not unplaceable/)."""
    return [load(path) for path in sorted(DEPLOYMENTS.glob("*.yaml"))]


def _unqualified(values: dict | None, driver: str) -> dict:
    """`gpu.nvidia.com/memory` as the driver's ResourceSlice names it: `memory`."""
    return {key.removeprefix(f"{driver}/"): value for key, value in (values or {}).items()}


def _device(declared: dict) -> fleet.DeviceKind:
    driver = declared["driver"]
    return fleet.DeviceKind(
        declared["name"],
        driver,
        declared["count"],
        _unqualified(declared.get("attributes"), driver),
        _unqualified(declared.get("capacity"), driver),
    )


def pools(cluster: dict) -> list[fleet.Pool]:
    """The InferenceCluster's declared pools, as kwok nodes with their devices."""
    return [
        fleet.Pool(pool["name"], pool["nodeCount"], tuple(_device(d) for d in pool["devices"]))
        for pool in cluster["spec"]["nodePools"]
    ]


def _pods_of(member: dict) -> int:
    """A Standalone or Leader member is one pod; a Worker member one per worker node."""
    return member["worker"]["nodes"] if member["role"] == "Worker" else 1


def pods_wanted(deployment: dict) -> int:
    """The pods the deployment's replicas run when every one is placed."""
    engines = deployment["spec"]["template"]["spec"]["engines"]
    per_replica = sum(_pods_of(m) for engine in engines for m in engine["members"])
    return deployment["spec"]["replicas"] * per_replica


def taint_arguments(cluster: dict) -> list[str]:
    """`kubectl taint` arguments for the cluster's fleet taints (`key=value:Effect`)."""
    return [
        f"{t['key']}={t.get('value', '')}:{t['effect']}"
        for t in cluster["spec"].get("taints") or []
    ]
