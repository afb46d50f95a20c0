"""The accounting policies compared: each is only what an InferenceCluster says to the core.

A policy does not change the scheduler. It is the `spec.observation` a
platform team would write on every cluster, and whether an agent publishes
histograms into `status.gpuPools`; the core (`placement.plan`) reads the
resulting InferenceClusters through the real reader and decides as it
would in the function.

    whole-node   `mode: Declared`, nothing published: every claiming pod is
                 charged a whole empty node (upstream Modelplane's rule).
    device-count no fresh observation either, but the pool's declared
                 devices minus what the fleet's replicas claim (issue 24,
                 item 2); see `device_count`.
    histograms   `mode: Observed` and the agent's histogram republished
                 every `--republish` (stale in between: replicas placed
                 since are charged by the assumed node choice).

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


WHOLE_NODE = Policy("whole-node", {"mode": "Declared"})
HISTOGRAMS = Policy("histograms", {"mode": "Observed"}, publishes=True)


def device_count() -> Policy | None:
    """Device-count accounting, or None while the core has no such setting.

    The one place that knows how item 2's setting is spelled: a pool without
    a fresh observation (here: no agent publishes) counts declared devices,
    not nodes.
    """
    return None


def all_policies() -> tuple[Policy, ...]:
    counted = device_count()
    return (WHOLE_NODE, *((counted,) if counted else ()), HISTOGRAMS)
