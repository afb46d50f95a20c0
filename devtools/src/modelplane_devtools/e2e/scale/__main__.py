"""`make e2e-scale`: a stack with several workload clusters, then one fleet-scale run.

The control plane as the e2e suite runs it (Crossplane core, the registry,
Modelplane installed from its packages: MODELPLANE_E2E_PACKAGES, as `make e2e`
sets it), and `--clusters` workload clusters, each with kube-scheduler, kwok,
the LeaderWorkerSet controller and the real agent. Everything in
`out/scale/<time>/` (the stack's logs beside the table); every process stopped
by its PID at the end. The profile's sizes are options, defaulting to the full
profile (`profile.FULL`); Crossplane polls at its own default (`POLL_INTERVAL`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from modelplane_devtools.e2e import agent, install, kwok, lws, pki, stack
from modelplane_devtools.e2e.processes import Supervisor
from modelplane_devtools.e2e.scale import profile, run

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
    parser.add_argument("--settle", type=float, default=full.settle, help="seconds at most")
    parser.add_argument("--seed", type=int, default=full.seed)
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
        settle=args.settle,
        seed=args.seed,
    )
    named = sized if sized == full else dataclasses.replace(sized, name="custom")
    return named, args.poll_interval


def _workload(
    running: stack.Stack, index: int, credentials: pki.ClusterCredentials
) -> stack.Cluster:
    name = f"workload-{index}"
    cluster = stack.start_cluster(
        running.supervisor, running.workdir, name, credentials, stack.WORKLOAD, node_lifecycle=True
    )
    kwok.start(
        running.supervisor,
        cluster.kubeconfig,
        running.workdir,
        binary=stack.binary("kwok"),
        source=stack.module_dir("workloads", kwok.MODULE),
        name=f"{name}-kwok",
    )
    lws.start(
        cluster,
        running.workdir,
        credentials.ca,
        binary=stack.binary("lws"),
        source=stack.module_dir("workloads", lws.MODULE),
        name=f"{name}-lws",
    )
    agent.start(cluster.kube, running.supervisor, running.workdir, name=f"{name}-modelplane-agent")
    return cluster


def main(argv: list[str] | None = None) -> int:
    sized, poll_interval = _options(sys.argv[1:] if argv is None else argv)
    stack.check_ports_free()
    workdir = stack.ROOT / "out" / "scale" / time.strftime("%Y%m%d-%H%M%S")
    workdir.mkdir(parents=True)
    running = stack.Stack(workdir, Supervisor(workdir / "logs"))
    try:
        credentials = pki.cluster_credentials(workdir / "pki", "e2e-ca")
        running.control_plane = stack.start_cluster(
            running.supervisor, workdir, "control-plane", credentials, stack.CONTROL_PLANE
        )
        clusters = [_workload(running, i, credentials) for i in range(sized.clusters)]
        running.workload = clusters[0]
        running.registry = stack.start_registry(running)
        running.root_ca = stack.start_crossplane(
            running, running.control_plane, poll_interval=poll_interval
        )
        running.installed = install.install(running)
        providers = [stack.provider_identity(c, credentials) for c in clusters]
        outcome = run.run(running, [c.kube for c in clusters], providers, sized, workdir)
    finally:
        running.supervisor.stop()
    print(f"table and logs: {outcome.folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
