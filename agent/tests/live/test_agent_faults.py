"""The agent under faults, against a real API server and the real kube-scheduler.

Each test runs one `modelplane-agent` process with the identity the README
installs (the ServiceAccount bound to deploy/agent's ClusterRole), breaks
something between it and the API server while kube-scheduler allocates a
device, heals it, and checks what the agent published meanwhile (every
status of the pool's PoolObservation, and for the claims faults of the
ReplicaObservation whose pod got the device too, read every 0.2 s on a
thread):

- honest freshness: a status that claims to be current at or after the
  moment an allocation was visible on the API server (plus `SLACK`, for the
  event to reach the agent) holds that allocation; and while a kind's watch
  fails, or is stalled beyond the agent's bound, that claim stops advancing
  and a condition names the kind. A pool's claim is its `observedAt`. A
  replica's is the later of its `observedAt` and the cluster's
  `replicasCurrentAt` (the latest any PoolObservation carries, read just
  before the replica), judged by the rule the control plane applies
  (`modelplane_common.currency`): the agent writes a replica report
  only when it changes, so an unchanged one stays fresh by the pools' word
  alone (design/agent.md, "Replica currency"), and that word must never
  pass a change the report does not carry;
- recovery without a restart: the process started is still running, its
  liveness probe passing, and, once healed, publishes a fresh status equal
  to the ground truth
  (`fleet.expected_histogram`: published devices minus kube-scheduler's
  allocations), allocations made during the fault included: no event lost;
  and the pools vouch for the replica reports again (their
  `replicasCurrentAt` passes the healing).

The faults: a watch stalled by a proxy (its bytes stop, its connection stays
open), RBAC revoked for one kind, the API server restarted (same port, same
etcd), 429 answers with Retry-After to status writes, and observations
deleted in the middle of a write pass. The proxied faults go through
`modelplane_e2e.faultproxy`.
"""

from __future__ import annotations

import contextlib
import itertools
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig
from modelplane_agent.kube import _KINDS, _resource
from modelplane_agent.state import POOLS, REPLICAS
from modelplane_common import labels
from modelplane_common.currency import is_current, relayed
from modelplane_common.timeutil import parse_time
from modelplane_devtools.processes import free_port
from modelplane_e2e import agent, fleet, manifests
from modelplane_e2e.faultproxy import FaultProxy, read_of, status_write_of
from modelplane_e2e.kube import Kube, KubectlFailed, eventually
from modelplane_testkit import agent_builders

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
DRIVER = "gpu.example.com"
GPU = fleet.DeviceKind("gpu", DRIVER, 4, attributes={"index": {"int": 0}}, capacity={})
NAMESPACE = "team"
# The agent's flags: heartbeats every 1.5-2 s (maxAge/5 less the spread), so a
# freshness it does not have shows within seconds; writes never held back; a kind
# not heard of for 6 s is not current (a stalled watch is relisted after 5 s).
AGENT_FLAGS = ["--max-age=10s", "--min-interval=0s", "--watch-silence=6s"]
# How long an event or a status may take to cross between the API server and the
# agent, and the second `observedAt` is truncated to.
SLACK = timedelta(seconds=2)
PoolObservation, ReplicaObservation = _resource(POOLS), _resource(REPLICAS)
# The agent's bound on a silent watch: it may claim to be current that long after the
# last byte of a stalled one. And its client's timeout on a request that gets no answer.
SILENCE = timedelta(seconds=6)
LIST_TIMEOUT = timedelta(seconds=10)
# What a PoolObservation's report reads (design/api.md, `status.observedAt`), by plural:
# it is current only once every one of them is.
POOL_READS = tuple(k.plural for kind, k in _KINDS.items() if kind != REPLICAS)
RETRY_AFTER = 3  # seconds, in the proxy's 429 answers
CHURN_REPLICAS = 400  # ReplicaObservations written in one pass, deleted in its middle
NEW_STATUS_BOUND = 10  # seconds for a new PoolObservation's first status
# The maxAge a report's claim is judged with (`Report.claims_current_at`): so long that
# the rule's other bound (a time more than maxAge ahead is stale) refuses no report here.
HORIZON = timedelta(days=1)
# The least step after an instant (datetimes count microseconds): "later than", not "at".
JUST_AFTER = timedelta(microseconds=1)
Histogram = tuple[tuple[tuple[tuple[str, int], ...], int], ...]


