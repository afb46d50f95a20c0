"""`make e2e-settled`: what a fleet at rest costs the control plane, now and before.

A fleet at rest is one where nothing is left to place, heal or scale: every
ModelDeployment reads `ReplicasReady` True and every pod runs. What it costs
is what its XRs' periodic reconciles cost (each function's TTL,
`design/reconcile.md`), and that is what steady mode and the charge label cut
(`design/scheduler.md`, "Steady mode" and "What a placing pass reads"). This
run measures it on the real control plane.

**The fleet.** The stack of `make e2e-scale` (`bring_up`) with `--clusters`
workload clusters; on each, one Observed InferenceCluster of kwok nodes of 8
GPUs in DRA ResourceSlices (the nodes are `--deployments x --replicas` GPUs
and a tenth more, split evenly over the clusters, each cluster's in
`profile.pools`' two pools); `--deployments` ModelDeployments of
`--replicas` replicas of one engine of one 1-GPU pod, which may go to any of
the clusters, in batches of `--batch`, each batch Ready before the next goes
in. Deployments go in one at a time, paced so that at most `--pace` replicas
a second are created (`pause`): every replica is the API server's and
Crossplane's work at once, and on this 2-core machine the first batch of 20
deployments of 10, created at once, was not Ready within `BATCH_LIMIT`.
`PROFILES` names the sizes a run starts from (`--profile`; `--help` states
what each takes at least); every size is also an option of its own.

**Two windows of `--window` seconds**, in which the harness lists nothing (it
reads `ss` every few seconds and Crossplane's metrics at each end):

1. the functions of this checkout, from their packages, `--warm` seconds after
   the last deployment is Ready;
2. with `--before <folder of .xpkg>` (`make packages` of an earlier commit):
   every function process replaced by the same function from those packages,
   on the same addresses and certificates (`functions.serve_instead`), once
   every deployment is Ready again and `--warm` seconds have passed (`WARM`:
   past the watch circuit breaker's cooldown, so every XR is reconciled at
   its at-rest pace by the functions now serving it). The
   Configuration (XRDs and Compositions) stays this checkout's; the earlier
   functions rewrite the replicas the way they write them. The agent stays
   this checkout's too, so the earlier functions must read its reports: those
   from before the agent stopped rewriting unchanged ReplicaObservations
   (replica currency, `design/observation.md`) read every unchanged report as
   stale after `maxAge` and never turn Ready again, so their window is never
   reached. This checkout's `settled:` line is printed as soon as its own window
   ends.

**Figures per window** (per minute of the window): CPU seconds of each
process (`cost.cpu_seconds`: user + system, descendants and reaped children
included), RunFunctionRequests per function and the bytes its server
received per request (`cost.Wire`), the mean seconds per call as Crossplane
times it (`function_run_function_seconds`), and reconciles per composite kind
(`controller_runtime_reconcile_total` of Crossplane's `composite/<xrd>`
controllers), so bytes per reconcile is bytes per request times calls per
reconcile; and after the window, how many XRs of each kind read `Responsive`
False, and how many of those opened recently enough to be dropping events
(`requeue.dropping_events`; Crossplane reports a circuit open until an event
arrives after its cooldown, so an XR at rest may read open long after).
Printed as one table and written with every process's figures to
`out/settled/<time>/`.

**Writes and the control plane's CPU.** The window also counts the control
plane API server's requests (`writes`: `apiserver_request_total` read from
its `/metrics` at each end), as writes per replica per minute of the window
(the replicas are the ModelReplicas listed before it) with the ten largest
kinds of write by resource and verb and the requests that are not writes;
and the CPU of the whole control plane (`control_plane`: the control-plane
cluster's kube-apiserver, etcd and kube-controller-manager, Crossplane core,
provider-kubernetes and every function's pods; not the workload clusters,
their agents, kwok, the package registry, nor the harness's DNS stand-ins
for the functions' Services). A run ends with one line for comparing runs,
the figures of this checkout's window:

    settled: replicas=<n> writes-per-replica-minute=<x> control-plane-cpu-s-per-minute=<y>
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from modelplane_common import labels, requeue
from modelplane_common.timeutil import format_duration
from modelplane_devtools import paths
from modelplane_devtools.processes import Supervisor, exit_on_terminate

from modelplane_e2e import functions, stack
from modelplane_e2e.kube import Kube, condition, eventually
from modelplane_e2e.scale import cost, meters, run, writes
from modelplane_e2e.scale.bring_up import bring_up
from modelplane_e2e.scale.profile import (
    GPU,
    OBSERVED,
    Member,
    Shape,
    deployment,
    pools,
    team,
)

COMPOSITES = ("modeldeployments", "modelreplicas", "inferenceclusters")
RECONCILES = "controller_runtime_reconcile_total"
CALL_SECONDS = "function_run_function_seconds_sum"
CHECK = 10.0  # seconds between checks while a batch becomes Ready
BATCH_LIMIT = 1200.0  # seconds a batch may take to become Ready
# Creating a deployment's replicas (and, after the swap, rewriting them) opens
# Crossplane's watch circuit breaker on it (design/reconcile.md); the functions
# requeue at 10 s for DROPPING_FOR after it opens. Past that and one more converging
# TTL, an XR runs at its at-rest pace unless events keep reopening its circuit, which
# the window's reconciles per minute and the circuits read after it show.
WARM = (requeue.DROPPING_FOR + requeue.CONVERGING).total_seconds()


@dataclass(frozen=True)
class Sizes:
    deployments: int = 20
    replicas: int = 10
    clusters: int = 1  # workload clusters the nodes are split over
    batch: int = 5  # deployments created before waiting for all to be Ready
    pace: float = 1.0  # replicas created a second, at most
    window: float = 300.0
    warm: float = WARM
    # The InferenceCluster's own default maxAge. The fleet-scale run's 60 s, on this
    # loaded 2-core machine, let relayed observations age past it while replicas were
    # being created: pools fell back to whole-node accounting and refused replicas.
    max_age: str = "5m"

    @property
    def pods(self) -> int:
        return self.deployments * self.replicas

    @property
    def nodes(self) -> int:
        """Nodes of 8 GPUs for every 1-GPU pod, and a tenth more."""
        return math.ceil(self.pods * 1.1 / GPU.count)

    @property
    def nodes_per_cluster(self) -> int:
        return math.ceil(self.nodes / self.clusters)

    @property
    def least_seconds(self) -> float:
        """Creation at its pace, the warm-up and the window: a run takes at least this
        after its stack is up, and longer by whatever the batches wait to be Ready."""
        return self.pods / self.pace + self.warm + self.window

    def describe(self) -> str:
        return (
            f"{self.deployments} ModelDeployments x {self.replicas} replicas ({self.pods} "
            f"ModelReplicas) on {self.clusters} workload cluster(s) of "
            f"{self.nodes_per_cluster} kwok nodes, {self.batch} deployments a batch, at "
            f"most {self.pace:g} replicas a second: at least {self.least_seconds / 60:.0f} "
            f"min after the stack is up ({self.pods / self.pace:.0f} s creating, "
            f"{self.warm:.0f} s warm, a {self.window:.0f} s window)"
        )


# The sizes a run starts from. `small` is the first target, on this machine;
# `fleet` its 2,000 replicas, over two workload clusters.
PROFILES = {
    "small": Sizes(),
    "fleet": Sizes(deployments=200, clusters=2, batch=20),
}


def shapes(sizes: Sizes) -> list[Shape]:
    one_gpu = (Member("Standalone", 1, 0),)
    return [Shape(f"md-{i:03d}", 0.0, sizes.replicas, 1, one_gpu) for i in range(sizes.deployments)]


@dataclass(frozen=True)
class Reading:
    """What the control plane had spent so far, at one moment."""

    at: float  # time.monotonic()
    cpu: dict[str, float]  # process -> CPU seconds
    requests: dict[str, float]  # function -> RunFunctionRequests
    call_seconds: dict[str, float]  # function -> seconds Crossplane spent in its calls
    reconciles: dict[str, float]  # composite plural -> reconciles
    wire: dict[str, int]  # function -> bytes its server received
    api_requests: dict[cost.Series, float]  # the control plane API server's, by series


def read(running: stack.Stack, wire: cost.Wire, metrics_port: int) -> Reading:
    assert running.control_plane
    control = running.control_plane.kube
    wire.sample()
    text = cost.scrape(metrics_port)
    controllers = cost.sums(text, RECONCILES, "controller")
    # A loaded API server may fail one read (kubectl's INTERNAL_ERROR): read it again
    # rather than lose the run at the window's edge.
    api_text = eventually(
        lambda: writes.scrape(control), "the API server's metrics", timeout=60, every=5
    )
    api_requests = writes.requests(api_text)
    return Reading(
        at=time.monotonic(),
        cpu=cost.snapshot(running.supervisor.processes),
        requests=cost.sums(text, cost.REQUESTS, "function_name"),
        call_seconds=cost.sums(text, CALL_SECONDS, "function_name"),
        reconciles={
            plural: controllers.get(f"composite/{plural}.modelplane.ai", 0.0)
            for plural in COMPOSITES
        },
        wire=wire.totals(),
        api_requests=api_requests,
    )


@dataclass(frozen=True)
class Circuits:
    """The watch circuits of one kind of XR as their `Responsive` conditions read."""

    xrs: int
    open: int  # Responsive False
    dropping: int  # of those, opened less than requeue.DROPPING_FOR ago

    @classmethod
    def of(cls, listed: list[dict], now: datetime) -> Circuits:
        statuses = [xr.get("status") or {} for xr in listed]
        return cls(
            len(statuses),
            sum(1 for status in statuses if requeue.reads_open(status)),
            sum(1 for status in statuses if requeue.dropping_events(status, now)),
        )

    def cell(self) -> str:
        within = format_duration(requeue.DROPPING_FOR)
        return f"{self.open} of {self.xrs}, {self.dropping} opened within {within}"


def circuits(control: Kube) -> dict[str, Circuits]:
    """Each composite kind's circuits, read after a window (the window lists nothing)."""
    return {
        plural: Circuits.of(control.list(f"{plural}.modelplane.ai"), datetime.now(UTC))
        for plural in COMPOSITES
    }


