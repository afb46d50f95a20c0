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

    - Devices come only through the member's `nodeSelector.devices`, the
      one claim the fleet scheduler charges: a template may add no
      `spec.resourceClaims` entry (the workloads add `modelplane-devices`),
      a container may route no other claim, and no container,
      initContainer or pod-level `resources` may limit or request anything
      but `cpu`, `memory`, `ephemeral-storage` and `hugepages-<size>` (an
      extended resource such as `nvidia.com/gpu` takes devices through a
      device plugin, uncharged). `ephemeralContainers` are refused: a
      template cannot carry them and they would escape the same check.
    - The pod's identity is its namespace's: `serviceAccountName` (and its
      deprecated alias `serviceAccount`) may only be unset or `default`.
      Modelplane composes no ServiceAccount for tenants, so any other name
      on the workload cluster belongs to someone else (the agent's, a
      driver's).
    - Priority is the platform's: `priority` may not be set (the
      Priority admission plugin derives it), and `priorityClassName` only
      to a class the replica's InferenceCluster approves
      (`spec.tenancy.priorityClassNames`; `priority_class_problem`, checked
      by compose-model-replica at admission and by compose-model-deployment
      for every cluster it may place on, each knowing the cluster).
    - Metadata is bounded: the agent keeps every pod's labels, so a
      template's `metadata.labels` hold at most MAX_LABELS entries of at
      most MAX_LABEL_BYTES together, and `metadata.annotations`, copied
      into every Object and request, at most MAX_ANNOTATION_BYTES; keys and
      values are strings.

Everything else is passed through untouched: the workload cluster's API
server and its admission (Pod Security among it: host namespaces,
privileged containers, host paths and ports, per the cluster's
`spec.workloads.podSecurity`) judge the rest, and a refusal there reaches
the replica's conditions (design/tenancy.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from modelplane_common.inputs import problem

DEFAULT_SCHEDULER = "default-scheduler"
# The one pod claim a template's pods hold, added by compose-model-replica's workloads.
DEVICE_CLAIM = "modelplane-devices"
DEFAULT_SERVICE_ACCOUNT = "default"
# Resources a container may limit or request: none of them is a device.
PLAIN_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
HUGEPAGES_PREFIX = "hugepages-"
MAX_LABELS = 64
MAX_LABEL_BYTES = 8 * 1024  # keys and values, UTF-8, as Kubernetes counts annotations
MAX_ANNOTATION_BYTES = 64 * 1024

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
        *device_bypass(spec, at),
        *identity_defects(spec, at),
        *metadata_defects(metadata, at),
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


def device_bypass(spec: Mapping, at: str) -> list[str]:
    """The fields of a pod spec that would take devices outside `nodeSelector.devices`."""
    defects = [
        problem(
            f"{at}.spec.resourceClaims[{i}]",
            "is not allowed: devices come only from the member's nodeSelector.devices, "
            "the claim the fleet scheduler charges",
            claim.get("name") if isinstance(claim, Mapping) else claim,
        )
        # The first entry names the rule (every entry is refused alike).
        for i, claim in enumerate(_listed(spec.get("resourceClaims"))[:1])
    ]
    if spec.get("ephemeralContainers") is not None:
        defects.append(
            problem(
                f"{at}.spec.ephemeralContainers",
                "is not allowed in a template",
                spec["ephemeralContainers"],
            )
        )
    defects.extend(_resource_defects(spec.get("resources"), f"{at}.spec.resources"))
    for field in ("initContainers", "containers"):
        for i, container in enumerate(_listed(spec.get(field))):
            if isinstance(container, Mapping):
                defects.extend(_container_device_defects(container, f"{at}.spec.{field}[{i}]"))
    return defects


def _listed(value: object) -> list:
    return value if isinstance(value, list) else []


def _container_device_defects(container: Mapping, at: str) -> list[str]:
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return []
    defects = _resource_defects(resources, f"{at}.resources")
    names = [
        c.get("name") if isinstance(c, Mapping) else c for c in _listed(resources.get("claims"))
    ]
    other = next((i for i, name in enumerate(names) if name != DEVICE_CLAIM), None)
    if other is not None:
        defects.append(
            problem(
                f"{at}.resources.claims[{other}].name",
                f"must be {DEVICE_CLAIM}: the one claim the fleet scheduler charges",
                names[other],
            )
        )
    return defects


