"""One demo run's life: its folder, what it prints, how it stops.

`up` brings the demo up in out/demo/<time>/, records the run (the folder in
out/demo/current, its own PID in the folder's demo.pid), prints where to
look, and waits for Ctrl-C or SIGTERM (`make demo-down` sends it); then it
stops every process by its PID, in reverse start order, and prints where the
logs stayed. `down` is `make demo-down`: it signals the running `up`, or,
when that process is gone (killed outright), stops the run's processes
itself from the Supervisor's `logs/pids`, only those started after the run
began (a PID the system reused since belongs to someone else). `smoke` is
`up` without the waiting: placed, the placements counted in the functions'
metrics (a scrape of each process's /metrics), then stopped, for tests/demo.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from modelplane_common import metrics
from modelplane_devtools.paths import ROOT, TOOLS

from modelplane_e2e.demo import fleet, scraped
from modelplane_e2e.kube import eventually
from modelplane_e2e.stack import dump

RUNS = ROOT / "out" / "demo"
CURRENT = RUNS / "current"  # holds the running demo's folder
PID_FILE = "demo.pid"
# The control plane's objects a failed smoke leaves for reading.
DUMPED = ["inferenceclusters", "modeldeployments", "modelreplicas", "events",
          "objects.kubernetes.m.crossplane.io"]  # fmt: skip


class Stopped(Exception):
    """SIGTERM arrived (`make demo-down`): unwind and tear down, as Ctrl-C does."""


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise Stopped


def new_run() -> Path:
    workdir = RUNS / time.strftime("%Y%m%d-%H%M%S")
    workdir.mkdir(parents=True)
    return workdir


@contextmanager
def recorded(workdir: Path) -> Iterator[None]:
    """The run is `make demo-down`'s to find while it lasts."""
    (workdir / PID_FILE).write_text(f"{os.getpid()}\n")
    CURRENT.write_text(f"{workdir}\n")
    try:
        yield
    finally:
        CURRENT.unlink(missing_ok=True)


def _agent_metrics(demo: fleet.Demo) -> list[str]:
    """The agents' /metrics, one per workload cluster (as bring-up names their processes)."""
    by_name = {p.name: p.argument("--listen") for p in demo.running.supervisor.processes}
    return [
        f"  curl -s http://{by_name[name]}/metrics   # the agent on {w.cluster.name}"
        for index, w in enumerate(demo.workloads)
        if by_name.get(name := f"workload-{index}-modelplane-agent")
    ]


def _function_metrics(demo: fleet.Demo) -> list[str]:
    """Each function process's /metrics (one process per pod its runtime config asks), and
    the names to look for: docs/operating.md, "The functions' metrics"."""
    return [
        f"  curl -s http://{address}{metrics.PATH} | grep '^modelplane_'   "
        f"# {name}, pod {index + 1} of {len(addresses)}"
        for name, addresses in demo.function_metrics().items()
        for index, address in enumerate(addresses)
    ]


def banner(demo: fleet.Demo, workdir: Path) -> str:
    control = demo.control.kubeconfig
    first = demo.deployments[0]
    lines = [
        f"Modelplane demo up in {demo.running.timings.get('placed', 0):.0f}s; run folder {workdir}",
        "",
        f"Control plane:   export KUBECONFIG={control} PATH={TOOLS}:$PATH",
        "  kubectl get ic,mdep,mrep -A",
        "  kubectl get mdep -A -o wide; kubectl get ic -o wide",
        f"  crossplane resource trace modeldeployment/{first.name} -n {first.namespace} -o json",
        f"  kubectl get events -n {first.namespace}",
        "Workload clusters:",
        *(
            f"  {w.cluster.name:<10} KUBECONFIG={w.admin.kubeconfig} "
            "kubectl get pods -A -o wide; kubectl get poolobservations -o yaml"
            for w in demo.workloads
        ),
        'Metrics (Prometheus text; every name in docs/operating.md, "Monitoring"):',
        *_agent_metrics(demo),
        *_function_metrics(demo),
        "",
        f"Logs: {demo.running.logs}",
        "Stop: Ctrl-C here, or `make demo-down` from another terminal.",
    ]
    return "\n".join(lines)