def now() -> datetime:
    return datetime.now(UTC)


def canonical(buckets: list[dict] | None) -> Histogram | None:
    """A histogram compared as a set of (free vector, nodes), whatever its order."""
    if buckets is None:
        return None
    return tuple(sorted((tuple(sorted(b["free"].items())), b["nodes"]) for b in buckets))


# ---------------------------------------------------------------------- what the agent says


@dataclass(frozen=True)
class Report:
    """One observation's status as read, and when: its content is a pool's histogram
    or a replica's (pods, scheduledPods). A replica's report also carries the
    cluster's `replicasCurrentAt` (`relayed` over every PoolObservation, read just
    before the replica, so it vouches for no write this read has not seen)."""

    read_at: datetime
    observed_at: datetime | None
    content: object
    conditions: tuple[dict, ...]
    replicas_current_at: datetime | None = None

    def claims_current_at(self, instant: datetime) -> bool:
        """Whether the report claims to be the agent's word as of `instant` or later.

        Judged as the control plane judges it (`is_current`, compose-inference-cluster's
        verdict on `replicasCurrentAt`, and compose-model-replica's on `observedAt`:
        fresh while either is at most maxAge old) on a clock HORIZON past `instant`
        with a maxAge of HORIZON: fresh exactly when the later time is at or after
        `instant`. A pool's report carries no `replicasCurrentAt` here, so its claim is
        its `observedAt` alone; a status without `observedAt` claims nothing.
        """
        if self.observed_at is None:
            return False
        judged_at = instant + HORIZON
        return any(
            is_current(t, judged_at, HORIZON) for t in (self.observed_at, self.replicas_current_at)
        )

    def current(self) -> bool:
        """No condition says the agent is behind (Current=False)."""
        return not any(
            (c.get("type"), c.get("status")) == ("Current", "False") for c in self.conditions
        )

    def __str__(self) -> str:
        stamp = self.observed_at.strftime("%H:%M:%S") if self.observed_at else None
        said = [(c.get("type"), c.get("status"), c.get("reason")) for c in self.conditions]
        vouched = self.replicas_current_at
        pools = f" replicasCurrentAt {vouched:%H:%M:%S}" if vouched else ""
        return f"[read {self.read_at:%H:%M:%S.%f} observedAt {stamp}{pools} {self.content} {said}]"


def report_of(status: dict, content: object, replicas_current_at: datetime | None = None) -> Report:
    try:
        observed_at: datetime | None = parse_time(status.get("observedAt"))
    except ValueError:
        observed_at = None
    conditions = tuple(status.get("conditions") or ())
    return Report(now(), observed_at, content, conditions, replicas_current_at)


