"""`make e2e-scale`: one fleet-scale run (`run`) on the stack `bring_up` starts with
`--clusters` workload clusters.

Everything in `out/scale/<time>/` (the stack's logs beside the table); every
process stopped by its PID at the end. The profile's sizes are options,
defaulting to the full profile (`profile.FULL`); Crossplane polls at its own
default (`POLL_INTERVAL`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from modelplane_devtools import paths
from modelplane_devtools.processes import Supervisor, exit_on_terminate

from modelplane_e2e import stack
from modelplane_e2e.scale import profile, run
from modelplane_e2e.scale.bring_up import bring_up

# Crossplane's own default: the e2e suite polls every 5 s to be quick; at fleet scale
# that would re-run every composite every 5 s, which no control plane is set up to do.
POLL_INTERVAL = "1m"


def _options(argv: list[str]) -> tuple[profile.Profile, str]:
    full = profile.FULL
    parser = argparse.ArgumentParser(prog="modelplane-e2e-scale", description=__doc__)
    parser.add_argument("--clusters", type=int, default=full.clusters)
    parser.add_argument("--nodes", type=int, default=full.nodes, help="per arm per cluster")
    parser.add_argument("--deployments", type=int, default=full.deployments, help="per arm")
    parser.add_argument("--window", type=float, default=full.window, help="seconds")
    parser.add_argument(
        "--converge-timeout",
        type=float,
        default=full.converge_timeout,
        help="seconds at most after the last arrival for the fleet to converge",
    )
    parser.add_argument("--seed", type=int, default=full.seed)
    parser.add_argument(
        "--max-age",
        type=int,
        default=full.max_age_seconds,
        help="the InferenceClusters' spec.observation.maxAge, in seconds",
    )
    parser.add_argument(
        "--poll-interval",
        default=POLL_INTERVAL,
        help="Crossplane core's --poll-interval (its own default: 1m)",
    )
    args = parser.parse_args(argv)
    sized = dataclasses.replace(
        full,
        clusters=args.clusters,
        nodes=args.nodes,
        deployments=args.deployments,
        window=args.window,
        converge_timeout=args.converge_timeout,
        seed=args.seed,
        max_age_seconds=args.max_age,
    )
    named = sized if sized == full else dataclasses.replace(sized, name="custom")
    return named, args.poll_interval


def main(argv: list[str] | None = None) -> int:
    sized, poll_interval = _options(sys.argv[1:] if argv is None else argv)
    exit_on_terminate()
    workdir = paths.ROOT / "out" / "scale" / time.strftime("%Y%m%d-%H%M%S")
    workdir.mkdir(parents=True)
    running = stack.Stack(workdir, Supervisor(workdir / "logs"))
    try:
        kubes, providers = bring_up(running, sized.clusters, poll_interval)
        outcome = run.run(running, kubes, providers, sized, workdir)
    finally:
        running.supervisor.stop()
    print(f"table and logs: {outcome.folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
