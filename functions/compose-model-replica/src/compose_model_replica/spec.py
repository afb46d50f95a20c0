"""A ModelReplica's spec as typed engines, or the defects that keep an engine from running.

The XRD rejects most malformed replicas, but a function must not trust
that: a replica written before a validation rule existed, or rendered
offline, reaches the function unvalidated. So the spec is validated here,
against the model generated from the XRD (modelplane_schemas.modelreplica,
`inputs.as_stored`), engine by engine: a well-formed engine becomes an
`Engine`; an engine the XRD should have rejected becomes an `InvalidEngine`
naming every defect, and the caller keeps whatever already runs for it
instead of guessing, while the replica's other engines go on.

What the generated model cannot say is checked here by hand, one rule each:
the XRD's four CEL rules (an engine's roles; worker set exactly on a
Worker; template or templateDigest, not both; a member's device counts sum
to at most `devices.MAX_DEVICES_PER_CLAIM`), its list-map keys (engine
names, a member's request names, each unique), a selector expression that
is not blank, and the shape of the
fields of a member's template that the workloads merge into (the XRD keeps
the template's unknown fields, so the model types it as any object).

Shapes (design/api.md section 4)
    An engine is one Standalone member, or one Leader and one Worker member
    (a gang). `copies` independent copies of it run; a gang copy is the
    leader plus `worker.nodes` workers, each on its own node.

Templates, inline or by digest
    A member names its pod template by `templateDigest` (what
    compose-model-deployment writes): its Member then holds the digest and
    no template, and templates.py takes the template from the ModelDeployment
    while the digest matches. A member may instead carry `template` inline
    (what earlier versions wrote, and a replica written by hand): it is read
    here, through the one rule the deployment applies too. One or the other,
    never both (the XRD's third CEL rule).

Leniency, deliberately
    - A member's `template` may be a PodTemplateSpec (`{metadata, spec}`) or
      a bare pod spec (`{containers: ...}`); `modelplane_common.pod_template`
      is the one rule for what it may hold (the deployment applies it too).
    - Counts are whole numbers (`inputs.whole_number`): the wire delivers 3
      as 3.0. A null `copies` is an absent one (1), as the API server
      prunes a null from a field that is not nullable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated

from modelplane_common import pod_template, pods_created
from modelplane_common.capacity.fleet import (
    ENGINE_SHAPE_RULE,
    has_engine_shape,
    is_gang,
    pods_per_copy,
)
from modelplane_common.devices import DeviceRequest, claim_limit_problem
from modelplane_common.inputs import (
    InvalidInput,
    as_stored,
    bounded_duration,
    problem,
    validation_problems,
)
from modelplane_schemas import modelreplica as schema
from pydantic import TypeAdapter, ValidationError

LEADER = schema.Role.LEADER.value
WORKER = schema.Role.WORKER.value

# An engine's name as the generated model has it (a DNS label of at most 40).
_ENGINE_NAME = TypeAdapter(Annotated[str, schema.Engine.model_fields["name"]])


@dataclass(frozen=True, slots=True)
class Member:
    role: str
    pool: str
    requests: tuple[DeviceRequest, ...]
    worker_nodes: int | None
    pod_metadata: Mapping
    pod_spec: Mapping
    # spec...members[].templateDigest: the template is the ModelDeployment's, taken
    # (templates.py) only while its digest is this; None: the template is inline.
    template_digest: str | None = None
    position: int = 0  # the member's index in its engine, where the deployment has its template

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

    @property
    def templates_by_digest(self) -> bool:
        """Whether a member's template is to be taken from the ModelDeployment."""
        return any(m.template_digest is not None for m in self.members)


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
    # Why missing_pods_grace is the platform's maximum and not the value written.
    grace_clamped: str | None = None

    @property
    def expected_pods(self) -> int | None:
        """Pods the replica runs when complete; None when an invalid engine hides its size."""
        if self.invalid or not self.engines:
            return None
        return sum(e.pods for e in self.engines)

    @property
    def engine_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.engines) + tuple(i.name for i in self.invalid if i.name)

    @property
    def templates_by_digest(self) -> bool:
        """Whether an engine takes a template from the ModelDeployment (it is required)."""
        return any(e.templates_by_digest for e in self.engines)


def _requests(member: schema.Member, where: str, defects: list[str]) -> tuple[DeviceRequest, ...]:
    """A member's device requests; each name once (the XRD's list-map key), no blank CEL,
    at most MAX_DEVICES_PER_CLAIM devices in total (the XRD's CEL rule)."""
    seen: set[str] = set()
    requests = []
    for i, request in enumerate(member.deviceRequests or ()):
        at = f"{where}.deviceRequests[{i}]"
        if request.name in seen:
            defects.append(problem(f"{at}.name", "is repeated", request.name))
        seen.add(request.name)
        selectors = tuple(s.cel.expression for s in request.selectors or ())
        for j, expression in enumerate(selectors):
            if not expression.strip():
                defects.append(
                    problem(f"{at}.selectors[{j}].cel.expression", "is blank", expression)
                )
        requests.append(
            DeviceRequest(
                name=request.name,
                count=request.count,
                selectors=selectors,
                device_class=request.deviceClassName,
            )
        )
    over_limit = claim_limit_problem(requests, f"{where}.deviceRequests")
    defects.extend([over_limit] if over_limit else [])
    return tuple(requests)


