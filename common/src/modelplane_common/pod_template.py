"""A member's pod template: the one rule for what a tenant may write in it.

Both compose-model-deployment (which refuses the ModelDeployment with
`InvalidDeployment` before anything is placed or charged) and
compose-model-replica (which refuses a ModelReplica written some other way)
read templates through `read`, so the two can never disagree. A replica
that names a template by digest (`modelplane_common.template_digest`) gets
it from its ModelDeployment only when the digest proves it is the one the
deployment read; compose-model-replica then only `split`s it.

What is checked, and why
    - Shape: a PodTemplateSpec (`{metadata, spec}`) or a bare pod spec, with
      at least one container, each an object with a name of its own (the image is
      the cluster's to require: a template may leave it to a mutating webhook). The
      fields the workloads merge into (`nodeSelector`, `tolerations`,
      `resourceClaims`, `affinity`, a container's `resources.claims`) must
      have their Kubernetes shape, or merging would fail half-way.
    - Scheduling stays with the cluster's scheduler: `nodeName` binds a pod
      to a node without kube-scheduler (no DRA allocation, no pool), and a
      `schedulerName` other than `default-scheduler` hands the pod to
      another scheduler. Either would run pods the fleet scheduler neither
      placed nor charged, so a template that sets one is refused.

Everything else is passed through untouched: the workload cluster's API
server and its admission (Pod Security among it) judge the rest, and a
refusal there reaches the replica's conditions (design/tenancy.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from modelplane_common.inputs import problem

DEFAULT_SCHEDULER = "default-scheduler"

# Pod spec fields the workloads merge into, with the type each must have.
_MERGED_FIELDS = (
    ("nodeSelector", Mapping, "an object"),
    ("tolerations", list, "a list"),
    ("resourceClaims", list, "a list"),
    ("affinity", Mapping, "an object"),
)


def read(raw: object, where: str) -> tuple[Mapping, Mapping, list[str]]:
    """(pod metadata, pod spec, defects) of the template at `where` (the member's path).

    With any defect the metadata and spec are empty: nothing of a template
    that cannot run is composed."""
    if not isinstance(raw, Mapping):
        return {}, {}, [f"{where}.template must be a pod template with containers"]
    metadata, spec = _parts(raw)
    if not isinstance(metadata, Mapping):
        return {}, {}, [f"{where}.template.metadata must be an object"]
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    if not isinstance(containers, list) or not containers:
        return {}, {}, [f"{where}.template has no containers"]
    assert isinstance(spec, Mapping)
    at = f"{where}.template"
    defects = [
        *_shape_defects(metadata, spec, at),
        *scheduling_bypass(spec, at),
    ]
    return (metadata, spec, []) if not defects else ({}, {}, defects)


def _parts(raw: Mapping) -> tuple[object, object]:
    """(metadata, spec) of a PodTemplateSpec, or ({}, raw) of a bare pod spec."""
    if "spec" in raw:
        return raw.get("metadata") or {}, raw.get("spec")
    return {}, raw


def split(template: Mapping) -> tuple[Mapping, Mapping]:
    """(pod metadata, pod spec) of a template `read` already accepted, checking nothing
    again: compose-model-replica uses it on a template whose digest proves that
    compose-model-deployment read it (modelplane_common.template_digest). A part that
    is not an object, which such a template never has, is empty."""
    metadata, spec = _parts(template)
    return (
        metadata if isinstance(metadata, Mapping) else {},
        spec if isinstance(spec, Mapping) else {},
    )


def scheduling_bypass(spec: Mapping, at: str) -> list[str]:
    """The fields of a pod spec that take a pod away from the cluster's scheduler."""
    defects = []
    node = spec.get("nodeName")
    if node not in (None, ""):
        defects.append(
            problem(
                f"{at}.spec.nodeName",
                "is not allowed: it binds pods without the cluster's scheduler, "
                "outside the pool they were placed and charged on",
                node,
            )
        )
    scheduler = spec.get("schedulerName")
    if scheduler not in (None, "", DEFAULT_SCHEDULER):
        defects.append(
            problem(
                f"{at}.spec.schedulerName",
                f"must be {DEFAULT_SCHEDULER} or unset: another scheduler would place pods "
                "the fleet scheduler did not charge",
                scheduler,
            )
        )
    return defects


def _shape_defects(metadata: Mapping, spec: Mapping, at: str) -> list[str]:
    defects = []
    if not isinstance(metadata.get("labels") or {}, Mapping):
        defects.append(problem(f"{at}.metadata.labels", "must be an object", metadata["labels"]))
    for name, kind, words in _MERGED_FIELDS:
        if spec.get(name) is not None and not isinstance(spec[name], kind):
            defects.append(problem(f"{at}.spec.{name}", f"must be {words}", spec[name]))
    for i, claim in enumerate(spec.get("resourceClaims") or []):
        if not isinstance(claim, Mapping):
            defects.append(problem(f"{at}.spec.resourceClaims[{i}]", "must be an object", claim))
    defects.extend(_anti_affinity_defects(spec, at))
    names: set[str] = set()
    for i, container in enumerate(spec["containers"]):
        defects.extend(_container_defects(container, f"{at}.spec.containers[{i}]", names))
    return defects


def _anti_affinity_defects(spec: Mapping, at: str) -> list[str]:
    affinity = spec.get("affinity")
    anti = (affinity or {}).get("podAntiAffinity") if isinstance(affinity, Mapping) else None
    path = f"{at}.spec.affinity.podAntiAffinity"
    if anti is None:
        return []
    if not isinstance(anti, Mapping):
        return [problem(path, "must be an object", anti)]
    terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution")
    if terms is not None and not isinstance(terms, list):
        required = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
        return [problem(required, "must be a list", terms)]
    return []


def _container_defects(container: object, at: str, names: set[str]) -> list[str]:
    if not isinstance(container, Mapping):
        return [problem(at, "must be an object", container)]
    defects = []
    name = container.get("name")
    if not isinstance(name, str) or not name:
        defects.append(problem(f"{at}.name", "is required", name))
    elif name in names:
        defects.append(problem(f"{at}.name", "repeats another container's name", name))
    else:
        names.add(name)
    resources = container.get("resources")
    if resources is not None and not isinstance(resources, Mapping):
        return [*defects, problem(f"{at}.resources", "must be an object", resources)]
    claims = (resources or {}).get("claims")
    if claims is not None and (
        not isinstance(claims, list) or not all(isinstance(c, Mapping) for c in claims)
    ):
        defects.append(problem(f"{at}.resources.claims", "must be a list of objects", claims))
    return defects
