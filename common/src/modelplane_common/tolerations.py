"""Kubernetes taints and tolerations: the one toleration rule the scheduler and the agent share.

The scheduler asks whether a deployment tolerates a cluster's fleet taints;
the agent asks whether a pool's tolerations let a tainted node count as
schedulable. Both must answer exactly as kube-scheduler would, so the rule
lives here once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes semantics: an empty effect matches every effect, an empty key
        with Exists matches every key, and Exists ignores the value."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value
