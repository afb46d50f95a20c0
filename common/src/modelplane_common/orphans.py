"""An orphaned ModelReplica: composed from a ModelDeployment that no longer owns it.

`kubectl delete modeldeployment --cascade=orphan` (or an `orphan` finalizer)
makes the garbage collector remove the deployment's ownerReference from every
ModelReplica composed from it, then delete the deployment alone. Nothing would
heal, move or remove those replicas again, and they would stay charged.

The rule, judged from the replica's own metadata and never from a read of
anything else (a deployment missing from a request is a momentary absence, an
ownerReference the garbage collector removed is not):

    a replica Crossplane composed (label `crossplane.io/composite` naming a
    composite other than the replica itself: Crossplane sets it on every
    composed resource together with its controller ownerReference, and labels
    an XR it reconciles with the XR's own name) that has no controller
    ownerReference any more

is orphaned. compose-model-replica then composes nothing (its workloads go)
and reports PodsCreated False/Orphaned, which every ledger reads as holding no
capacity (`pods_created.released`). A replica written without that label (by
hand, or an example) is judged as before.
"""

from __future__ import annotations

from collections.abc import Mapping

from modelplane_common import pods_created

# Set by Crossplane on every composed resource: the name of its composite.
COMPOSITE_LABEL = "crossplane.io/composite"
# The PodsCreated (and WorkloadsComposed) reason of an orphaned replica.
ORPHANED = pods_created.ORPHANED


def orphaned(metadata: Mapping) -> bool:
    """Whether a replica's metadata says it was composed and no longer has its controller."""
    labels = metadata.get("labels")
    composite = labels.get(COMPOSITE_LABEL) if isinstance(labels, Mapping) else None
    # Crossplane labels an XR it reconciles with its own name: that is no composite of it.
    if not composite or composite == metadata.get("name"):
        return False
    references = metadata.get("ownerReferences")
    return not any(
        isinstance(r, Mapping) and r.get("controller") is True
        for r in (references if isinstance(references, list) else ())
    )
