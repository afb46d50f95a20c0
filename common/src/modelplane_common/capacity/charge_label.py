"""Which replicas a reader of the fleet must read: the `modelplane.ai/charge` label.

A pool with a fresh observation starts from its histogram, and a replica
pinned to it is charged only while that histogram cannot contain it yet
(pools.py, rule 1). Once every pool it uses counts it, reading the replica
changes nothing: the ledgers come out the same without it. So each deployment
labels its replicas, on every pass that plans:

    counted   the replica was kept where it is, and on each of its pools the
              fresh observation already contains it (`Charge.contained_by`):
              its pods are scheduled, at or before the pool's `observedAt`;
    pending   anything else: new, moved, reshaped, waiting for admission, not
              all pods scheduled, on a pool without a fresh observation, or
              kept unchanged by a pass that planned nothing.

A reader of a cluster whose pools are all fresh (`reads_pending_only`) then
requires only its `pending` replicas and applies rule 1 to them itself, so
its ledgers equal those built from every replica whenever the labels are
true. A cluster with any pool counted by its fallback charges every replica
pinned to it, so its reader requires all of them.

Why a `counted` label stays true for the reader: the label was judged
against the observation the deployment read, and any reader that sees the
label reads the InferenceCluster later, from the same Crossplane cache,
so its `observedAt` is the same or newer; `scheduledAt <= observedAt` still
holds (a published `observedAt` moves only to a report that shows a new
histogram, or confirms one, modelplane_common.currency: a report at which the
replica was already scheduled). What can make it untrue is the replica
itself: its pods restarting
(PodsScheduled no longer True) before its deployment relabels it, which
the replica's status change triggers at once (design/admission.md, "What a
reader reads").

`pending` is always safe to write: a reader that reads a replica it need
not charge judges rule 1 itself and charges nothing. Only `counted` needs
the evidence above.

A released replica (`Charge.released`: orphaned, or its pods refused past
the grace) holds nothing under either label. An orphan keeps the label its
deployment last wrote, since no deployment writes it again: `counted`, it is
not read (its pods, while they still run, are in the histogram, and once
they are gone there is nothing to charge); `pending`, it is read and found
released.
"""

from __future__ import annotations

from datetime import datetime

from modelplane_common.capacity.fleet import Charge, Cluster
from modelplane_common.capacity.pools import basis_of


def counted_by_pools(charge: Charge, cluster: Cluster | None, now: datetime) -> bool:
    """Whether every pool the replica is pinned to counts it in a fresh observation."""
    if cluster is None or not charge.engines:
        return False
    for engine in charge.engines:
        pool = cluster.pool(engine.pool)
        if pool is None:
            return False
        observed_at = basis_of(pool, now).observed_at
        if observed_at is None or not charge.contained_by(observed_at):
            return False
    return True


def reads_pending_only(cluster: Cluster, now: datetime) -> bool:
    """Whether a reader of this cluster may read only its pending replicas: every pool has
    a fresh observation (a pool counted by its fallback charges every replica on it)."""
    return all(basis_of(pool, now).observed for pool in cluster.pools)
