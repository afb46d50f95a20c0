"""Why a replica could not be placed: one cause per pool, counted, formatted once.

Model
    An attempt to place a replica anywhere walks every selected cluster and,
    on a cluster that takes new replicas, every pool. Each pool it checked
    gets exactly one `Cause`: the first rule that rejected it for the engine
    that did not fit. A cluster that takes no new replicas (not Ready, or an
    untolerated NoSchedule/NoExecute taint) gives its cause to each of its
    pools, so the counts always add up to the pools checked.

    A `Diagnosis` is that attempt as data: the per-pool refusals, in the
    order they were checked. `summary()` is the one place it becomes text,
    the causes by count (most first, ties in `Cause` order), e.g.
    `240 pools checked, 180 too few free devices, 40 taint not tolerated,
    20 selector does not match`.

Invariants
    - `sum(counts) == checked`: every pool checked has one cause.
    - The text names no pool: a deployment over thousands of pools still
      reads as one line. The refusals keep the pools for logs and tests.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum


class Cause(StrEnum):
    """What rejected a pool, in the order placement checks it."""

    CLUSTER_NOT_READY = "cluster not Ready"
    TAINT_NOT_TOLERATED = "taint not tolerated"
    RECENTLY_FAILED = "failed recently"
    SELECTOR_MISMATCH = "selector does not match"
    # The pool's free devices of some claimed kind, summed over all its nodes
    # (under DeviceCount: declared minus claimed), are fewer than the engine
    # claims in all.
    TOO_FEW_DEVICES = "too few free devices"
    # Enough devices in all, but not on enough nodes: a gang needs distinct
    # nodes, a pod needs one node holding all it claims, or whole-node
    # accounting rounds every claiming pod up to an empty node. Under
    # DeviceCount: a gang copy has more pods than the pool has nodes, or a
    # pod claims more than one node declares.
    TOO_FEW_NODES = "too few nodes with room"


_ORDER = {cause: i for i, cause in enumerate(Cause)}


@dataclass(frozen=True, slots=True)
class PoolRefusal:
    cluster: str
    pool: str
    cause: Cause


@dataclass(frozen=True, slots=True)
class Diagnosis:
    refusals: tuple[PoolRefusal, ...]

    @property
    def checked(self) -> int:
        return len(self.refusals)

    def counts(self) -> list[tuple[Cause, int]]:
        """Causes by count, most first; ties in the order placement checks them."""
        counted = Counter(v.cause for v in self.refusals)
        return sorted(counted.items(), key=lambda item: (-item[1], _ORDER[item[0]]))

    def summary(self) -> str:
        if not self.refusals:
            return "no pool checked: no selected InferenceCluster has a pool"
        noun = "pool" if self.checked == 1 else "pools"
        parts = [f"{self.checked} {noun} checked"]
        parts.extend(f"{count} {cause}" for cause, count in self.counts())
        return ", ".join(parts)


NOTHING_CHECKED = Diagnosis(())