def _teardown(demo: fleet.Demo) -> None:
    # A second Ctrl-C (the terminal and make each deliver one) must not cut the stop short.
    before = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        print("Stopping every process by its PID...", flush=True)
        demo.running.supervisor.stop()
        print(f"Stopped. Logs and certificates kept in {demo.running.workdir}", flush=True)
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def up() -> int:
    """`make demo`: bring it up, print where to look, stay up until Ctrl-C or demo-down."""
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    workdir = new_run()
    print(f"Bringing the demo up in {workdir} (logs in {workdir / 'logs'})...", flush=True)
    with recorded(workdir):
        try:
            demo = fleet.bring_up(workdir)
        except (KeyboardInterrupt, Stopped):
            print(f"Interrupted; everything started is stopped. Logs: {workdir}", flush=True)
            return 130
        try:
            print(banner(demo, workdir), flush=True)
            while True:
                signal.pause()
        except (KeyboardInterrupt, Stopped):
            pass
        finally:
            _teardown(demo)
    return 0


@dataclass(frozen=True)
class Smoked:
    """A smoke run: the demo (stopped) and what its functions' metrics counted as placements
    while it was up, by (cluster, change)."""

    demo: fleet.Demo
    placements: Counter[tuple[str, str]]


def smoke(workdir: Path) -> Smoked:
    """Bring it up in `workdir`, placed and the placements counted in the functions'
    metrics (or raise what is not), then stop it all."""
    demo = fleet.bring_up(workdir)
    try:
        print(banner(demo, workdir), flush=True)
        counted = eventually(
            partial(fleet.placements_counted, demo), "the placements counted in /metrics"
        )
        print(f"Counted by the functions' {scraped.PLACEMENTS}: {dict(counted)}", flush=True)
        return Smoked(demo, counted)
    finally:
        dump(demo.control, DUMPED, workdir / "dump")
        _teardown(demo)


def _started_at(pid: int) -> float | None:
    """When the process started (seconds since the epoch), or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = re.search(r"^btime (\d+)$", Path("/proc/stat").read_text(), re.MULTILINE)
    except OSError:
        return None
    # Field 22, counted after the command's closing parenthesis (it may hold spaces).
    ticks = int(stat.rsplit(")", 1)[1].split()[19])
    return int(boot.group(1)) + ticks / os.sysconf("SC_CLK_TCK") if boot else None


def leftovers(pids_file: Path, since: float) -> list[int]:
    """The run's processes still alive: listed in `pids_file`, started at or after `since`."""
    listed = [int(line.split()[0]) for line in pids_file.read_text().splitlines() if line.strip()]
    return [pid for pid in listed if _alive_since(pid, since)]


def _signal_all(pids: list[int], signum: signal.Signals) -> None:
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signum)


def _alive_since(pid: int, since: float) -> bool:
    """Alive, and started at or after `since` (so not a reused PID); a second of slack, as
    btime and start ticks are whole seconds and ticks."""
    started = _started_at(pid)
    return started is not None and started >= since - 1


def down(wait: float = 120) -> int:
    """`make demo-down`: stop the running demo, or what a killed one left behind."""
    if not CURRENT.exists():
        print("No demo is running (out/demo/current is absent).")
        return 0
    workdir = Path(CURRENT.read_text().strip())
    run_began = began(workdir)
    owner = int((workdir / PID_FILE).read_text())
    if _alive_since(owner, run_began):
        os.kill(owner, signal.SIGTERM)
        deadline = time.monotonic() + wait
        while _alive_since(owner, run_began) and time.monotonic() < deadline:
            time.sleep(0.5)
        print(f"Stopped the demo (PID {owner}); logs kept in {workdir}")
        return 0
    pids = leftovers(workdir / "logs" / "pids", run_began)
    _signal_all(pids, signal.SIGTERM)
    time.sleep(5)
    _signal_all(leftovers(workdir / "logs" / "pids", run_began), signal.SIGKILL)
    CURRENT.unlink(missing_ok=True)
    print(f"Stopped {len(pids)} processes of {workdir} by PID; logs kept there.")
    return 0


def began(workdir: Path) -> float:
    """When the run began: its folder's name is its start time (local, to the second)."""
    return time.mktime(time.strptime(workdir.name, "%Y%m%d-%H%M%S"))
