"""The templates a replica names by digest, taken from its ModelDeployment, or why not.

compose-model-deployment writes each member's `templateDigest` instead of
its template (modelplane_common.template_digest): the digest of the template
it validated. This replica requires its ModelDeployment (by the name its
`modelplane.ai/deployment` label gives, in its own namespace) and takes a
member's template from the deployment's engine of the same name, member at
the same position, ONLY when that template's digest is the member's. The
digest is the proof: a tenant may edit the ModelDeployment at any time (it
is theirs), never the ModelReplica (design/tenancy.md, "Templates by
digest"), so an equal digest means the very template the deployment
function read and accepted, and nothing is checked again (`pod_template.split`).

An engine whose template is not in hand is not composed this pass, and the
pass is not clean, so every workload already composed for it is kept exactly
as observed (core.py, "Invariants"). Why, per case (a WorkloadsComposed reason):

    DeploymentNotResolved   not fetched yet: the first call of every replica,
                            which asks for it beside the cluster; no warning.
    DeploymentNotFound      fetched and absent, or the labels name no
                            deployment in the replica's namespace.
    TemplateDigestMismatch  the deployment's template for the member has
                            another digest (edited since: the deployment
                            rewrites the replica on its next pass, or Crossplane's
                            cache lags that rewrite), or the deployment has no
                            such engine or member; no warning, as it passes.

A new replica whose templates are not in hand has nothing to keep: it waits,
called again soon (core.py requeues while any of these is said). Engines that
carry their templates inline (the earlier form) need nothing from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from modelplane_common import pod_template, template_digest
from modelplane_common.inputs import problem

from compose_model_replica.model import Absent, DeploymentInput, DeploymentTemplates, NotFetched
from compose_model_replica.spec import Engine, Member

NOT_RESOLVED = "DeploymentNotResolved"
PRIORITY_NOT_APPROVED = "PriorityClassNotApproved"
NOT_FOUND = "DeploymentNotFound"
MISMATCH = "TemplateDigestMismatch"


@dataclass(frozen=True, slots=True)
class Unresolved:
    """Why templates are not in hand: a WorkloadsComposed reason and its message."""

    reason: str
    message: str
    warn: bool


@dataclass(frozen=True, slots=True)
class Templates:
    """What `resolve` decided: the engines ready to compose, and why the others are not."""

    engines: Mapping[str, Engine]  # by name; every member's pod metadata and spec in hand
    problems: tuple[Unresolved, ...]


@dataclass(frozen=True, slots=True)
class Reference:
    """Where the replica's templates are: its ModelDeployment, and what was fetched."""

    namespace: str
    name: str  # "" when the labels name none in the replica's namespace
    name_problem: str | None  # why they do not
    fetched: DeploymentInput


def _deployment_problem(ref: Reference) -> Unresolved | None:
    """Why the deployment itself cannot give templates; None when it was fetched."""
    if not ref.name:
        return Unresolved(NOT_FOUND, ref.name_problem or "no ModelDeployment is named", True)
    named = f"ModelDeployment {ref.namespace}/{ref.name}"
    match ref.fetched:
        case NotFetched():
            return Unresolved(NOT_RESOLVED, f"waiting for {named}", False)
        case Absent():
            return Unresolved(NOT_FOUND, f"{named} does not exist", True)
        case DeploymentTemplates():
            return None


def _member(
    engine: str, member: Member, ref: Reference, found: DeploymentTemplates
) -> Member | Unresolved:
    """The member with its template in hand, or why it cannot have it."""
    if member.template_digest is None:
        return member
    theirs = found.templates.get((engine, member.position))
    digest = template_digest.of(theirs) if theirs is not None else None
    if digest == member.template_digest:
        assert theirs is not None  # a digest was computed of it
        metadata, spec = pod_template.split(theirs)
        return replace(member, pod_metadata=metadata, pod_spec=spec)
    holds = f"holds {digest}" if digest else "holds no template there"
    return Unresolved(
        MISMATCH,
        f"engine {engine}: "
        + problem(
            f"members[{member.position}] ({member.role}).templateDigest",
            f"is not the digest of ModelDeployment {ref.namespace}/{ref.name}'s template "
            f"for it ({holds}); its workloads are kept until the deployment rewrites the replica",
            member.template_digest,
        ),
        False,
    )


def resolve(engines: tuple[Engine, ...], ref: Reference) -> Templates:
    """Each engine with its templates in hand, or why not; inline engines as they are."""
    by_reference = [e for e in engines if e.templates_by_digest]
    ready = {e.name: e for e in engines if not e.templates_by_digest}
    if not by_reference:
        return Templates(ready, ())
    whole = _deployment_problem(ref)
    if whole is not None:
        return Templates(ready, (whole,))
    assert isinstance(ref.fetched, DeploymentTemplates)
    problems: list[Unresolved] = []
    for engine in by_reference:
        members = [_member(engine.name, m, ref, ref.fetched) for m in engine.members]
        missing = [m for m in members if isinstance(m, Unresolved)]
        if missing:
            problems.extend(missing)
        else:
            ready[engine.name] = replace(
                engine, members=tuple(m for m in members if isinstance(m, Member))
            )
    return Templates(ready, tuple(problems))


def approve(held: Templates, priority_class_names: tuple[str, ...]) -> Templates:
    """`held` without the engines whose templates name a PriorityClass the cluster does not
    approve (`pod_template.priority_class_defects`): such an engine composes nothing new
    and keeps its workloads as observed, like any engine whose template is not in hand."""
    refused: list[Unresolved] = []
    ready: dict[str, Engine] = {}
    for name, engine in held.engines.items():
        defects = [
            defect
            for member in engine.members
            for defect in pod_template.priority_class_defects(
                member.pod_spec,
                f"engine {name}: members[{member.position}] ({member.role}).template",
                priority_class_names,
            )
        ]
        if defects:
            refused.append(Unresolved(PRIORITY_NOT_APPROVED, "; ".join(defects), True))
        else:
            ready[name] = engine
    return Templates(ready, (*held.problems, *refused))


def refusal(held: Templates) -> str | None:
    """Why admission may not judge the replica: a template its cluster refuses."""
    refused = [u.message for u in held.problems if u.reason == PRIORITY_NOT_APPROVED]
    return "; ".join(refused) if refused else None
