"""`make e2e-settled`: what a settled fleet costs the control plane, now and before.

A settled fleet is one where nothing is left to place, heal or scale: every
ModelDeployment reads `ReplicasReady` True and every pod runs. What it costs
is what its XRs' periodic reconciles cost (each function's TTL,
`design/reconcile.md`), and that is what steady mode and the charge label cut
(`design/scheduler.md`, "Steady mode" and "What a placing pass reads"). This
run measures it on the real control plane.

**The fleet.** The stack of `make e2e-scale` (`bring_up`) with one workload
cluster; one Observed InferenceCluster of kwok nodes of 8 GPUs in DRA
ResourceSlices (the nodes are `--deployments x --replicas` GPUs and a tenth
more, in `profile.pools`' two pools); `--deployments` ModelDeployments of
`--replicas` replicas of one engine of one 1-GPU pod, in batches of
`--batch`, each batch Ready before the next goes in.

**Two windows of `--window` seconds**, in which the harness lists nothing (it
reads `ss` every few seconds and Crossplane's metrics at each end):

1. the functions of this checkout, from their packages, `--warm` seconds after
   the last deployment is Ready;
2. with `--before <folder of .xpkg>` (`make packages` of an earlier commit):
   every function process replaced by the same function from those packages,
   on the same addresses and certificates (`functions.serve_instead`), once
   every deployment is Ready again and `--warm` seconds have passed (`WARM`:
   past the watch circuit breaker's cooldown, so every XR is reconciled at
   its settled pace by the functions now serving it). The
   Configuration (XRDs and Compositions) stays this checkout's; the earlier
   functions rewrite the replicas the way they write them.

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
arrives after its cooldown, so a settled XR's may read open long after).
Printed as one table and written with every process's figures to
`out/settled/<time>/`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from modelplane_common import labels, requeue
from modelplane_common.timeutil import format_duration

from modelplane_devtools.e2e import functions, stack
from modelplane_devtools.e2e.kube import Kube, condition, eventually
from modelplane_devtools.e2e.processes import Supervisor
from modelplane_devtools.e2e.scale import cost, run
from modelplane_devtools.e2e.scale.bring_up import bring_up
from modelplane_devtools.e2e.scale.profile import (
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
# TTL, an XR runs at its settled pace unless events keep reopening its circuit, which
# the window's reconciles per minute and the circuits read after it show.
WARM = (requeue.DROPPING_FOR + requeue.CONVERGING).total_seconds()


@dataclass(frozen=True)
class Sizes:
    deployments: int = 200
    replicas: int = 10
    batch: int = 20
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


def read(running: stack.Stack, wire: cost.Wire, metrics_port: int) -> Reading:
    wire.sample()
    text = cost.scrape(metrics_port)
    controllers = cost.sums(text, RECONCILES, "controller")
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
        )

    def function_cpu(self, function: str) -> float:
        """CPU of every pod of a function (`functions.pod_name`: `<name>`, `<name>-1`, ...)."""
        return sum(
            value
            for process, value in self.cpu.items()
            if process == function or process.removeprefix(function + "-").isdigit()
        )

    def per_call(self, function: str, per_minute: dict[str, float]) -> float | None:
        calls = self.calls.get(function, 0.0)
        return per_minute.get(function, 0.0) / calls if calls else None


def measure(name: str, running: stack.Stack, wire: cost.Wire, port: int, seconds: float) -> Window:
    """A window in which the harness only samples the wire."""
    assert running.control_plane
    print(f"{name}: measuring {seconds:.0f} s, nothing listed", flush=True)
    start = read(running, wire, port)
    run.sampling(seconds, wire.sample)
    window = Window.between(name, start, read(running, wire, port))
    return replace(window, circuits=circuits(running.control_plane.kube))


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


def create(control: Kube, sizes: Sizes) -> float:
    """Every deployment, `batch` at a time, each batch Ready before the next; returns
    the seconds it took."""
    began = time.monotonic()
    given = shapes(sizes)
    names: set[str] = set()
    for at in range(0, len(given), sizes.batch):
        batch = given[at : at + sizes.batch]
        control.apply([deployment(s, OBSERVED) for s in batch])
        names |= {s.name for s in batch}
        await_ready(control, names, began, f"batch {at // sizes.batch + 1}")
    return time.monotonic() - began


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

    row("all processes, CPU s per minute", [_cell(sum(w.cpu.values())) for w in windows])
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
    return "\n".join(rows) + "\n"


def _options(argv: list[str]) -> tuple[Sizes, Path | None, str]:
    parser = argparse.ArgumentParser(prog="modelplane-e2e-settled", description=__doc__)
    defaults = Sizes()
    parser.add_argument("--deployments", type=int, default=defaults.deployments)
    parser.add_argument("--replicas", type=int, default=defaults.replicas, help="per deployment")
    parser.add_argument("--batch", type=int, default=defaults.batch, help="deployments at once")
    parser.add_argument("--window", type=float, default=defaults.window, help="seconds")
    parser.add_argument("--warm", type=float, default=defaults.warm, help="seconds")
    parser.add_argument("--max-age", default=defaults.max_age, help="the clusters' maxAge")
    parser.add_argument("--before", type=Path, help="a folder of earlier .xpkg files")
    parser.add_argument("--before-name", default="before", help="the earlier packages' column")
    args = parser.parse_args(argv)
    sizes = Sizes(args.deployments, args.replicas, args.batch, args.window, args.warm, args.max_age)
    return sizes, args.before, args.before_name


def main(argv: list[str] | None = None) -> int:
    sizes, before, before_name = _options(sys.argv[1:] if argv is None else argv)
    workdir = stack.ROOT / "out" / "settled" / time.strftime("%Y%m%d-%H%M%S")
    workdir.mkdir(parents=True)
    running = stack.Stack(workdir, Supervisor(workdir / "logs"))
    try:
        kubes, providers = bring_up(running, 1, "1m")
        text, data = settled_run(running, kubes[0], providers[0], sizes, before, before_name)
    finally:
        running.supervisor.stop()
    (workdir / "table.md").write_text(text)
    (workdir / "figures.json").write_text(json.dumps(data, indent=2) + "\n")
    print(text)
    print(f"table and logs: {workdir}")
    return 0


def _warm(seconds: float) -> None:
    print(f"every deployment Ready: waiting {seconds:.0f} s before measuring", flush=True)
    time.sleep(seconds)


def settled_run(
    running: stack.Stack,
    kube: Kube,
    provider: Kube,
    sizes: Sizes,
    before: Path | None,
    before_name: str,
) -> tuple[str, dict]:
    """The fleet, its creation, then the windows; returns the table and the figures."""
    assert running.control_plane and running.installed
    control = running.control_plane.kube
    served = sorted(running.installed.functions)
    pool_list = pools(OBSERVED, 0, sizes.nodes)
    held = {node: 0 for pool in pool_list for node in pool.node_names()}
    run.add_nodes(kube, pool_list)
    run.await_nodes(kube, set(held))
    run.set_up_control(
        control, [run.ArmFleet(OBSERVED, 0, kube, provider, pool_list, held)], sizes.max_age
    )
    creation = create(control, sizes)
    port = cost.metrics_port(running.supervisor.processes)
    wire = cost.Wire(
        {name: functions.endpoint_port(a) for name, a in running.installed.functions.items()}
    )
    _warm(sizes.warm)
    state = {"this checkout": rewritten(control)}
    windows = [measure("this checkout", running, wire, port, sizes.window)]
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
        f"settled fleet: {sizes.deployments} ModelDeployments x {sizes.replicas} replicas "
        f"({sizes.pods} ModelReplicas, {sizes.pods} pods of 1 GPU) on {sizes.nodes} kwok "
        f"nodes of one workload cluster (maxAge {sizes.max_age}), created in "
        f"{creation:.0f} s ({sizes.batch} at a time); windows of {sizes.window:.0f} s, "
        f"{sizes.warm:.0f} s after Ready; replicas at each window: {json.dumps(state)}"
    )
    data = {"sizes": asdict(sizes), "creation_seconds": creation, "replicas": state,
            "windows": [asdict(w) for w in windows]}  # fmt: skip
    return table(head, windows, served), data


if __name__ == "__main__":
    raise SystemExit(main())