def _per_minute(after: dict, before: dict, minutes: float) -> dict[str, float]:
    return {key: (after[key] - before.get(key, 0)) / minutes for key in after}


def _requests_per_minute(start: Reading, end: Reading, minutes: float) -> writes.Requests:
    counted = writes.Requests.of(writes.increase(start.api_requests, end.api_requests))
    return writes.Requests(
        {kind: n / minutes for kind, n in counted.writes.items()},
        {verb: n / minutes for verb, n in counted.other.items()},
    )


def _pod_of(process: str, function: str) -> bool:
    """A function's pods are `<name>`, `<name>-1`, ... (`functions.pod_name`); its DNS
    stand-in, `<name>-dns`, is not one."""
    return process == function or process.removeprefix(function + "-").isdigit()


# The control plane's processes besides the functions' pods: its cluster's own
# (`<cluster>-kube-apiserver`, `-etcd`, `-kube-controller-manager`), Crossplane core
# and provider-kubernetes (named for its Provider).
CONTROL_PLANE_CLUSTER = "control-plane-"
CONTROL_PLANE_PLATFORM = ("crossplane", "crossplane-contrib-provider-kubernetes")


@dataclass(frozen=True)
class Window:
    """One window's figures, per minute of it."""

    name: str
    seconds: float
    cpu: dict[str, float]  # process -> CPU s per minute
    calls: dict[str, float]  # function -> requests per minute
    call_seconds: dict[str, float]  # function -> Crossplane's seconds in its calls, per minute
    reconciles: dict[str, float]  # composite plural -> reconciles per minute
    wire: dict[str, float]  # function -> bytes received per minute
    # The control plane API server's requests per minute: writes by kind, the rest by verb.
    api_requests: writes.Requests = field(default_factory=lambda: writes.Requests({}, {}))
    replicas: int = 0  # ModelReplicas listed before the window
    circuits: dict[str, Circuits] = field(default_factory=dict)  # plural -> after the window

    @classmethod
    def between(cls, name: str, start: Reading, end: Reading) -> Window:
        minutes = (end.at - start.at) / 60
        return cls(
            name,
            end.at - start.at,
            _per_minute(end.cpu, start.cpu, minutes),
            _per_minute(end.requests, start.requests, minutes),
            _per_minute(end.call_seconds, start.call_seconds, minutes),
            _per_minute(end.reconciles, start.reconciles, minutes),
            _per_minute(end.wire, start.wire, minutes),
            _requests_per_minute(start, end, minutes),
        )

    def function_cpu(self, function: str) -> float:
        """CPU of every pod of a function."""
        return sum(value for process, value in self.cpu.items() if _pod_of(process, function))

    def control_plane(self, functions_served: list[str]) -> dict[str, float]:
        """CPU s per minute of each process of the whole control plane (module
        docstring): its cluster's, Crossplane's, provider-kubernetes' and the functions'."""
        return {
            process: value
            for process, value in self.cpu.items()
            if process.startswith(CONTROL_PLANE_CLUSTER)
            or process in CONTROL_PLANE_PLATFORM
            or any(_pod_of(process, function) for function in functions_served)
        }

    def column(self) -> writes.Column:
        return writes.Column(self.api_requests, self.replicas)

    def settled_line(self, functions_served: list[str]) -> str:
        return writes.settled_line(
            self.replicas,
            sum(self.api_requests.writes.values()),
            sum(self.control_plane(functions_served).values()),
        )

    def per_call(self, function: str, per_minute: dict[str, float]) -> float | None:
        calls = self.calls.get(function, 0.0)
        return per_minute.get(function, 0.0) / calls if calls else None


