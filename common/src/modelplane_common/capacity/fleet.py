"""The fleet as the capacity rules see it: pools, clusters and the replicas pinned to them.

Shared by the scheduler (compose-model-deployment), which charges every
replica it reads to the pools it is pinned to before placing new ones, and
by admission on the replica side (compose-model-replica), which charges the
replicas ahead of its own. Both read the wire into these small frozen types;
the pure core (pools.py, fit.py) never sees a Struct, a dict from the wire
or the clock. Every type here is hashable and ordered where the core sorts
it, so a verdict is a deterministic function of its inputs.

Vocabulary
    pool key      (cluster name, pool name)
    resolved      a member's requests matched to one pool's device kinds
                  (deviceClassName and count per claimed request)
    charge        a replica pinned to pools that capacity must subtract
                  unless the pool's observation already contains it
    fallback      how a pool without a fresh observation is counted
                  (`Fallback`, rule 2 of design/api.md section 6)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from modelplane_common.capacity.fit import NodeScoring
from modelplane_common.cluster_tenancy import OPEN, ClusterTenancy
from modelplane_common.devices import DeviceKind
from modelplane_common.inputs import DEFAULT_MAX_AGE
from modelplane_common.observation import DeviceKinds, ParsedObservation
from modelplane_common.selectors import EVERYTHING, LabelSelector
from modelplane_common.tolerations import Taint, Toleration

PoolKey = tuple[str, str]


class Role(StrEnum):
    STANDALONE = "Standalone"
    LEADER = "Leader"
    WORKER = "Worker"


# Rule "engine shape", the XRDs' CEL rule on an engine, with its message.
ENGINE_SHAPE_RULE = "an engine has one Standalone member, or one Leader and one Worker member"


def has_engine_shape(roles: Iterable[str]) -> bool:
    """Rule "engine shape": one Standalone member, or one Leader and one Worker member."""
    return sorted(roles) in ([Role.STANDALONE], [Role.LEADER, Role.WORKER])


def is_gang(roles: Iterable[str]) -> bool:
    """Rule "gang": an engine whose members are not one Standalone is a gang.

    design/api.md allows one Standalone member, or one Leader and one Worker
    member; for those shapes "has a Leader" and "has a member that is not
    Standalone" agree. Where a replica read leniently breaks the shape (a
    Worker without its Leader), the pods of one copy still need distinct
    nodes, so the rule that errs towards a gang is the one kept.
    """
    return any(role != Role.STANDALONE for role in roles)


def pods_per_copy(role: str, worker_nodes: int | None) -> int:
    """Rule "pods per copy": a Worker member runs `worker.nodes` pods in each copy of
    its engine (each on its own node); any other member, or a Worker whose
    `worker.nodes` cannot be read, runs one."""
    return worker_nodes if role == Role.WORKER and worker_nodes is not None else 1


class Fallback(StrEnum):
    """How a pool without a fresh observation is counted (`spec.observation.fallback`,
    overridden per pool by `spec.nodePools[].fallback`).

    WHOLE_NODE    every claiming pod takes a whole empty node: never over-promises.
    DEVICE_COUNT  the pool's declared devices minus what its replicas claim, one
                  total per kind (capacity/devicecount.py): may over-promise when
                  the free devices are fragmented over nodes; healing catches it.
    """

    WHOLE_NODE = "WholeNode"
    DEVICE_COUNT = "DeviceCount"


# --- the fleet --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pool:
    cluster: str
    name: str
    nodes: int  # the most nodes the pool can have (maxNodeCount else nodeCount)
    # Declared device kinds, in declared order (the matcher reads attributes and capacity).
    devices: tuple[DeviceKind, ...] = field(hash=False, compare=False)
    # The DRA kinds among them, as histograms count them.
    kinds: DeviceKinds = field(default_factory=lambda: DeviceKinds((), ()))
    # None when the cluster is Declared; else what parse_observation said.
    observation: ParsedObservation | None = None
    # Why the published observation is not used even if it parsed (e.g. devices drifted).
    distrust: str | None = None
    # Until when its cluster vouches that the observation is current (modelplane_common.currency);
    # None: the cluster judges it not current, or publishes no verdict.
    current_until: datetime | None = None
    # How the pool is counted whenever it has no fresh observation (rule 2).
    fallback: Fallback = Fallback.WHOLE_NODE

    @property
    def key(self) -> PoolKey:
        return (self.cluster, self.name)


@dataclass(frozen=True, slots=True)
class Cluster:
    name: str
    pools: tuple[Pool, ...]
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    max_age: timedelta = DEFAULT_MAX_AGE
    # spec.access.namespaceSelector: which namespaces' deployments may place here.
    access: LabelSelector = EVERYTHING
    # spec.tenancy: the priority classes a template may name here, the namespaces reserved here.
    tenancy: ClusterTenancy = OPEN
    # spec.nodeScoring: how its scheduler scores nodes, so the node a pod is assumed on (fit.py).
    node_scoring: NodeScoring = NodeScoring.SPREAD

    def admits(self, namespace_labels: Mapping[str, str] | None) -> bool:
        """Whether a deployment in a namespace with these labels may place new replicas
        here; labels None (the Namespace cannot be read): only if access is not restricted."""
        if namespace_labels is None:
            return not self.access.requirements
        return self.access.matches(namespace_labels)

    def pool(self, name: str) -> Pool | None:
        for pool in self.pools:
            if pool.name == name:
                return pool
        return None

    def untolerated(self, tolerations: tuple[Toleration, ...], effect: str) -> tuple[Taint, ...]:
        return tuple(
            t
            for t in self.taints
            if t.effect == effect and not any(tol.tolerates(t) for tol in tolerations)
        )


# --- replicas that already exist ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResolvedRequest:
    """A member request bound to a pool kind. Synthetic matches are not kept:
    they are never claimed, so they never appear on a ModelReplica."""

    name: str
    device_class: str
    count: int
    selectors: tuple[str, ...] = ()
    # The pool kind this request claims from; None when read back from a ModelReplica,
    # whose wire form only keeps deviceClassName.
    kind: str | None = None


@dataclass(frozen=True, slots=True)
class PlacedMember:
    role: Role
    pool: str
    requests: tuple[ResolvedRequest, ...]
    pods_per_copy: int = 1


@dataclass(frozen=True, slots=True)
class PlacedEngine:
    name: str
    copies: int
    members: tuple[PlacedMember, ...]

    @property
    def pool(self) -> str:
        return self.members[0].pool

    @property
    def is_gang(self) -> bool:
        return is_gang(m.role for m in self.members)


@dataclass(frozen=True, slots=True)
class Charge:
    """A replica that holds (or will hold) devices on the pools it is pinned to."""

    namespace: str
    name: str
    cluster: str
    engines: tuple[PlacedEngine, ...]
    pods_scheduled: bool = False
    scheduled_at: datetime | None = None
    # PodsCreated False/NotCreated: its pods were refused past the grace, so it holds
    # nothing (modelplane_common.pods_created).
    released: bool = False

    def contained_by(self, observed_at: datetime) -> bool:
        """Rule 1: the histogram already counts this replica's devices."""
        return (
            self.pods_scheduled
            and self.scheduled_at is not None
            and self.scheduled_at <= observed_at
        )
