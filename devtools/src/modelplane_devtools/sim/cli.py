"""`modelplane-sim`: replay a workload on a fleet under each policy, report side by side.

    modelplane-sim [--fleet examples/sim/fleet.yaml] [--arrivals examples/sim/arrivals.yaml]
                   [--duration 8h] [--step 1m] [--republish 3m]
                   [--binder spread|pack|random] [--seed 1] [--out DIR]

Prints the summary table and writes DIR/report.html with its PNGs
(default out/sim/<UTC time>/). Input errors are one line on stderr and
exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from compose_model_deployment.fn import default_matcher
from modelplane_common.timeutil import format_duration, parse_duration

from modelplane_devtools.sim import arrivals as arrival_input
from modelplane_devtools.sim import fleet as fleet_input
from modelplane_devtools.sim import report
from modelplane_devtools.sim.arrivals import Arrival, ArrivalError, Workload
from modelplane_devtools.sim.binder import NodeChoice
from modelplane_devtools.sim.bound import RelaxedBound
from modelplane_devtools.sim.fleet import Fleet, FleetError
from modelplane_devtools.sim.policies import Policy, all_policies
from modelplane_devtools.sim.summary import Row, bound_row, policy_row, table
from modelplane_devtools.sim.world import Settings, World

START = datetime(2026, 1, 1, tzinfo=UTC)
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Result:
    rows: tuple[Row, ...]
    runs: dict[str, report.Run]
    bound: tuple[int, ...]
    worlds: dict[str, World]


def _steps(workload: Workload, settings: Settings) -> list[tuple[datetime, list[Arrival]]]:
    """Each step's time and the arrivals since the step before."""
    count = int(workload.duration / settings.step)
    pending = sorted(workload.arrivals, key=lambda a: (a.at, a.name))
    steps, i = [], 0
    for n in range(count + 1):
        offset = n * settings.step
        batch = []
        while i < len(pending) and pending[i].at <= offset:
            batch.append(pending[i])
            i += 1
        steps.append((START + offset, batch))
    return steps


def simulate(
    fleet: Fleet,
    workload: Workload,
    settings: Settings,
    policies: Sequence[Policy] | None = None,
    progress: Progress | None = None,
) -> Result:
    matcher = default_matcher()
    steps = _steps(workload, settings)
    worlds: dict[str, World] = {}
    for policy in policies or all_policies():
        world = World(fleet, policy, matcher, settings, START)
        for n, (now, batch) in enumerate(steps):
            world.step(now, batch)
            if progress is not None:
                progress(policy.name, n + 1, len(steps))
        world.finish()
        worlds[policy.name] = world
    first = next(iter(worlds.values()))
    relaxed = RelaxedBound(fleet, first.clusters, matcher)
    bound = tuple(
        relaxed.at(a for a in workload.arrivals if a.at <= now - START < a.at + a.lifetime)
        for now, _ in steps
    )
    mean = sum(bound) / len(bound)
    rows = (
        *(policy_row(name, w.samples, w.tally, mean) for name, w in worlds.items()),
        bound_row(bound),
    )
    runs = {name: report.Run(w.samples, w.tally.waits) for name, w in worlds.items()}
    return Result(rows, runs, bound, worlds)


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
    parser.add_argument("--out", type=Path, help="report directory (default out/sim/<time>)")
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
    args: argparse.Namespace, fleet: Fleet, workload: Workload, settings: Settings, result: Result
) -> dict[str, str]:
    """What the run was, for the terminal and the report's head."""
    pools = sum(len(c.pools) for c in fleet.clusters)
    gpus = next(iter(result.worlds.values())).capacity()
    return {
        "fleet": f"{args.fleet} ({len(fleet.clusters)} clusters, {pools} pools, "
        f"{gpus} GPUs free for the fleet)",
        "arrivals": f"{args.arrivals} ({len(workload.arrivals)} deployments, seed {args.seed})",
        "simulated": f"{format_duration(workload.duration)} "
        f"in steps of {format_duration(settings.step)}",
        "histograms republished every": format_duration(settings.republish),
        "cluster scheduler (binder)": settings.choice.value,
        "placement.plan passes": ", ".join(
            f"{name} {world.tally.passes}" for name, world in result.worlds.items()
        ),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = Settings(
        step=_duration(args.step, "--step") or timedelta(minutes=1),
        republish=_duration(args.republish, "--republish") or timedelta(minutes=3),
        choice=NodeChoice(args.binder),
        seed=args.seed,
    )
    try:
        fleet = fleet_input.load(args.fleet)
        workload = arrival_input.load(
            args.arrivals, args.seed, _duration(args.duration, "--duration")
        )
    except (FleetError, ArrivalError) as err:
        print(f"modelplane-sim: {err}", file=sys.stderr)
        return 2
    result = simulate(fleet, workload, settings, progress=stderr_progress())
    out = args.out or Path("out/sim") / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    facts = _facts(args, fleet, workload, settings, result)
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