@dataclass
class Reports:
    """Every status of one observation, read every 0.2 s on a thread (its own client),
    and the ground truth to hold them against. `vouched`: a replica's, whose claim
    rests on the pools' `replicasCurrentAt` while it is unchanged."""

    name: str
    read: Callable[[Client], Report]
    truth: Callable[[], object]
    kubeconfig: Path
    vouched: bool = False
    seen: list[Report] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Reports:
        client = Client(KubeConfig.from_file(self.kubeconfig))

        def loop() -> None:
            while not self._stop.wait(0.2):
                # Nothing to read while the API server restarts, or before the object exists.
                with contextlib.suppress(Exception):
                    self.seen.append(self.read(client))

        self._thread = threading.Thread(target=loop, name=f"reports-{self.name}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def latest(self) -> Report:
        assert self.seen, f"no status of {self.name} read yet"
        return self.seen[-1]

    def between(self, start: datetime, end: datetime) -> list[Report]:
        return [r for r in list(self.seen) if start <= r.read_at <= end]


def until(check: Callable[[], bool], within: timedelta) -> None:
    """Wait for `check` at most `within`; what it means is asserted afterwards."""
    deadline = time.monotonic() + within.total_seconds()
    while time.monotonic() < deadline:
        with contextlib.suppress(AssertionError):
            if check():
                return
        time.sleep(0.2)


def claims_no_freshness_it_lacks(
    reports: list[Report],
    allocated_at: datetime,
    truth: object,
    tolerance: timedelta = timedelta(),
) -> None:
    """A report that claims to be current after an allocation was visible (plus SLACK,
    plus the agent's stated `tolerance`) holds the allocation."""
    since = allocated_at + SLACK + tolerance
    false = [r for r in reports if r.claims_current_at(since) and r.content != truth]
    if false:
        pytest.fail(
            f"{len(false)} reports claim to be current after the allocation seen at "
            f"{allocated_at:%H:%M:%S.%f} (+{(since - allocated_at).total_seconds():.0f}s) "
            f"without it (truth {truth}); first: {false[0]}, last: {false[-1]}"
        )


def frozen_since(reports: list[Report], last_current: datetime, why: str = "") -> None:
    """No report read in the fault claims to be current later than `last_current` (+SLACK).
    (An agent back before any report was read leaves nothing to judge here.)"""
    late = [r for r in reports if r.claims_current_at(last_current + SLACK + JUST_AFTER)]
    if late:
        pytest.fail(
            f"the claim kept advancing past {last_current:%H:%M:%S}, when the agent last "
            f"could know the cluster{f' ({why})' if why else ''}: {len(late)} of "
            f"{len(reports)} reports, first {late[0]}, last {late[-1]}"
        )


def named(reports: list[Report], kind: str, reasons: tuple[str, ...], error: str) -> None:
    """Some report read during the fault says Current=False for one of `reasons`, in a
    message naming the kind and the error (design/api.md, PoolObservation)."""
    assert reports, "no report read during the fault"
    for report in reports:
        for c in report.conditions:
            message = str(c.get("message", ""))
            if (
                (c.get("type"), c.get("status")) == ("Current", "False")
                and c.get("reason") in reasons
                and kind in message
                and error.lower() in message.lower()
            ):
                return
    pytest.fail(
        f"no Current=False {'/'.join(reasons)} condition naming {kind} and {error!r}; "
        f"last report: {reports[-1]} {list(reports[-1].conditions)}"
    )


# ---------------------------------------------------------------------- the cluster's side


@dataclass(frozen=True)
class World:
    kube: Kube  # the admin, through kubectl
    client: Client  # the admin, through lightkube
    admin_kubeconfig: Path
    agent_kubeconfig: Path  # the agent's ServiceAccount token, straight to the API server
    agent_kube: Kube


@pytest.fixture(scope="module")
def world(cluster) -> World:
    kube = Kube("workload", ROOT / ".tools" / "bin" / "kubectl", cluster.kubeconfig)
    agent_kubeconfig = agent.install(kube, cluster.workdir).kubeconfig
    kube.apply(manifests.namespace(NAMESPACE))
    eventually(
        lambda: kube.get("serviceaccount", "default", NAMESPACE), "team's default ServiceAccount"
    )
    kube.apply(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": NAMESPACE},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]
                    }
                }
            },
        }
    )
    return World(
        kube,
        Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="agent-faults"),
        cluster.kubeconfig,
        agent_kubeconfig,
        Kube("agent", kube.kubectl_path, agent_kubeconfig),
    )


