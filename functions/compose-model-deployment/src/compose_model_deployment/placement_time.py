"""When a replica counts as placed: the `modelplane.ai/placed-at` one pass gives it.

The stamp is the key of the replica's admission verdict and its place in its
cluster's admission queue (design/admission.md, "The placement time"), so a
pass that decides the same thing twice must stamp the same time: Crossplane
reads from caches and reconciles the same (possibly stale) view again, and a
different stamp on a repeat is a new placement to judge, a move in the queue,
and, on an older view, an older placement written back.

Model
    kept        a replica that stays on its pools keeps its stamp (one
                without a stamp, written before placed-at existed, is given
                its creationTimestamp, the time admission queues it at).
    moved       a replica that leaves its place (healed, drained, its cluster
                gone, its pools unable to hold it) or is re-pooled on its own
                cluster is stamped from the view that moved it, never from
                the clock:

                    placed-at = max(due + ACT_WITHIN, view, previous + STEP)

                `due` is when the view shows the move fell due (the failure's
                own time, placement.failure_due; a missing cluster's first
                sight plus the grace; for a cause the view does not date, the
                view), `view` the newest observation the view holds,
                `previous` the placement it replaces.
    new         a replica placed for the first time is stamped with the
                pass's `now`: nothing in the view dates it (see
                design/admission.md for why no input can).

Invariants
    - A function of the view: the same view decided at any `now` after the
      move fell due gives the same stamp, so a repeat applies nothing.
    - A move is stamped at least STEP after the placement it replaces: the
      old verdict binds nothing (it names the old stamp), and a stale repeat
      never queues the replica ahead of where it was. It is stamped at least
      ACT_WITHIN after the failing condition's transition, so that condition,
      stamped to the second, reads as the old placement's and moves nothing
      again.
    - ACT_WITHIN after the move fell due: a deployment is called again at the
      instant a failure falls due (a deadline of its TTL, decision.py), or
      within `requeue.CONVERGING` while its watch circuit may drop the event
      that brings it, so on a healthy control plane the stamp is no earlier
      than the apply that makes the move visible, and admission's commit delay
      still runs from when every peer can see it. A move decided later than
      that (a control plane behind by more) gets a shorter commit delay.
    - Never older than the view: a replica that could move only long after
      its failure fell due (stranded until capacity freed up) is stamped no
      earlier than the newest observation, not at its old failure, so it does
      not skip the commit delay and jump the queue of everyone placed since.
      A timely move is unaffected (its `due + ACT_WITHIN` is at or after
      `now`, which no observation passes), so heartbeats between two
      reconciles of the same failure do not change its stamp.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from modelplane_common import requeue
from modelplane_common.capacity.fleet import Cluster
from modelplane_common.observation import Observation

from compose_model_deployment.model import OwnReplica

# How long after a move falls due the deployment decides it, at the latest, on a healthy
# control plane: its deadline, or its converging requeue while events may be dropped.
ACT_WITHIN = requeue.CONVERGING
# How far after the placement it replaces a move is stamped: conditions are stamped to
# the second, and "older than the placement" compares to the second.
STEP = timedelta(seconds=1)


def newest_observation(clusters: Iterable[Cluster]) -> datetime | None:
    """The latest moment the view describes: the newest `observedAt` any pool publishes
    (the newest histogram change: a heartbeat moves no published time,
    modelplane_common.currency)."""
    return max(
        (
            p.observation.observed_at
            for c in clusters
            for p in c.pools
            if isinstance(p.observation, Observation)
        ),
        default=None,
    )


def kept_at(own: OwnReplica, now: datetime) -> datetime:
    """A replica that stays where it is keeps its placement time."""
    return own.placed_at or own.created_at or now


@dataclass(frozen=True, slots=True)
class MoveDates:
    """What one pass's view dates about the moves it may make."""

    # By replica name: when its move fell due, for the causes the view dates.
    dues: Mapping[str, datetime]
    # The newest observation the view holds (newest_observation); None: none.
    view: datetime | None

    def moved_at(self, previous: OwnReplica, now: datetime) -> datetime:
        """The placement time of a replica that moves or is re-pooled (the module's rule).

        `now` only when the view dates neither the move nor the previous placement."""
        due = self.dues.get(previous.name, self.view)
        before = previous.placed_at or previous.created_at
        times = [
            *([due + ACT_WITHIN] if due is not None else []),
            *([self.view] if self.view is not None else []),
            *([before + STEP] if before is not None else []),
        ]
        return max(times, default=now)
