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
the XRD's two CEL rules (an engine's roles; worker set exactly on a
Worker), its list-map keys (engine names, a member's request names, each
unique), a selector expression that is not blank, and the shape of the
fields of a member's template that the workloads merge into (the XRD keeps
the template's unknown fields, so the model types it as any object).

Shapes (design/api.md section 4)
    An engine is one Standalone member, or one Leader and one Worker member
    (a gang). `copies` independent copies of it run; a gang copy is the
    leader plus `worker.nodes` workers, each on its own node.

Leniency, deliberately
    - A member's `template` may be a PodTemplateSpec (`{metadata, spec}`) or
      a bare pod spec (`{containers: ...}`).
    - Counts are whole numbers (`inputs.whole_number`): the wire delivers 3
      as 3.0. A null `copies` is an absent one (1), as the API server
      prunes a null from a field that is not nullable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from modelplane_common.capacity.fleet import (
    ENGINE_SHAPE_RULE,
    has_engine_shape,
    is_gang,
    pods_per_copy,
)
from modelplane_common.devices import DeviceRequest
from modelplane_common.inputs import as_stored, problem, validation_problems
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

    @property
    def expected_pods(self) -> int | None:
        """Pods the replica runs when complete; None when an invalid engine hides its size."""
        if self.invalid or not self.engines:
            return None
        return sum(e.pods for e in self.engines)

    @property
    def engine_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.engines) + tuple(i.name for i in self.invalid if i.name)


def _pod_template(raw: object, where: str, defects: list[str]) -> tuple[Mapping, Mapping]:
    """(pod metadata, pod spec) of a member's template."""
    if not isinstance(raw, Mapping):
        defects.append(f"{where}.template must be a pod template with containers")
        return {}, {}
    if "spec" in raw:
        metadata, spec = raw.get("metadata") or {}, raw.get("spec")
    else:
        metadata, spec = {}, raw
    if not isinstance(metadata, Mapping):
        defects.append(f"{where}.template.metadata must be an object")
        metadata = {}
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    if not isinstance(containers, list) or not containers:
        defects.append(f"{where}.template has no containers")
        return metadata, {}
    assert isinstance(spec, Mapping)
    found = _template_shape_defects(metadata, spec, f"{where}.template")
    defects.extend(found)
    return (metadata, spec) if not found else ({}, {})


# The fields of a pod template the workloads merge into: each must have its
# Kubernetes shape, or merging would fail half-way. Everything else in the
# template is passed through untouched for the API server to judge.
_POD_SPEC_FIELDS = (
    ("nodeSelector", Mapping, "an object"),
    ("tolerations", list, "a list"),
    ("resourceClaims", list, "a list"),
    ("affinity", Mapping, "an object"),
)


def _template_shape_defects(metadata: Mapping, spec: Mapping, where: str) -> list[str]:
    defects = []
    if not isinstance(metadata.get("labels") or {}, Mapping):
        defects.append(problem(f"{where}.metadata.labels", "must be an object", metadata["labels"]))
    for name, kind, words in _POD_SPEC_FIELDS:
        if spec.get(name) is not None and not isinstance(spec[name], kind):
            defects.append(problem(f"{where}.spec.{name}", f"must be {words}", spec[name]))
    for i, claim in enumerate(spec.get("resourceClaims") or []):
        if not isinstance(claim, Mapping):
            defects.append(problem(f"{where}.spec.resourceClaims[{i}]", "must be an object", claim))
    defects.extend(_anti_affinity_defects(spec, where))
    for i, container in enumerate(spec["containers"]):
        defects.extend(_container_defects(container, f"{where}.spec.containers[{i}]"))
    return defects


def _anti_affinity_defects(spec: Mapping, where: str) -> list[str]:
    affinity = spec.get("affinity")
    anti = (affinity or {}).get("podAntiAffinity") if isinstance(affinity, Mapping) else None
    at = f"{where}.spec.affinity.podAntiAffinity"
    if anti is None:
        return []
    if not isinstance(anti, Mapping):
        return [problem(at, "must be an object", anti)]
    terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution")
    if terms is not None and not isinstance(terms, list):
        return [
            problem(f"{at}.requiredDuringSchedulingIgnoredDuringExecution", "must be a list", terms)
        ]
    return []


def _container_defects(container: object, at: str) -> list[str]:
    if not isinstance(container, Mapping):
        return [problem(at, "must be an object", container)]
    resources = container.get("resources")
    if resources is not None and not isinstance(resources, Mapping):
        return [problem(f"{at}.resources", "must be an object", resources)]
    claims = (resources or {}).get("claims")
    if claims is not None and (
        not isinstance(claims, list) or not all(isinstance(c, Mapping) for c in claims)
    ):
        return [problem(f"{at}.resources.claims", "must be a list of objects", claims)]
    return []


def _requests(member: schema.Member, where: str, defects: list[str]) -> tuple[DeviceRequest, ...]:
    """A member's device requests; each name once (the XRD's list-map key), no blank CEL."""
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
    metadata, pod_spec = _pod_template(member.template, where, defects)
    return Member(
        role=role,
        pool=member.nodePoolName,
        requests=requests,
        worker_nodes=member.worker.nodes if role == WORKER and member.worker else None,
        pod_metadata=metadata,
        pod_spec=pod_spec,
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
    return ParsedSpec(
        cluster=cluster if isinstance(cluster, str) else "",
        tolerations=() if bad_tolerations else tuple(tolerations or ()),
        engines=tuple(engines),
        invalid=tuple(invalid),
        defects=tuple(defects),
    )
