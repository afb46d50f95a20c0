"""Absence: when a cluster the replicas run on cannot be seen, and what that means.

A replica's InferenceCluster can be missing from the required resources for
harmless reasons (a cache resync, an RBAC change, the cluster object being
re-created, a label edit) and for a real one (the cluster was deleted). One
pass cannot tell them apart, and moving a replica deletes its workloads, so
absence is judged over time, with the deployment's status as the only
memory (`status.missingClusters`: name and since when, on the control
plane's clock).

Rules (design/scheduler.md, "A cluster that vanishes")
    - A cluster that is selected but whose spec cannot be read is HELD for
      as long as that lasts: an unreadable input never moves running work.
    - A cluster that is missing is HELD until `healing.missingClusterGracePeriod`
      (default 5m) has passed since it was first seen missing; then its
      replicas are re-placed like any evicted replica.
    - If every cluster the deployment's replicas run on is missing (or
      unreadable) at once, every one of them is HELD regardless of time:
      losing sight of the whole footprint says more about the inputs than
      about the clusters, and nothing moves.
    - A cluster is remembered only while some replica still runs on it; one
      that returns is forgotten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from modelplane_common.timeutil import format_duration

from compose_model_deployment.model import MissingCluster


@dataclass(frozen=True, slots=True)
class Absences:
    held: dict[str, str]  # cluster -> why its replicas stay where they are
    missing: tuple[MissingCluster, ...]  # missing now; `still_remembered` after the plan


def judge(
    used: Iterable[str],
    present: Iterable[str],
    unreadable: Mapping[str, str],
    remembered: Iterable[MissingCluster],
    now: datetime,
    grace: timedelta,
) -> Absences:
    """Which clusters' replicas are held this pass, and the memory to write back."""
    used_set = set(used)
    since = {m.name: m.since for m in remembered}
    missing = sorted(used_set - set(present) - set(unreadable))
    held = {c: f"InferenceCluster {c} cannot be read: {unreadable[c]}" for c in sorted(unreadable)}
    first_seen = {c: min(since.get(c, now), now) for c in missing}
    if missing and used_set <= set(missing) | set(unreadable):
        for c in missing:
            held[c] = (
                "every InferenceCluster this deployment runs on is missing "
                f"({', '.join(missing)}); nothing moves until one returns"
            )
    else:
        for c in missing:
            if now - first_seen[c] < grace:
                held[c] = (
                    f"InferenceCluster {c} is missing; its replicas stay for the "
                    f"{format_duration(grace)} missingClusterGracePeriod, then move"
                )
    return Absences(
        held=held,
        missing=tuple(MissingCluster(c, first_seen[c]) for c in missing),
    )


def still_remembered(
    missing: Iterable[MissingCluster], in_use: Iterable[str]
) -> tuple[MissingCluster, ...]:
    """The missing clusters to remember after a pass: those some replica still runs on."""
    used = set(in_use)
    return tuple(m for m in missing if m.name in used)
