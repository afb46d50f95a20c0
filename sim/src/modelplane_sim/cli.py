"""`modelplane-sim`: replay a workload on a fleet under each policy, report side by side.

    modelplane-sim [--fleet examples/sim/fleet.yaml] [--arrivals examples/sim/arrivals.yaml]
                   [--duration 8h] [--step 1m] [--republish 3m]
                   [--binder spread|pack|random] [--undeclared-scoring] [--seed 1]
                   [--out DIR]
    modelplane-sim --trace DIR [--trace-pods openb_pod_list_default.csv]
                   [--trace-demand 1.3] [--trace-nodes-every 1] [the options above]

`--trace` replays a published trace instead (sim/trace.py: DIR holds the
Alibaba openb csv files, openb_node_list_gpu_node.csv and the pod list).

Prints the summary table and writes DIR/report.html with its PNGs
(default out/sim/<UTC time>/). Input errors are one line on stderr and
exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from modelplane_common.timeutil import format_duration, parse_duration

from modelplane_sim import arrivals as arrival_input
from modelplane_sim import fleet as fleet_input
from modelplane_sim import report, trace
from modelplane_sim.arrivals import ArrivalError, Workload
from modelplane_sim.binder import NodeChoice
from modelplane_sim.fleet import Fleet, FleetError
from modelplane_sim.run import Progress, Result, simulate
from modelplane_sim.summary import table
from modelplane_sim.world import Settings


def write_report(out: Path, result: Result, facts: dict[str, str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    images = report.plots(out, result.runs, result.bound)
    return report.page(out, result.rows, images, facts)


def stderr_progress() -> Progress:
    """A progress bar on stderr, redrawn in place."""

    def show(policy: str, done: int, total: int) -> None:
        width = 30
        filled = width * done // total
        if done not in (1, total) and filled == width * (done - 1) // total:
            return  # redraw only when the bar grows
        bar = "#" * filled + "." * (width - filled)
        end = "\n" if done == total else ""
        sys.stderr.write(f"\rsim {policy:12s} [{bar}] {done}/{total} steps{end}")
        sys.stderr.flush()

    return show


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="modelplane-sim", description=__doc__.split("\n")[0])
    parser.add_argument("--fleet", type=Path, default=Path("examples/sim/fleet.yaml"))
    parser.add_argument("--arrivals", type=Path, default=Path("examples/sim/arrivals.yaml"))
    parser.add_argument("--duration", help="simulated time (default: the arrival model's)")
    parser.add_argument("--step", default="1m", help="simulated time per step")
    parser.add_argument("--republish", default="3m", help="histogram republish interval")
    parser.add_argument("--binder", choices=[c.value for c in NodeChoice], default="spread")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--undeclared-scoring",
        action="store_true",
        help="packing clusters do not declare spec.nodeScoring (the core assumes spread)",
    )
    parser.add_argument("--out", type=Path, help="report directory (default out/sim/<time>)")
    parser.add_argument("--trace", type=Path, help="a directory of openb trace csv files")
    parser.add_argument("--trace-pods", default="openb_pod_list_default.csv")
    parser.add_argument("--trace-demand", type=float, default=1.3, help="GPUs asked / GPUs")
    parser.add_argument("--trace-nodes-every", type=int, default=1, help="keep every n-th node")
    return parser


def _duration(text: str | None, flag: str) -> timedelta | None:
    if text is None:
        return None
    try:
        value = parse_duration(text)
    except ValueError as err:
        raise SystemExit(f"modelplane-sim: {flag} {text!r}: {err}") from err
    if value <= timedelta(0):
        raise SystemExit(f"modelplane-sim: {flag} {text!r}: must be positive")
    return value


def _facts(
    args: argparse.Namespace, inputs: Inputs, settings: Settings, result: Result
) -> dict[str, str]:
    """What the run was, for the terminal and the report's head."""
    fleet, workload = inputs.fleet, inputs.workload
    pools = sum(len(c.pools) for c in fleet.clusters)
    gpus = next(iter(result.worlds.values())).capacity()
    return {
        "fleet": f"{inputs.fleet_source} ({len(fleet.clusters)} clusters, {pools} pools, "
        f"{gpus} GPUs free for the fleet)",
        "arrivals": f"{inputs.arrivals_source} "
        f"({len(workload.arrivals)} deployments, seed {args.seed})",
        "simulated": f"{format_duration(workload.duration)} "
        f"in steps of {format_duration(settings.step)}",
        "histograms republished every": format_duration(settings.republish),
        "cluster scheduler (binder)": settings.choice.value
        + "".join(f", {c.name}: {c.scoring.value} (declared)" for c in fleet.clusters if c.scoring),
        "passes (placement.plan; node-level: its own)": ", ".join(
            f"{name} {world.tally.passes}" for name, world in result.worlds.items()
        ),
    }


@dataclass(frozen=True, slots=True)
class Inputs:
    fleet: Fleet
    workload: Workload
    fleet_source: str  # what the run's facts name as the fleet
    arrivals_source: str


def _inputs(args: argparse.Namespace) -> Inputs:
    """The fleet and arrivals: the files given, or the trace. Raises FleetError, ArrivalError."""
    duration = _duration(args.duration, "--duration")
    if args.trace is None:
        fleet = fleet_input.load(args.fleet)
        workload = arrival_input.load(args.arrivals, args.seed, duration)
        return Inputs(fleet, workload, str(args.fleet), str(args.arrivals))
    if args.trace_nodes_every < 1:
        raise FleetError(f"--trace-nodes-every {args.trace_nodes_every}: must be at least 1")
    replay = trace.load(
        args.trace / trace.NODES_FILE,
        args.trace / args.trace_pods,
        args.trace_demand,
        duration or timedelta(hours=8),
        args.trace_nodes_every,
        args.seed,
    )
    return Inputs(
        replay.fleet,
        replay.workload,
        f"{args.trace / trace.NODES_FILE} ({replay.nodes} GPU nodes)",
        f"{args.trace / args.trace_pods} ({replay.tasks} whole-GPU tasks, {replay.skipped} "
        f"left out; inflated to {replay.demand_gpus} GPUs, {args.trace_demand:.0%} of the fleet's)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = Settings(
        step=_duration(args.step, "--step") or timedelta(minutes=1),
        republish=_duration(args.republish, "--republish") or timedelta(minutes=3),
        choice=NodeChoice(args.binder),
        seed=args.seed,
        declare_scoring=not args.undeclared_scoring,
    )
    try:
        inputs = _inputs(args)
    except (FleetError, ArrivalError) as err:
        print(f"modelplane-sim: {err}", file=sys.stderr)
        return 2
    result = simulate(inputs.fleet, inputs.workload, settings, progress=stderr_progress())
    out = args.out or Path("out/sim") / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    facts = _facts(args, inputs, settings, result)
    path = write_report(out, result, facts)
    for key, value in facts.items():
        print(f"{key}: {value}")
    for name, world in result.worlds.items():
        for note in sorted(world.notes):
            print(f"note ({name}): {note}")
    print(table(result.rows))
    print(f"report: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
