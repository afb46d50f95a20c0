"""A ModelReplica's spec as typed engines, or the defects that keep an engine from running.

The XRD rejects most malformed replicas, but a function must not trust
that: a replica written before a validation rule existed, or rendered
offline, reaches the function unvalidated. So the spec is parsed by hand,
engine by engine. A well-formed engine becomes an `Engine`; an engine the
XRD should have rejected becomes an `InvalidEngine` naming every defect,
and the caller keeps whatever already runs for it instead of guessing.

Shapes (design/api.md section 4)
    An engine is one Standalone member, or one Leader and one Worker member
    (a gang). `copies` independent copies of it run; a gang copy is the
    leader plus `worker.nodes` workers, each on its own node.

Leniency, deliberately
    - A member's `template` may be a PodTemplateSpec (`{metadata, spec}`) or
      a bare pod spec (`{containers: ...}`); `modelplane_common.pod_template`
      is the one rule for what it may hold (the deployment applies it too).
    - Counts are read with `whole_number`: the wire delivers 3 as 3.0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from modelplane_common import pod_template, pods_created
from modelplane_common.capacity.fleet import is_gang, pods_per_copy
from modelplane_common.devices import DeviceRequest
from modelplane_common.inputs import InvalidInput, enum, problem, whole_number
from modelplane_common.timeutil import parse_duration

STANDALONE = "Standalone"
LEADER = "Leader"
WORKER = "Worker"
ROLES = (STANDALONE, LEADER, WORKER)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENGINE_NAME_MAX = 40


@dataclass(frozen=True, slots=True)
class Member:
    role: str
    pool: str
    requests: tuple[DeviceRequest, ...]
    worker_nodes: int | None
    pod_metadata: Mapping
    pod_spec: Mapping

    @property
    def pods_per_copy(self) -> int:
        """Pods of this member in one copy of its engine."""
        return pods_per_copy(self.role, self.worker_nodes)

    @property
    def claims_devices(self) -> bool:
        return bool(self.requests)


@dataclass(frozen=True, slots=True)
class Engine:
    name: str
    copies: int
    members: tuple[Member, ...]

    @property
    def is_gang(self) -> bool:
        return is_gang(m.role for m in self.members)

    def member(self, role: str) -> Member:
        return next(m for m in self.members if m.role == role)

    @property
    def pods(self) -> int:
        """Pods the engine runs when complete: copies x pods per copy."""
        return self.copies * sum(m.pods_per_copy for m in self.members)


@dataclass(frozen=True, slots=True)
class InvalidEngine:
    """An engine the XRD should have rejected; `name` is "" when even that is unusable."""

    name: str
    defects: tuple[str, ...]

    @property
    def message(self) -> str:
        return "; ".join(self.defects)


@dataclass(frozen=True, slots=True)
class ParsedSpec:
    cluster: str
    tolerations: tuple[Mapping, ...]
    engines: tuple[Engine, ...]
    invalid: tuple[InvalidEngine, ...]
    defects: tuple[str, ...]  # replica-level defects (no engine to pin them on)
    # spec.missingPodsGracePeriod: how long an admitted replica may lack pods (pods_created.py)
    missing_pods_grace: timedelta = pods_created.DEFAULT_GRACE

    @property
    def expected_pods(self) -> int | None:
        """Pods the replica runs when complete; None when an invalid engine hides its size."""
        if self.invalid or not self.engines:
            return None
        return sum(e.pods for e in self.engines)

    @property
    def engine_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.engines) + tuple(i.name for i in self.invalid if i.name)


def _selector_expression(selector: object, where: str, defects: list[str]) -> str | None:
    cel = selector.get("cel") if isinstance(selector, Mapping) else None
    expression = cel.get("expression") if isinstance(cel, Mapping) else None
    if isinstance(expression, str) and expression.strip():
        return expression
    defects.append(f"{where} needs a CEL expression in cel.expression (got {cel!r})")
    return None


def _device_request(
    item: object, at: str, seen: set[str], defects: list[str]
) -> DeviceRequest | None:
    """One deviceRequests[] entry, or None when it cannot become a request."""
    if not isinstance(item, Mapping):
        defects.append(f"{at} must be an object")
        return None
    name = item.get("name")
    if not isinstance(name, str) or not _DNS_LABEL.match(name):
        defects.append(f"{at}.name must be a DNS label, got {name!r}")
        return None
    if name in seen:
        defects.append(f"{at}.name {name!r} is repeated")
        return None
    seen.add(name)
    at = f"{at} ({name})"
    device_class = item.get("deviceClassName")
    count = whole_number(item.get("count"))
    if not isinstance(device_class, str) or not device_class:
        defects.append(f"{at} needs a deviceClassName")
    if count is None or count < 1:
        defects.append(f"{at}.count must be a positive count, got {item.get('count')!r}")
    selectors = _selectors(item.get("selectors") or [], at, defects)
    if not (isinstance(device_class, str) and device_class and count and count >= 1):
        return None
    return DeviceRequest(name=name, count=count, selectors=selectors, device_class=device_class)


def _selectors(raw: object, at: str, defects: list[str]) -> tuple[str, ...]:
    if not isinstance(raw, list):
        defects.append(f"{at}.selectors must be a list")
        return ()
    expressions = [
        _selector_expression(s, f"{at}.selectors[{j}]", defects) for j, s in enumerate(raw)
    ]
    return tuple(e for e in expressions if e)


def _device_requests(raw: object, where: str, defects: list[str]) -> tuple[DeviceRequest, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        defects.append(f"{where} must be a list")
        return ()
    seen: set[str] = set()
    requests = [_device_request(item, f"{where}[{i}]", seen, defects) for i, item in enumerate(raw)]
    return tuple(r for r in requests if r is not None)


def _member(raw: object, where: str, defects: list[str]) -> Member | None:
    if not isinstance(raw, Mapping):
        defects.append(f"{where} must be an object")
        return None
    try:
        # The shared rule for enums: an unknown role is never guessed at.
        role = enum(raw.get("role"), f"{where}.role", ROLES, default="")
    except InvalidInput as err:
        defects.append(str(err))
        return None
    if not role:
        defects.append(f"{where}.role: is required (got no value)")
        return None
    where = f"{where} ({role})"
    pool = raw.get("nodePoolName")
    if not isinstance(pool, str) or not _DNS_LABEL.match(pool):
        defects.append(f"{where} needs a nodePoolName")
    worker = raw.get("worker")
    nodes = whole_number(worker.get("nodes")) if isinstance(worker, Mapping) else None
    if role == WORKER and (nodes is None or nodes < 1):
        defects.append(f"{where} needs worker.nodes, a positive count of worker pods per copy")
    if role != WORKER and worker is not None:
        defects.append(f"{where} sets worker, which only a Worker member may")
    requests = _device_requests(raw.get("deviceRequests"), f"{where}.deviceRequests", defects)
    metadata, pod_spec, template_defects = pod_template.read(raw.get("template"), where)
    defects.extend(template_defects)
    if not isinstance(pool, str):
        return None
    return Member(
        role=role,
        pool=pool,
        requests=requests,
        worker_nodes=nodes if role == WORKER else None,
        pod_metadata=metadata,
        pod_spec=pod_spec,
    )


def _engine(raw: object, position: int) -> Engine | InvalidEngine:
    if not isinstance(raw, Mapping):
        return InvalidEngine("", (f"engines[{position}] must be an object",))
    name = raw.get("name")
    if not isinstance(name, str) or not _DNS_LABEL.match(name) or len(name) > _ENGINE_NAME_MAX:
        return InvalidEngine(
            "", (f"engines[{position}].name must be a DNS label of at most 40 characters",)
        )
    defects: list[str] = []
    copies = whole_number(raw.get("copies", 1))
    if copies is None or copies < 1:
        defects.append(f"copies must be a positive count, got {raw.get('copies')!r}")
    raw_members = raw.get("members")
    if not isinstance(raw_members, list):
        raw_members = []
    members = [_member(m, f"members[{i}]", defects) for i, m in enumerate(raw_members)]
    roles = sorted(str(m.get("role")) for m in raw_members if isinstance(m, Mapping))
    if roles not in ([STANDALONE], [LEADER, WORKER]):
        defects.append(
            "an engine has one Standalone member, or one Leader and one Worker member; "
            f"got {', '.join(map(str, roles)) or 'no members'}"
        )
    if defects:
        return InvalidEngine(name, tuple(defects))
    assert copies is not None and all(m is not None for m in members)
    return Engine(name, copies, tuple(m for m in members if m is not None))


def parse_spec(spec: Mapping) -> ParsedSpec:
    """Parse a ModelReplica spec; never raises."""
    defects: list[str] = []
    cluster = spec.get("clusterName")
    if not isinstance(cluster, str) or not cluster:
        defects.append("spec.clusterName is empty")
        cluster = ""
    tolerations = spec.get("tolerations") or []
    if not isinstance(tolerations, list) or not all(isinstance(t, Mapping) for t in tolerations):
        defects.append("spec.tolerations must be a list of tolerations")
        tolerations = []
    raw_engines = spec.get("engines")
    if not isinstance(raw_engines, list) or not raw_engines:
        defects.append("spec.engines declares no engine")
        raw_engines = []
    engines: list[Engine] = []
    invalid: list[InvalidEngine] = []
    seen: set[str] = set()
    for position, raw in enumerate(raw_engines):
        parsed = _engine(raw, position)
        if parsed.name and parsed.name in seen:
            invalid.append(InvalidEngine("", (f"engine name {parsed.name!r} is repeated",)))
            continue
        seen.add(parsed.name)
        if isinstance(parsed, Engine):
            engines.append(parsed)
        else:
            invalid.append(parsed)
    grace = _missing_pods_grace(spec.get("missingPodsGracePeriod"), defects)
    return ParsedSpec(
        cluster=cluster,
        tolerations=tuple(tolerations),
        engines=tuple(engines),
        invalid=tuple(invalid),
        defects=tuple(defects),
        missing_pods_grace=grace,
    )


def _missing_pods_grace(raw: object, defects: list[str]) -> timedelta:
    """spec.missingPodsGracePeriod; absent or zero, the default. Unreadable, a defect:
    the replica is then not clean, and nothing it runs is released or removed."""
    if raw is None:
        return pods_created.DEFAULT_GRACE
    try:
        return parse_duration(raw) or pods_created.DEFAULT_GRACE
    except ValueError as err:
        defects.append(problem("spec.missingPodsGracePeriod", str(err), raw))
        return pods_created.DEFAULT_GRACE