def measure(name: str, running: stack.Stack, wire: cost.Wire, port: int, seconds: float) -> Window:
    """A window in which the harness only samples the wire (and reads both metrics
    endpoints at its ends), after listing the ModelReplicas it divides writes by."""
    assert running.control_plane
    replicas = len(running.control_plane.kube.list("modelreplicas.modelplane.ai", team(OBSERVED)))
    print(f"{name}: measuring {seconds:.0f} s, nothing listed", flush=True)
    start = read(running, wire, port)
    meters.sampling(seconds, wire.sample)
    window = Window.between(name, start, read(running, wire, port))
    return replace(window, replicas=replicas, circuits=circuits(running.control_plane.kube))


def _ready(md: dict) -> bool:
    return (condition(md, "ReplicasReady") or {}).get("status") == "True"


def await_ready(control: Kube, names: set[str], began: float, what: str) -> None:
    """Until every named ModelDeployment reads ReplicasReady True, saying how far it got
    (a list the loaded API server fails is a check that found nothing yet)."""

    def all_ready() -> bool:
        listed = control.list("modeldeployments.modelplane.ai", team(OBSERVED))
        ready = sum(1 for m in listed if m["metadata"]["name"] in names and _ready(m))
        print(
            f"{what}: {ready} of {len(names)} deployments Ready, {time.monotonic() - began:.0f} s",
            flush=True,
        )
        return ready == len(names)

    eventually(all_ready, f"{what}: every deployment Ready", timeout=BATCH_LIMIT, every=CHECK)


