"""The accounting policies compared: each is only what an InferenceCluster says to the core.

A policy does not change the scheduler. It is the `spec.observation` a
platform team would write on every cluster, and whether an agent publishes
histograms into `status.gpuPools`; the core (`placement.plan`) reads the
resulting InferenceClusters through the real reader and decides as it
would in the function.

    whole-node   `mode: Declared`, nothing published: every claiming pod is
                 charged a whole empty node (upstream Modelplane's rule).
    device-count `mode: Declared` with `fallback: DeviceCount`, nothing
                 published: the pool's declared devices minus what the
                 fleet's replicas claim, one total per kind; a pod fits when
                 it claims at most one node's devices (capacity/devicecount.py).
    histograms   `mode: Observed` and the agent's histogram republished
                 every `--republish` (stale in between: replicas placed
                 since are charged by the assumed node choice).
    histograms, Pack
                 the same clusters, every ModelDeployment asking
                 `spec.clusterSpreading: Pack` (the others keep the default,
                 Spread): the deployment's setting, not the cluster's, and
                 the one row whose arrivals differ from the file's in a field.
    node-level   not an InferenceCluster setting: the reference that sees
                 every node of every pool and places by a fragmentation
                 score, without the core (nodelevel.py); the yardstick for
                 what histograms lose.

The upper bound is not a policy: it places nothing (see bound.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    observation: Mapping[str, str] = field(default_factory=dict)  # spec.observation
    publishes: bool = False  # whether the agent's histograms reach status.gpuPools
    sees_nodes: bool = False  # the node-level reference: places without the core
    # The spec.clusterSpreading every arriving ModelDeployment asks (run.py applies it).
    cluster_spreading: str = "Spread"


WHOLE_NODE = Policy("whole-node", {"mode": "Declared"})
HISTOGRAMS = Policy("histograms", {"mode": "Observed"}, publishes=True)
HISTOGRAMS_PACK = Policy(
    "histograms, Pack", {"mode": "Observed"}, publishes=True, cluster_spreading="Pack"
)
# Declared only so that the World reads the same pools; it never plans through the core.
NODE_LEVEL = Policy("node-level", {"mode": "Declared"}, sees_nodes=True)


def device_count() -> Policy:
    """Device-count accounting: no agent, and `spec.observation.fallback: DeviceCount`.

    The one place that spells item 2's setting (design/api.md): a Declared
    cluster is counted by its fallback, here the pool's declared devices
    minus what the fleet's replicas claim, one total per kind.
    """
    return Policy("device-count", {"mode": "Declared", "fallback": "DeviceCount"})


DEVICE_COUNT = device_count()


def all_policies() -> tuple[Policy, ...]:
    return (WHOLE_NODE, DEVICE_COUNT, HISTOGRAMS, HISTOGRAMS_PACK, NODE_LEVEL)