def _member(member: schema.Member, position: int, defects: list[str]) -> Member:
    role = member.role.value
    where = f"members[{position}] ({role})"
    # The XRD's CEL rule: worker is set on a Worker member, and only there.
    if role == WORKER and member.worker is None:
        defects.append(problem(f"{where}.worker", "is required on a Worker member", None))
    if role != WORKER and member.worker is not None:
        defects.append(
            problem(
                f"{where}.worker", "is set only on a Worker member", member.model_dump()["worker"]
            )
        )
    requests = _requests(member, where, defects)
    digest = member.templateDigest
    if digest is not None and member.template is not None:
        # The XRD's CEL rule: one template, named one way.
        defects.append(problem(f"{where}.templateDigest", "is set beside template", digest))
    metadata: Mapping = {}
    pod_spec: Mapping = {}
    if digest is None:
        metadata, pod_spec, template_defects = pod_template.read(member.template, where)
        defects.extend(template_defects)
    return Member(
        role=role,
        pool=member.nodePoolName,
        requests=requests,
        worker_nodes=member.worker.nodes if role == WORKER and member.worker else None,
        pod_metadata=metadata,
        pod_spec=pod_spec,
        template_digest=digest,
        position=position,
    )


def _engine_name(raw: object) -> str:
    """The engine's name when it is a valid one, else "" (the engine cannot be named)."""
    name = raw.get("name") if isinstance(raw, Mapping) else None
    try:
        return _ENGINE_NAME.validate_python(name, strict=True)
    except ValidationError:
        return ""


def _engine(raw: object, position: int) -> Engine | InvalidEngine:
    name = _engine_name(raw)
    try:
        engine = as_stored(schema.Engine, raw)
    except ValidationError as err:
        # An engine without a name is only known by its position in the list.
        at = () if name else ("spec", "engines", position)
        return InvalidEngine(name, tuple(validation_problems(err, at=at)))
    defects: list[str] = []
    members = tuple(_member(m, i, defects) for i, m in enumerate(engine.members))
    roles = [m.role for m in members]
    if not has_engine_shape(roles):
        defects.append(problem("members", ENGINE_SHAPE_RULE, roles))
    if defects:
        return InvalidEngine(name, tuple(defects))
    copies = (
        engine.copies if engine.copies is not None else schema.Engine.model_fields["copies"].default
    )
    return Engine(name, copies, members)


def _in_an_engine(loc: tuple) -> bool:
    return len(loc) > 1 and loc[0] == "engines" and isinstance(loc[1], int)


def _spec_defects(spec: Mapping) -> tuple[list[str], bool]:
    """What the generated model finds wrong in the spec outside its engines (each engine
    is judged on its own, by `_engine`), and whether the tolerations are among it."""
    try:
        as_stored(schema.Spec, spec)
    except ValidationError as err:
        tolerations = any(e["loc"][:1] == ("tolerations",) for e in err.errors())
        return validation_problems(err, _in_an_engine, at=("spec",)), tolerations
    return [], False


def parse_spec(spec: Mapping) -> ParsedSpec:
    """Parse a ModelReplica spec; never raises."""
    defects, bad_tolerations = _spec_defects(spec)
    cluster = spec.get("clusterName")
    tolerations = spec.get("tolerations")
    raw_engines = spec.get("engines")
    engines: list[Engine] = []
    invalid: list[InvalidEngine] = []
    seen: set[str] = set()
    for position, raw in enumerate(raw_engines if isinstance(raw_engines, list) else ()):
        parsed = _engine(raw, position)
        if parsed.name and parsed.name in seen:
            # The XRD's list-map key: the second engine of a name is not that engine.
            invalid.append(
                InvalidEngine(
                    "", (problem(f"spec.engines[{position}].name", "is repeated", parsed.name),)
                )
            )
            continue
        seen.add(parsed.name)
        if isinstance(parsed, Engine):
            engines.append(parsed)
        else:
            invalid.append(parsed)
    grace, grace_clamped = _missing_pods_grace(spec.get("missingPodsGracePeriod"), defects)
    return ParsedSpec(
        cluster=cluster if isinstance(cluster, str) else "",
        tolerations=() if bad_tolerations else tuple(tolerations or ()),
        engines=tuple(engines),
        invalid=tuple(invalid),
        defects=tuple(defects),
        missing_pods_grace=grace,
        grace_clamped=grace_clamped,
    )


def _missing_pods_grace(raw: object, defects: list[str]) -> tuple[timedelta, str | None]:
    """spec.missingPodsGracePeriod; absent or zero, the default; longer than the platform's
    maximum (pods_created.LONGEST_GRACE), that maximum and the warning that says so.
    Unreadable, a defect: the replica is then not clean, and nothing it runs is released
    or removed."""
    try:
        grace, clamped = bounded_duration(
            raw,
            "spec.missingPodsGracePeriod",
            default=pods_created.DEFAULT_GRACE,
            longest=pods_created.LONGEST_GRACE,
        )
    except InvalidInput as err:
        defects.append(str(err))
        return pods_created.DEFAULT_GRACE, None
    return grace or pods_created.DEFAULT_GRACE, clamped