def pause(applied_at: float, replicas: int, pace: float, now: float) -> float:
    """Seconds to wait before the next deployment goes in: the last one, whose apply
    returned at `applied_at`, created `replicas` replicas, which at `pace` a second
    take replicas / pace seconds; the time since counts, so a long wait for a batch
    to be Ready leaves no pause."""
    return max(0.0, applied_at + replicas / pace - now)


def create(
    control: Kube,
    sizes: Sizes,
    now: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Every deployment, one at a time at `sizes.pace` replicas a second, `batch` of them
    before waiting for all so far to be Ready; returns the seconds it took."""
    began = now()
    given = shapes(sizes)
    names: set[str] = set()
    applied_at, applied = began, 0
    for at in range(0, len(given), sizes.batch):
        for shape in given[at : at + sizes.batch]:
            sleep(pause(applied_at, applied, sizes.pace, now()))
            control.apply(deployment(shape, OBSERVED))
            applied_at, applied = now(), shape.replicas
            names.add(shape.name)
        await_ready(control, names, began, f"batch {at // sizes.batch + 1}")
    return now() - began


def rewritten(control: Kube) -> dict[str, int]:
    """How the ModelReplicas are written now: members named by digest, charge-labelled."""
    listed = control.list("modelreplicas.modelplane.ai", team(OBSERVED))
    by_digest = sum(
        1
        for r in listed
        if any(
            "templateDigest" in member
            for engine in r["spec"].get("engines") or []
            for member in engine.get("members") or []
        )
    )
    labelled = sum(1 for r in listed if labels.CHARGE in r["metadata"].get("labels", {}))
    return {"replicas": len(listed), "named by digest": by_digest, "charge-labelled": labelled}


# The platform's processes the table shows one by one (the functions get rows of their own).
PLATFORM_PROCESSES = (
    "crossplane",
    "crossplane-contrib-provider-kubernetes",
    "control-plane-kube-apiserver",
    "control-plane-etcd",
)


def _cell(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if value is None else f"{value / scale:.{digits}f}"


def table(head: str, windows: list[Window], functions_served: list[str]) -> str:
    rows = [head, "", "| | " + " | ".join(w.name for w in windows) + " |"]
    rows.append("|---|" + "---|" * len(windows))

    def row(label: str, cells: list[str]) -> None:
        rows.append(f"| {label} | " + " | ".join(cells) + " |")

    row("ModelReplicas listed before the window", [str(w.replicas) for w in windows])
    row("all processes, CPU s per minute", [_cell(sum(w.cpu.values())) for w in windows])
    row(
        "the control plane (its cluster, Crossplane, provider-kubernetes, functions), "
        "CPU s per minute",
        [_cell(sum(w.control_plane(functions_served).values())) for w in windows],
    )
    for process in PLATFORM_PROCESSES:
        row(f"{process}, CPU s per minute", [_cell(w.cpu.get(process)) for w in windows])
    for plural in COMPOSITES:
        row(f"{plural} reconciles per minute", [_cell(w.reconciles.get(plural)) for w in windows])
    for plural in COMPOSITES:
        row(
            f"{plural} reading Responsive False after the window",
            [w.circuits[plural].cell() if plural in w.circuits else "-" for w in windows],
        )
    for function in functions_served:
        short = function.removeprefix("modelplane-ai-")
        row(
            f"{short}, CPU s per minute (all pods)",
            [_cell(w.function_cpu(function)) for w in windows],
        )
        row(f"{short}, calls per minute", [_cell(w.calls.get(function)) for w in windows])
        row(
            f"{short}, KiB received per call",
            [_cell(w.per_call(function, w.wire), 1024) for w in windows],
        )
        row(
            f"{short}, ms per call (Crossplane's timing)",
            [_cell(w.per_call(function, w.call_seconds), 1e-3, 0) for w in windows],
        )
    rows += ["", "| the control plane API server's requests per replica-minute | "
             + " | ".join(w.name for w in windows) + " |",
             "|---|" + "---|" * len(windows)]  # fmt: skip
    for label, cells in writes.rows([w.column() for w in windows]):
        row(label, cells)
    return "\n".join(rows) + "\n"


# Each size's option: its type and what it is.
SIZE_OPTIONS: dict[str, tuple[Callable[[str], object], str]] = {
    "deployments": (int, "ModelDeployments"),
    "replicas": (int, "replicas per deployment"),
    "clusters": (int, "workload clusters the nodes are split over"),
    "batch": (int, "deployments created before waiting for all to be Ready"),
    "pace": (float, "replicas created a second, at most"),
    "window": (float, "seconds of each window"),
    "warm": (float, "seconds from every deployment Ready to a window"),
    "max_age": (str, "the clusters' maxAge"),
}


# The sizes a run cannot have none of (a pace of 0 would never create anything).
POSITIVE = ("deployments", "replicas", "clusters", "batch", "pace", "window")


def _epilog() -> str:
    return "profiles:\n" + "\n".join(f"  {name}: {s.describe()}" for name, s in PROFILES.items())


def _options(argv: list[str]) -> tuple[Sizes, Path | None, str]:
    parser = argparse.ArgumentParser(
        prog="modelplane-e2e-settled", description=__doc__, epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--profile", choices=sorted(PROFILES), default="small")
    for name, (kind, what) in SIZE_OPTIONS.items():
        parser.add_argument(
            "--" + name.replace("_", "-"), type=kind, help=f"{what} (default: the profile's)"
        )
    parser.add_argument("--before", type=Path, help="a folder of earlier .xpkg files")
    parser.add_argument("--before-name", default="before", help="the earlier packages' column")
    args = parser.parse_args(argv)
    given = {name: getattr(args, name) for name in SIZE_OPTIONS if getattr(args, name) is not None}
    sizes = replace(PROFILES[args.profile], **given)
    wrong = [
        f"--{name} {getattr(sizes, name)}" for name in POSITIVE if not getattr(sizes, name) > 0
    ]
    if wrong:
        parser.error(f"must be more than 0: {', '.join(wrong)}")
    return sizes, args.before, args.before_name


def main(argv: list[str] | None = None) -> int:
    sizes, before, before_name = _options(sys.argv[1:] if argv is None else argv)
    exit_on_terminate()
    workdir = paths.ROOT / "out" / "settled" / time.strftime("%Y%m%d-%H%M%S")
    workdir.mkdir(parents=True)
    print(f"settled run: {sizes.describe()}", flush=True)
    running = stack.Stack(workdir, Supervisor(workdir / "logs"))
    try:
        kubes, providers = bring_up(running, sizes.clusters, "1m")
        text, data = settled_run(running, kubes, providers, sizes, before, before_name)
    finally:
        running.supervisor.stop()
    (workdir / "table.md").write_text(text)
    (workdir / "figures.json").write_text(json.dumps(data, indent=2) + "\n")
    print(text)
    print(f"table and logs: {workdir}")
    print(data["settled"], flush=True)
    return 0


def _warm(seconds: float) -> None:
    print(f"every deployment Ready: waiting {seconds:.0f} s before measuring", flush=True)
    time.sleep(seconds)


def set_up(kubes: list[Kube], providers: list[Kube], control: Kube, sizes: Sizes) -> None:
    """Each workload cluster's nodes, Ready, and its InferenceCluster, published."""
    parts = []
    for index, (kube, provider) in enumerate(zip(kubes, providers, strict=True)):
        pool_list = pools(OBSERVED, index, sizes.nodes_per_cluster)
        held = {node: 0 for pool in pool_list for node in pool.node_names()}
        run.add_nodes(kube, pool_list)
        parts.append(run.ArmFleet(OBSERVED, index, kube, provider, pool_list, held))
    for part in parts:
        run.await_nodes(part.kube, set(part.held))
    run.set_up_control(control, parts, sizes.max_age)


def settled_run(
    running: stack.Stack,
    kubes: list[Kube],
    providers: list[Kube],
    sizes: Sizes,
    before: Path | None,
    before_name: str,
) -> tuple[str, dict]:
    """The fleet, its creation, then the windows; returns the table and the figures,
    the `settled:` line of this checkout's window among them."""
    assert running.control_plane and running.installed
    control = running.control_plane.kube
    served = sorted(running.installed.functions)
    set_up(kubes, providers, control, sizes)
    creation = create(control, sizes)
    port = cost.metrics_port(running.supervisor.processes)
    wire = cost.Wire(
        {name: functions.endpoint_port(a) for name, a in running.installed.functions.items()}
    )
    _warm(sizes.warm)
    state = {"this checkout": rewritten(control)}
    windows = [measure("this checkout", running, wire, port, sizes.window)]
    # Said at once: a second window that never comes to rest must not lose the first.
    print(f"this checkout: {windows[0].settled_line(served)}", flush=True)
    if before is not None:
        source = functions.PackagedSource(before)
        for name, endpoint in running.installed.functions.items():
            functions.serve_instead(
                control, running.supervisor, name, endpoint, running.workdir, source
            )
        began = time.monotonic()
        await_ready(control, {s.name for s in shapes(sizes)}, began, f"{before_name} functions")
        _warm(sizes.warm)
        state[before_name] = rewritten(control)
        windows.append(measure(before_name, running, wire, port, sizes.window))
    head = (
        f"fleet at rest: {sizes.deployments} ModelDeployments x {sizes.replicas} replicas "
        f"({sizes.pods} ModelReplicas, {sizes.pods} pods of 1 GPU) on {sizes.clusters} "
        f"workload cluster(s) of {sizes.nodes_per_cluster} kwok nodes (maxAge "
        f"{sizes.max_age}), created in {creation:.0f} s ({sizes.batch} at a time, at most "
        f"{sizes.pace:g} replicas a second); windows of {sizes.window:.0f} s, "
        f"{sizes.warm:.0f} s after Ready; replicas at each window: {json.dumps(state)}"
    )
    data = {"sizes": asdict(sizes), "creation_seconds": creation, "replicas": state,
            "windows": [asdict(w) for w in windows],
            "settled_lines": {w.name: w.settled_line(served) for w in windows},
            "settled": windows[0].settled_line(served)}  # fmt: skip
    return table(head, windows, served), data


if __name__ == "__main__":
    raise SystemExit(main())
