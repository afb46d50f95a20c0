"""An orphaned ModelReplica: composed from a ModelDeployment that no longer owns it.

`kubectl delete modeldeployment --cascade=orphan` (or an `orphan` finalizer)
makes the garbage collector remove the deployment's ownerReference from every
ModelReplica composed from it, then delete the deployment alone. Nothing would
heal, move or remove those replicas again, and they would stay charged.

The rule, judged from the replica's own metadata and never from a read of
anything else (a deployment missing from a request is a momentary absence, an
ownerReference the garbage collector removed is not):

    a replica Crossplane composed (annotation
    `crossplane.io/composition-resource-name`: Crossplane v2 writes it on
    every resource it composes, together with its controller ownerReference,
    and refuses to read a composed resource without it) that has no
    controller ownerReference any more

is orphaned. compose-model-replica then composes nothing (its workloads go)
and reports PodsCreated False/Orphaned, which every ledger reads as holding no
capacity (`pods_created.released`). A replica without that annotation
(written by hand, or an example: a root composite) is judged as before, and
so is one that still has its controller.

Why not the `crossplane.io/composite` label: Crossplane copies the root
composite's value of it onto everything it composes, and a tenant may set it
on its own ModelDeployment (to `<name>-0`, the replica would carry its own
name, as an XR Crossplane labels itself does). Only Crossplane writes
ModelReplicas (the tenancy ValidatingAdmissionPolicy,
deploy/control-plane/tenancy.yaml), and no function copies a tenant's
annotations onto one, so the annotation is Crossplane's word alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from modelplane_common import pods_created

# Set by Crossplane on every composed resource: its name in the composite's pipeline.
COMPOSED_ANNOTATION = "crossplane.io/composition-resource-name"
# The PodsCreated (and WorkloadsComposed) reason of an orphaned replica.
ORPHANED = pods_created.ORPHANED


def composed(metadata: Mapping) -> bool:
    """Whether Crossplane composed the object (whoever set its labels)."""
    annotations = metadata.get("annotations")
    name = annotations.get(COMPOSED_ANNOTATION) if isinstance(annotations, Mapping) else None
    return isinstance(name, str) and bool(name)


def orphaned(metadata: Mapping) -> bool:
    """Whether a replica's metadata says it was composed and no longer has its controller."""
    if not composed(metadata):
        return False
    references = metadata.get("ownerReferences")
    return not any(
        isinstance(r, Mapping) and r.get("controller") is True
        for r in (references if isinstance(references, list) else ())
    )