def add_pool(world: World, name: str, nodes: int = 2) -> fleet.Pool:
    """Nodes with 4 GPUs each, labelled into pool `name`, and its PoolObservation."""
    pool = fleet.Pool(name, nodes, (GPU,))
    fleet.add_nodes(world.kube, [pool])
    fleet.write_ready_without_kubelet(world.kube, [pool])
    world.kube.apply(agent_builders.pool_observation(name, [("gpu", DRIVER, DRIVER)]))
    return pool


def grant_claims(world: World, granted: bool) -> None:
    """deploy/agent's ClusterRole as it is, or without resourceclaims; waits until the
    agent's identity is allowed (or forbidden) to list them."""
    role = yaml.safe_load((ROOT / "deploy" / "agent" / "clusterrole.yaml").read_text())
    if not granted:
        for rule in role["rules"]:
            rule["resources"] = [r for r in rule["resources"] if r != "resourceclaims"]
    world.kube.apply(role)

    def effective() -> bool:
        try:
            world.agent_kube.list("resourceclaims.resource.k8s.io")
        except KubectlFailed as error:
            return not granted and "forbidden" in str(error).lower()
        return granted

    eventually(effective, f"claims {'granted' if granted else 'forbidden'}", timeout=20, every=0.2)


def pool_reports(world: World, pool: fleet.Pool) -> Reports:
    """The pool's reports, held against `fleet.expected_histogram`."""

    def read(client: Client) -> Report:
        status = client.get(PoolObservation, pool.name).get("status") or {}
        return report_of(status, canonical(status.get("nodesByFreeDevices")) if status else None)

    return Reports(
        f"PoolObservation/{pool.name}",
        read,
        lambda: canonical(fleet.expected_histogram(world.kube, pool)),
        world.admin_kubeconfig,
    )


def replica_reports(world: World, name: str) -> Reports:
    """A ReplicaObservation's reports (created here), held against its pods on the API
    server: how many, and how many kube-scheduler bound; each with the cluster's
    `replicasCurrentAt` as compose-inference-cluster relays it (the latest of every
    PoolObservation's), read first: it vouches only for replica writes made before it,
    which the replica read after it sees."""
    world.kube.apply(agent_builders.replica_observation(name, NAMESPACE))

    def read(client: Client) -> Report:
        vouching = relayed(pool.get("status") for pool in client.list(PoolObservation))
        status = client.get(ReplicaObservation, name, namespace=NAMESPACE).get("status") or {}
        return report_of(status, (status.get("pods"), status.get("scheduledPods")), vouching)

    def truth() -> tuple[int, int]:
        pods = world.kube.list("pods", NAMESPACE, f"{labels.REPLICA}={name}")
        return len(pods), sum(1 for p in pods if p["spec"].get("nodeName"))

    return Reports(f"ReplicaObservation/{name}", read, truth, world.admin_kubeconfig, vouched=True)


def allocate_one(world: World, pool: fleet.Pool, pod: str, replica: str = "none") -> datetime:
    """A pod of `replica` claiming one GPU of the pool; returns when it was seen bound,
    its claim allocated."""
    replica_labels = {labels.REPLICA: replica, labels.REPLICA_NAMESPACE: NAMESPACE}
    world.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod, "namespace": NAMESPACE, "labels": replica_labels},
            "spec": {
                "nodeSelector": {fleet.POOL_LABEL: pool.name},
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [
                    {
                        "name": "engine",
                        "image": "example.invalid/engine:1",
                        "resources": {"claims": [{"name": "gpu"}]},
                    }
                ],
            },
        }
    )

    def allocated() -> bool:
        if not (world.kube.get("pod", pod, NAMESPACE) or {}).get("spec", {}).get("nodeName"):
            return False
        claims = world.kube.list("resourceclaims.resource.k8s.io", NAMESPACE)
        return any(
            c["metadata"].get("annotations", {}).get("resource.kubernetes.io/pod-claim-name")
            == "gpu"
            and (c.get("status") or {}).get("allocation")
            and any(o.get("name") == pod for o in c["metadata"].get("ownerReferences", []))
            for c in claims
        )

    eventually(allocated, f"kube-scheduler binds {pod} with a GPU", timeout=60, every=0.2)
    return now()