def _resource_defects(resources: object, at: str) -> list[str]:
    """Every limit or request of a resource that is not plain (cpu, memory, storage,
    hugepages): an extended resource is a device the fleet scheduler did not charge."""
    if not isinstance(resources, Mapping):
        return []
    defects = []
    for kind in ("limits", "requests"):
        amounts = resources.get(kind)
        if amounts is not None and not isinstance(amounts, Mapping):
            defects.append(problem(f"{at}.{kind}", "must be an object", amounts))
            continue
        # The first one names the rule; a map of thousands would make a message of thousands.
        name = next((n for n in amounts or {} if not is_plain_resource(n)), None)
        if name is not None:
            defects.append(
                problem(
                    f'{at}.{kind}["{name}"]',
                    "is not allowed: only cpu, memory, ephemeral-storage and hugepages-* "
                    "may be set; devices come only from the member's nodeSelector.devices",
                    name,
                )
            )
    return defects


def is_plain_resource(name: object) -> bool:
    """Whether a container may limit or request `name`: no device stands behind it."""
    return isinstance(name, str) and (name in PLAIN_RESOURCES or name.startswith(HUGEPAGES_PREFIX))


def identity_defects(spec: Mapping, at: str) -> list[str]:
    """A ServiceAccount other than the namespace's default, or a priority set by value."""
    defects = []
    for field in ("serviceAccountName", "serviceAccount"):
        account = spec.get(field)
        if account not in (None, "", DEFAULT_SERVICE_ACCOUNT):
            defects.append(
                problem(
                    f"{at}.spec.{field}",
                    f"must be {DEFAULT_SERVICE_ACCOUNT} or unset: another ServiceAccount on the "
                    "workload cluster is not the namespace's to use",
                    account,
                )
            )
    if spec.get("priority") is not None:
        defects.append(
            problem(
                f"{at}.spec.priority",
                "is not allowed: priority comes from an approved priorityClassName",
                spec["priority"],
            )
        )
    return defects


def priority_class_defects(spec: Mapping, at: str, approved: tuple[str, ...]) -> list[str]:
    """The template's `priorityClassName` when its cluster does not approve it
    (`priority_class_problem`), as a list of defects."""
    found = priority_class_problem(spec.get("priorityClassName"), at, approved)
    return [found] if found is not None else []


def priority_class_problem(name: object, at: str, approved: tuple[str, ...]) -> str | None:
    """Why a template at `at` may not name the PriorityClass `name` on a cluster that
    approves `approved`; None when it may. A class pre-empts other tenants' pods, so only
    the platform's list may be named; unset (the cluster's default class) is always
    allowed. The one rule for admission (compose-model-replica) and placement
    (compose-model-deployment)."""
    if name in (None, "") or name in approved:
        return None
    allowed = ", ".join(approved) if approved else "none"
    return problem(
        f"{at}.spec.priorityClassName",
        f"is not approved on this cluster (spec.tenancy.priorityClassNames: {allowed})",
        name,
    )


def metadata_defects(metadata: Mapping, at: str) -> list[str]:
    """Labels and annotations that are not string maps, or larger than the bounds."""
    defects = []
    for field, limit in (("labels", MAX_LABEL_BYTES), ("annotations", MAX_ANNOTATION_BYTES)):
        entries = metadata.get(field) or {}
        where = f"{at}.metadata.{field}"
        if not isinstance(entries, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in entries.items()
        ):
            defects.append(problem(where, "must be an object of strings", entries))
            continue
        size = sum(len(k.encode()) + len(v.encode()) for k, v in entries.items())
        if size > limit:
            defects.append(
                problem(where, f"must hold at most {limit} bytes of keys and values", size)
            )
        if field == "labels" and len(entries) > MAX_LABELS:
            defects.append(problem(where, f"must hold at most {MAX_LABELS} labels", len(entries)))
    return defects


def _shape_defects(metadata: Mapping, spec: Mapping, at: str) -> list[str]:
    defects = []
    for name, kind, words in _MERGED_FIELDS:
        if spec.get(name) is not None and not isinstance(spec[name], kind):
            defects.append(problem(f"{at}.spec.{name}", f"must be {words}", spec[name]))
    for i, claim in enumerate(spec.get("resourceClaims") or []):
        if not isinstance(claim, Mapping):
            defects.append(problem(f"{at}.spec.resourceClaims[{i}]", "must be an object", claim))
    defects.extend(_anti_affinity_defects(spec, at))
    names: set[str] = set()
    init = spec.get("initContainers")
    if init is not None and not isinstance(init, list):
        defects.append(problem(f"{at}.spec.initContainers", "must be a list", init))
    for field in ("initContainers", "containers"):
        for i, container in enumerate(_listed(spec.get(field))):
            defects.extend(_container_defects(container, f"{at}.spec.{field}[{i}]", names))
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
