"""DeviceTaintRules: taints put on devices from outside their ResourceSlices.

Versions
    Kubernetes serves the kind as resource.k8s.io/v1alpha3 on v1.35 (behind the
    DRADeviceTaintRules gate and --runtime-config), v1beta2 from v1.36 and v1
    from v1.37; kube-scheduler reads v1alpha3, v1beta2 and v1 respectively. The
    agent reads whichever the API server serves, the most stable first
    (`kube.served_versions`). The three schemas are the same for everything read
    here (k8s.io/api v0.35.4 v1alpha3, v0.36.3 v1beta2, v0.37.2 v1: a selector of
    `driver`, `pool`, `device`; a taint of `key`, `value`, `effect`,
    `timeAdded`; a `status` of conditions only, which the allocator never reads;
    the effects `None`, `NoSchedule`, `NoExecute`), so there is one reading,
    `taint_rule_from`, for all of them. The schema differences that exist are
    older or newer than these and are read so that the agent never counts more
    free than a scheduler of any of these versions would:

    - a rule without `deviceSelector` selects every device here. kube-scheduler
      v1.35 and v1.36 apply it so; v1.37's (k8s.io/dynamic-resource-allocation
      v0.37 `applyPatches`) and the API's comment in every version say it
      selects none. The agent cannot tell which scheduler runs (an API server
      of v1.37 may serve a v1.36 kube-scheduler: the version skew policy allows
      one minor older, and an upgrade runs so), so it takes the answer that
      withholds more, and says so: a device withheld by such rules alone is
      not counted for that cause (`UNSELECTIVE_RULE` and the rule's name,
      `TaintRules.disputed`), which the report's condition names
      (`pools.UNSELECTIVE_TAINT_RULES`). Under a v1.37 scheduler the pool is
      under-counted by those devices, never over-counted.
    - a selector field outside the schema (`deviceClassName` and CEL
      `selectors`, removed in v1.35 and still served by older API servers, or
      one a later version adds) is ignored. Every selector field narrows (the
      API: "All selector criteria must be satisfied"), so the rule then selects
      at least the devices it meant: fewer free, never more.

Model
    A DeviceTaintRule carries one taint and a device selector of up to three
    exact names, `driver`, `pool` and `device`: each one set must equal the
    device's (a device is named by driver, resource pool and name, its
    `DeviceKey`), each one unset matches any. kube-scheduler's DRA allocator
    reads every ResourceSlice with the taint of every rule that selects one
    of its devices appended to that device's taints (the slice tracker of
    k8s.io/dynamic-resource-allocation v0.35, `applyPatches`), and then
    treats them exactly as taints published in the slice: a `NoSchedule` or
    `NoExecute` taint keeps the device from every request that does not
    tolerate it, and modelplane's claims tolerate none (`Device.allocatable`);
    a taint of effect `None`, or any other, is ignored.

    - A rule without `deviceSelector` selects every device (Versions, above).
    - a selector field outside the schema is ignored (Versions, above).
    - A selector field that is not a string reads as unset: it selects more.

Invariants
    - `rules` holds every rule seen, by name, whatever its effect;
    - `by_device[d]` names the rules that withhold devices (NoSchedule,
      NoExecute) and select device name `d` (None: any name); a rule of
      another effect is in no entry, so `withholds` costs nothing while no
      rule withholds anything;
    - `withholds(key)` is true exactly when some rule in `by_device` selects
      `key`; `disputed(key)` names one when every rule that does has no
      `deviceSelector` (`TaintRule.unselective`). Which nodes that concerns is
      `devices.DeviceIndex`'s business.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from modelplane_agent.snapshot import DeviceKey, name_of

# The effects under which the allocator refuses an untolerated device (the rest it ignores).
WITHHOLDING_EFFECTS = ("NoSchedule", "NoExecute")

# Why a device is not counted when only rules without `deviceSelector` withhold it
# (kube-scheduler v1.35 and v1.36 apply those to every device, v1.37 to none): the
# cause is this text and the rule's name, "<UNSELECTIVE_RULE> (<name>)".
UNSELECTIVE_RULE = "DeviceTaintRule without deviceSelector"


@dataclass(frozen=True, slots=True)
class TaintRule:
    """One DeviceTaintRule: the names its selector requires (None: any) and its effect."""

    name: str
    driver: str | None
    pool: str | None
    device: str | None
    effect: str
    # No `deviceSelector` at all (not an empty one): the versions disagree (Versions).
    unselective: bool = False

    @property
    def withholds(self) -> bool:
        return self.effect in WITHHOLDING_EFFECTS

    def selects(self, key: DeviceKey) -> bool:
        driver, pool, device = key
        return (
            (self.driver is None or self.driver == driver)
            and (self.pool is None or self.pool == pool)
            and (self.device is None or self.device == device)
        )


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def taint_rule_from(obj: Mapping) -> TaintRule:
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    unselective = spec.get("deviceSelector") is None
    selector = spec.get("deviceSelector")
    selector = selector if isinstance(selector, Mapping) else {}
    taint = spec.get("taint")
    effect = taint.get("effect") if isinstance(taint, Mapping) else None
    return TaintRule(
        name=name_of(obj),
        driver=_name(selector.get("driver")),
        pool=_name(selector.get("pool")),
        device=_name(selector.get("device")),
        effect=effect if isinstance(effect, str) else "",
        unselective=unselective,
    )


class TaintRules:
    def __init__(self) -> None:
        self.rules: dict[str, TaintRule] = {}
        self.by_device: dict[str | None, set[str]] = {}

    def put(self, name: str, new: TaintRule | None) -> TaintRule | None:
        """Store (or, with None, delete) one rule; return the one it replaced."""
        old = self.rules.pop(name, None)
        if old is not None and old.withholds:
            names = self.by_device[old.device]
            names.discard(name)
            if not names:
                del self.by_device[old.device]
        if new is not None:
            self.rules[name] = new
            if new.withholds:
                self.by_device.setdefault(new.device, set()).add(name)
        return old

    @property
    def active(self) -> bool:
        """Whether any rule withholds devices at all."""
        return bool(self.by_device)

    def withholds(self, key: DeviceKey) -> bool:
        """Whether a NoSchedule or NoExecute rule selects the device."""
        return any(True for _ in self._withholding(key))

    def disputed(self, key: DeviceKey) -> str | None:
        """The name of a rule without `deviceSelector` (the first by name) that
        withholds the device, if only such rules do: a v1.37 kube-scheduler would not
        withhold it, v1.35's and v1.36's would (Versions)."""
        names = sorted(rule.name for rule in self._withholding(key) if rule.unselective)
        if not names or any(not rule.unselective for rule in self._withholding(key)):
            return None
        return names[0]

    def _withholding(self, key: DeviceKey) -> Iterator[TaintRule]:
        for device in (key[2], None):
            for name in self.by_device.get(device, ()):
                rule = self.rules[name]
                if rule.selects(key):
                    yield rule