# ---------------------------------------------------------------------- the agent


@dataclass
class Agent:
    popen: subprocess.Popen
    port: int
    log: Path

    def ready(self) -> bool:
        return self._probe("/readyz")

    def alive(self) -> bool:
        """What the kubelet's liveness probe would see (a 503 gets the pod restarted)."""
        return self._probe("/healthz")

    def _probe(self, path: str) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def running(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> int:
        """SIGTERM by its PID; its exit status."""
        self.popen.terminate()
        return self.popen.wait(20)


def start_agent(cluster, kubeconfig: Path, name: str) -> Agent:
    port = free_port()
    process = cluster.supervisor.start(
        f"modelplane-agent-{name}",
        [
            str(agent.command()),
            f"--kubeconfig={kubeconfig}",
            f"--listen=127.0.0.1:{port}",
            *AGENT_FLAGS,
        ],
    )
    started = Agent(process.popen, port, process.log)
    cluster.supervisor.wait_until(process, started.ready, "ready", 60)
    return started


@pytest.fixture
def run_agent(cluster) -> Iterator[Callable[[Path, str], Agent]]:
    """Start the agent (at most one per test); it is stopped by its PID afterwards."""
    started: list[Agent] = []

    def run(kubeconfig: Path, name: str) -> Agent:
        started.append(start_agent(cluster, kubeconfig, name))
        return started[-1]

    yield run
    for running in started:
        if running.running():
            running.stop()


@pytest.fixture
def proxy(cluster, world: World) -> Iterator[tuple[FaultProxy, Path]]:
    """A fault proxy in front of the API server, and the agent's kubeconfig through it."""
    config = yaml.safe_load(world.agent_kubeconfig.read_text())
    api_port = int(config["clusters"][0]["cluster"]["server"].rpartition(":")[2])
    running = FaultProxy(api_port, cluster.serving.cert, cluster.serving.key, cluster.ca)
    running.start()
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{running.port}"
    path = cluster.workdir / f"agent-via-proxy-{running.port}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    try:
        yield running, path
    finally:
        running.stop()


def converged(*watched: Reports, since: datetime) -> Callable[[], bool]:
    """Each one's latest report equals the truth, claims to be current after `since`,
    and says Current; a replica's is vouched for by the pools after `since` too (its
    own `observedAt` moves only when it changes: without the pools' word it would turn
    stale maxAge later)."""

    def check() -> bool:
        return all(one(reports) for reports in watched)

    def one(reports: Reports) -> bool:
        expected, latest = reports.truth(), reports.latest()
        assert latest.content == expected, f"agent {latest} != ground truth {expected}"
        assert latest.claims_current_at(since), f"not fresh since {since:%H:%M:%S}: {latest}"
        vouched = latest.replicas_current_at
        assert not reports.vouched or (vouched is not None and vouched >= since), (
            f"the pools' replicasCurrentAt has not passed {since:%H:%M:%S}: {latest}"
        )
        assert latest.current(), f"still says Current=False: {latest}"
        return True

    return check


def reread_all(faults: FaultProxy, since: datetime, end: datetime) -> tuple[datetime, str]:
    """When the agent had read every kind a pool reads again since `since` (the first
    list or watch of each that the API server answered 200; `end` for a kind not read
    again by then), and the kind read last: its pools cannot be current before."""
    first = {}
    for plural in POOL_READS:
        answered = [
            s.at
            for s in faults.recorded(read_of(plural), "forwarded", since=since.timestamp())
            if s.status == 200
        ]
        first[plural] = min(answered, default=end.timestamp())
    last = max(first, key=first.__getitem__)
    return datetime.fromtimestamp(first[last], UTC), last


def stopped_cleanly(running: Agent) -> None:
    """The process started is still running, live to its probe (so nothing would have
    restarted it), and it stops cleanly on SIGTERM."""
    assert running.running(), f"the agent exited {running.popen.returncode}"
    assert running.alive(), "the agent's /healthz fails: its pod would be restarted"
    assert running.stop() == 0


# ---------------------------------------------------------------------- the faults


def test_a_stalled_claims_watch_freezes_observed_at_and_loses_no_allocation(
    cluster, world, proxy, run_agent
):
    """The path to the API server stalls for claims: the open watch stops mid-stream,
    and the lists and watches the agent asks instead stall too (no byte, no close).
    Pools and replicas both read claims: both freeze."""
    faults, via_proxy = proxy
    pool = add_pool(world, "stall")
    with pool_reports(world, pool) as pools, replica_reports(world, "stall-r") as replicas:
        running = run_agent(via_proxy, "stall")
        eventually(
            converged(pools, replicas, since=now()), "converged before the fault", timeout=30
        )

        faults.stall(read_of("resourceclaims"))
        stalled_at = now()
        allocated_at = allocate_one(world, pool, "stall-0", replica="stall-r")
        after = {pools.name: pools.truth(), replicas.name: replicas.truth()}
        # Silent past the bound, the agent relists; that list stalls until the client's
        # read timeout (10 s) fails it; a few heartbeats more show observedAt frozen.
        until(lambda: not pools.latest().current(), SILENCE + LIST_TIMEOUT + SLACK * 3)
        time.sleep(4)
        released_at = now()
        faults.release()
        eventually(
            converged(pools, replicas, since=released_at), "recovered", timeout=40, every=0.5
        )

    last_current = stalled_at + SILENCE
    for reports in (pools, replicas):
        in_fault = reports.between(stalled_at, released_at)
        claims_no_freshness_it_lacks(reports.seen, allocated_at, after[reports.name], SILENCE)
        frozen_since([r for r in in_fault if r.read_at > last_current + SLACK], last_current)
        named(in_fault, "ResourceClaim", ("WatchSilent", "WatchFailing"), "")
    stopped_cleanly(running)


def test_claims_forbidden_to_the_agent_freeze_observed_at_until_rbac_is_restored(
    cluster, world, proxy, run_agent
):
    faults, via_proxy = proxy
    pool = add_pool(world, "rbac")
    with pool_reports(world, pool) as pools, replica_reports(world, "rbac-r") as replicas:
        running = run_agent(via_proxy, "rbac")
        eventually(
            converged(pools, replicas, since=now()), "converged before the fault", timeout=30
        )

        grant_claims(world, False)
        # An open watch outlives the RBAC change; it ends when its connection drops, as
        # connections do, and the agent must ask again under the new rules. (Whether the
        # fault bit is the condition's to say: WatchFailing, forbidden.)
        faults.cut(read_of("resourceclaims"))
        revoked_at = now()
        allocated_at = allocate_one(world, pool, "rbac-0", replica="rbac-r")
        after = {pools.name: pools.truth(), replicas.name: replicas.truth()}
        time.sleep(max(0.0, 17 - (now() - revoked_at).total_seconds()))
        restored_at = now()
        grant_claims(world, True)
        eventually(
            converged(pools, replicas, since=restored_at), "recovered", timeout=45, every=0.5
        )

    for reports in (pools, replicas):
        in_fault = reports.between(revoked_at, restored_at)
        claims_no_freshness_it_lacks(reports.seen, allocated_at, after[reports.name])
        frozen_since([r for r in in_fault if r.read_at > revoked_at + SLACK], revoked_at)
        named(in_fault, "ResourceClaim", ("WatchFailing",), "forbidden")
    stopped_cleanly(running)


def test_an_api_server_restart_loses_no_allocation(cluster, world, apiserver, proxy, run_agent):
    faults, via_proxy = proxy  # no fault: it only tells when the agent read each kind again
    pool = add_pool(world, "restart")
    with pool_reports(world, pool) as reports:
        running = run_agent(via_proxy, "restart")
        eventually(converged(reports, since=now()), "converged before the fault", timeout=30)

        down_at = now()
        apiserver.kill()
        time.sleep(3)  # the agent's watches fail and back off
        apiserver.start()
        # Made before the agent is back, or just after: it must be in the report either way.
        allocated_at = allocate_one(world, pool, "restart-0")
        after = reports.truth()
        eventually(converged(reports, since=allocated_at), "recovered", timeout=60, every=0.5)
        recovered_at = now()

    claims_no_freshness_it_lacks(reports.seen, allocated_at, after)
    current_again, last_kind = reread_all(faults, down_at, recovered_at)
    frozen_since(
        [r for r in reports.between(down_at, recovered_at) if r.read_at <= current_again],
        down_at,
        f"{last_kind} read again at {current_again:%H:%M:%S}",
    )
    stopped_cleanly(running)


def test_429_answers_to_status_writes_are_retried_after_retry_after(
    cluster, world, proxy, run_agent
):
    faults, via_proxy = proxy
    pool = add_pool(world, "throttle")
    writes = status_write_of("poolobservations", pool.name)
    with pool_reports(world, pool) as reports:
        running = run_agent(via_proxy, "throttle")
        eventually(converged(reports, since=now()), "converged before the fault", timeout=30)

        faults.throttle(writes, RETRY_AFTER)
        throttled_since = time.time()
        allocated_at = allocate_one(world, pool, "throttle-0")
        after = reports.truth()
        time.sleep(3 * RETRY_AFTER)
        faults.unthrottle()
        lifted_at = now()
        eventually(converged(reports, since=lifted_at), "recovered", timeout=30, every=0.5)

    attempts = [s.at for s in faults.recorded(writes, "throttled", since=throttled_since)]
    assert len(attempts) >= 2, f"the agent tried {len(attempts)} writes in the throttle"
    gaps = [round(b - a, 2) for a, b in itertools.pairwise(attempts)]
    assert min(gaps) >= RETRY_AFTER - 0.1, (
        f"writes answered 429 with Retry-After: {RETRY_AFTER} were retried after {gaps} s"
    )
    claims_no_freshness_it_lacks(reports.seen, allocated_at, after)
    stopped_cleanly(running)


def test_observations_deleted_during_a_write_pass_leave_the_publisher_running(
    cluster, world, run_agent
):
    world.kube.apply(manifests.namespace("churn"))
    replicas = [agent_builders.replica_observation(f"r{i}", "churn") for i in range(CHURN_REPLICAS)]
    old_pool = agent_builders.pool_observation("churn-old", [("gpu", DRIVER, DRIVER)])
    world.kube.apply([*replicas, old_pool])
    running = run_agent(world.agent_kubeconfig, "churn")

    def written() -> int:
        listed = world.client.list(ReplicaObservation, namespace="churn")
        return sum(1 for r in listed if r.get("status"))

    # The agent's first pass writes every status, one request each: delete in its middle.
    done = eventually(written, "the first replica statuses written", timeout=30, every=0.05)
    world.client.deletecollection(ReplicaObservation, namespace="churn")
    world.client.delete(PoolObservation, "churn-old")
    assert done < CHURN_REPLICAS, f"the pass was over ({done} written) before the deletion"

    pool = add_pool(world, "churn", nodes=1)
    created_at = now()
    with pool_reports(world, pool) as reports:
        eventually(
            converged(reports, since=created_at),
            "a PoolObservation created after the deletions gets its status",
            timeout=NEW_STATUS_BOUND,
            every=0.2,
        )
    log = running.log.read_text()
    assert "Traceback" not in log and "task publish ended" not in log, log[-3000:]
    stopped_cleanly(running)
