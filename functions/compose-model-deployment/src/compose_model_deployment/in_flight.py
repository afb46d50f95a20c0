"""How many new replicas a placing pass may add: bounds on what every pass reads.

Every placing pass, fleet-wide, reads every ModelReplica labelled
`modelplane.ai/charge=pending` (fleet_reads.py): what the fresh pools must
still charge. A replica is pending from its placement until its pool's
fresh observation contains it, so a tenant could otherwise hold any number
of them (a member that claims no device is never refused by the device
quota) and grow every pass's request past the functions' 64 MB receive
limit (`modelplane_common.server`), stopping placement fleet-wide. Two
bounds keep the set small, both on NEW replicas only: a pass still keeps,
heals, moves and removes the deployment's replicas, so a bound never stops
running work, and it never takes another namespace's capacity.

    MAX_IN_FLIGHT_PER_NAMESPACE  a namespace holding this many pending replicas
                                 gets no new one until some are counted;
    MAX_PENDING_READ             a fleet holding this many pending replicas
                                 gets no new one anywhere until fewer are
                                 pending (about 10 MB of request at the
                                 972 B a replica `make bench-fleet` measures,
                                 a sixth of the 64 MB limit: design/tenancy.md).

A pass that meets a bound places what room is left and says so in
InputsValid, naming the label, the count and the bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf import struct_pb2
from modelplane_common import labels
from modelplane_common.capacity.readers import get_str, get_struct

MAX_IN_FLIGHT_PER_NAMESPACE = 256
MAX_PENDING_READ = 10_000


@dataclass(frozen=True, slots=True)
class Room:
    """How many new replicas this pass may add (None: no bound applies), and why not more."""

    new: int | None
    why: str | None = None


def _namespace(replica: struct_pb2.Struct) -> str:
    return get_str(get_struct(replica, "metadata"), "namespace")


def room(pending: Sequence[struct_pb2.Struct], namespace: str) -> Room:
    """The new replicas a deployment of `namespace` may add, given the fleet's pending set."""
    label = f"{labels.CHARGE}={labels.CHARGE_PENDING}"
    if len(pending) >= MAX_PENDING_READ:
        return Room(
            0,
            f"{label}: {len(pending)} replicas fleet-wide, at most {MAX_PENDING_READ} may "
            "be (each placing pass reads them all): no new replica is placed until fewer "
            "are pending",
        )
    held = sum(1 for replica in pending if _namespace(replica) == namespace)
    if held < MAX_IN_FLIGHT_PER_NAMESPACE:
        return Room(MAX_IN_FLIGHT_PER_NAMESPACE - held)
    return Room(
        0,
        f"{label}: namespace {namespace} holds {held} replicas in flight, at most "
        f"{MAX_IN_FLIGHT_PER_NAMESPACE} may be: no new replica is placed until some are "
        "counted",
    )


def desired_now(desired: int, own: int, bound: Room) -> int:
    """The replicas this pass plans for: `desired`, less the new ones past the bound
    (never fewer than it already has: a bound never removes a replica)."""
    if bound.new is None:
        return desired
    return min(desired, max(own, own + bound.new))
