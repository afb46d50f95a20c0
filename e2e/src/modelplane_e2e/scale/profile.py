"""What a fleet-scale run is made of: the fleet, the other work on it, the arrivals.

Everything is drawn from one `random.Random(seed)`, in a fixed order, so a
profile and a seed give the same fleet, background load and arrival sequence
every time. Both arms (`ARMS`) get the same: their pools are the same shape
(mirrored node for node, same background on each mirrored node) and they
receive the same deployments at the same offsets; only the InferenceClusters'
`spec.observation.mode` differs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from modelplane_e2e import fleet, manifests

GPU = fleet.H100_80GB
NIC = fleet.DeviceKind("nic", "nic.modelplane.test", 4, {"linkSpeed": {"string": "400G"}}, {})
OBSERVED, DECLARED = "observed", "declared"
ARMS = (OBSERVED, DECLARED)
ARM_LABEL = "modelplane.ai/scale-arm"
BACKGROUND = "scale-background"
# Both arms heal as soon as the schema allows the same way: a pod that cannot bind is
# re-placed after this, so a short run still sees healing.
GRACE = "1m"


@dataclass(frozen=True)
class Profile:
    """The sizes of one run; the full run and the CI run differ only here."""

    name: str
    clusters: int  # workload API servers
    nodes: int  # nodes per arm per workload cluster (both arms: twice this per cluster)
    deployments: int  # per arm
    window: float  # seconds over which the deployments arrive
    converge_timeout: float  # at most this long after the last arrival to converge
    seed: int = 7
    max_age_seconds: int = 60  # the InferenceClusters' spec.observation.maxAge

    @property
    def max_age(self) -> str:
        return f"{self.max_age_seconds}s"

    @property
    def nodes_in_all(self) -> int:
        return self.clusters * self.nodes * len(ARMS)


FULL = Profile("full", clusters=2, nodes=125, deployments=100, window=600, converge_timeout=900)
REDUCED = Profile("reduced", clusters=1, nodes=20, deployments=10, window=45, converge_timeout=420)


def team(arm: str) -> str:
    """The namespace an arm's deployments (and, on the workload clusters, pods) live in."""
    return f"scale-{arm}"


def cluster_name(arm: str, index: int) -> str:
    return f"scale-{arm}-{index}"


def pools(arm: str, index: int, nodes: int) -> list[fleet.Pool]:
    """An arm's pools on workload cluster `index`: 60% GPU-only nodes, the rest GPU + NIC."""
    plain = max(1, nodes * 3 // 5)
    prefix = f"{arm[0]}{index}"
    return [
        fleet.Pool(f"{prefix}-gpu", plain, (GPU,)),
        fleet.Pool(f"{prefix}-nic", nodes - plain, (GPU, NIC)),
    ]


@dataclass(frozen=True)
class Member:
    role: str  # Standalone, Leader or Worker
    gpus: int
    nics: int
    workers: int = 0  # on a Worker: pods per gang copy besides the leader


@dataclass(frozen=True)
class Shape:
    """One deployment's shape: `replicas` x an engine of `copies` copies of `members`."""

    name: str
    at: float  # seconds after the first arrival
    replicas: int
    copies: int
    members: tuple[Member, ...]

    @property
    def pods_per_replica(self) -> int:
        return self.copies * sum(m.workers or 1 for m in self.members)

    def gpus_of(self, role: str) -> int:
        (member,) = [m for m in self.members if m.role == role]
        return member.gpus

    def nics_of(self, role: str) -> int:
        (member,) = [m for m in self.members if m.role == role]
        return member.nics

    @property
    def smallest_pod(self) -> tuple[int, int]:
        return min((m.gpus, m.nics) for m in self.members)


def _standalone(draw: random.Random) -> tuple[int, tuple[Member, ...]]:
    gpus = draw.choices((1, 2, 4, 8), weights=(35, 25, 25, 15))[0]
    return draw.choice((1, 1, 2)), (Member("Standalone", gpus, 0),)


def _gang(draw: random.Random) -> tuple[int, tuple[Member, ...]]:
    """A leader and 1-3 workers (a gang of 2-4 pods), half of them each with one NIC."""
    gpus = draw.choice((2, 4, 8))
    nics = draw.choice((0, 1))
    workers = draw.randint(1, 3)
    return 1, (Member("Leader", gpus, nics), Member("Worker", gpus, nics, workers))


def shapes(profile: Profile) -> list[Shape]:
    """The arrival sequence: `deployments` shapes at seeded offsets within the window."""
    draw = random.Random(profile.seed)
    offsets = sorted(draw.uniform(0, profile.window) for _ in range(profile.deployments))
    out = []
    for index, at in enumerate(offsets):
        copies, members = _gang(draw) if draw.random() < 0.3 else _standalone(draw)
        replicas = draw.choices((1, 2, 3), weights=(70, 20, 10))[0]
        out.append(Shape(f"md-{index:03d}", round(at, 1), replicas, copies, members))
    return out


def background(profile: Profile) -> list[int]:
    """GPUs other work holds on node i of every pool (the same i in every pool and arm):
    a third of the nodes free, the rest with 1-7 taken, a few full, so free devices are
    fragmented across nodes."""
    draw = random.Random(profile.seed + 1)
    taken = []
    for _ in range(profile.nodes):
        roll = draw.random()
        taken.append(0 if roll < 0.35 else GPU.count if roll > 0.93 else draw.randint(1, 7))
    return taken


def _device_requests(member: Member) -> list[dict]:
    wanted = [("gpu", member.gpus), ("nic", member.nics)]
    return [{"name": name, "count": count} for name, count in wanted if count]


def _member(member: Member) -> dict:
    spec: dict = {
        "role": member.role,
        "nodeSelector": {"devices": _device_requests(member)},
        "template": {
            "spec": {"containers": [{"name": "engine", "image": "example.invalid/engine:v1"}]}
        },
    }
    if member.workers:
        spec["worker"] = {"nodes": member.workers}
    return spec


def deployment(shape: Shape, arm: str) -> dict:
    engine = {
        "name": "serve",
        "copies": shape.copies,
        "members": [_member(m) for m in shape.members],
    }
    return manifests.model_deployment(
        shape.name,
        namespace=team(arm),
        engines=[engine],
        replicas=shape.replicas,
        cluster_labels={ARM_LABEL: arm},
        healing={"unschedulableGracePeriod": GRACE},
    )


def _claim_template(count: int) -> dict:
    return manifests.gpu_claim_template(
        f"gpus-{count}", namespace=BACKGROUND, device_class=GPU.driver, count=count
    )


def _background_pod(node: str, count: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bg-{node}", "namespace": BACKGROUND, "labels": {"app": "bg"}},
        "spec": manifests.claiming_pod_spec(
            node_selector={"kubernetes.io/hostname": node},
            claim_template=f"gpus-{count}",
            container="work",
            image="example.invalid/work:v1",
        ),
    }


def background_taken(pool_list: list[fleet.Pool], taken: list[int]) -> dict[str, int]:
    """GPUs other work holds, per node of one arm's pools on one cluster: the pools split
    the profile's nodes in order, so `background` covers each of them once."""
    names = [node for pool in pool_list for node in pool.node_names()]
    return dict(zip(names, taken, strict=True))


def background_objects(held: dict[str, int]) -> list[dict]:
    """One pod per busy node, pinned to it, claiming that node's background GPUs."""
    templates = [_claim_template(count) for count in range(1, GPU.count + 1)]
    return templates + [_background_pod(node, count) for node, count in held.items() if count]
