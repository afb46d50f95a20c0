"""The run's table: both arms side by side, then what the control plane spent.

Printed, and written to `<out>/table.md` with the figures as JSON
(`<out>/figures.json`) for anyone who wants to compare runs.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from modelplane_e2e.scale import analysis, cost, record
from modelplane_e2e.scale.meters import Meters
from modelplane_e2e.scale.profile import Profile
from modelplane_e2e.stack import Stack

# The processes whose CPU the table shows (the JSON has every process).
SHOWN = ("crossplane", "compose-", "modelplane-agent", "provider-kubernetes")


@dataclass(frozen=True)
class Measured:
    cpu_per_minute: dict[str, float]  # process -> CPU seconds per minute
    requests: dict[str, float]  # function -> RunFunctionRequests in the window
    wire_bytes: dict[str, int]  # function -> bytes its server received in the window

    @classmethod
    def take(cls, stack: Stack, instruments: Meters, seconds: float) -> Measured:
        assert stack.installed is not None
        functions = list(stack.installed.functions)
        instruments.wire.sample()
        after = cost.snapshot(stack.supervisor.processes)
        sent = cost.requests_sent(instruments.metrics_port, functions)
        requests = {f: sent[f] - instruments.requests_before.get(f, 0.0) for f in functions}
        return cls(
            cost.per_minute(instruments.cpu_before, after, seconds),
            requests,
            instruments.wire.totals(),
        )

    def bytes_per_request(self, function: str) -> float | None:
        sent = self.requests.get(function, 0.0)
        return self.wire_bytes.get(function, 0) / sent if sent else None


@dataclass(frozen=True)
class Facts:
    profile: Profile
    clusters: int
    set_up_seconds: float
    run_seconds: float
    unconverged: list[str]
    watch_cache_resets: dict[str, int]  # resource -> resets of the control plane's cache
    record_gaps: dict[str, record.Gap]  # watch -> how its record may fall short


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return "never" if math.isinf(value) else f"{value:.0f} s"


def _arm_rows(figures: dict[str, analysis.Figures]) -> list[str]:
    rows = [
        "| arm | replicas placed | admitted, not bound | pods created "
        "| never bound: the model / race / stale | pending at end | deployments fully bound "
        "| time to all pods bound p50 / p99 | bound to relayed p50 / p99 "
        "| time some deployment waited for capacity | idle GPUs while it waited (mean, GPU-min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in figures.values():
        causes = " / ".join(str(f.never_bound[c]) for c in analysis.CAUSES)
        rows.append(
            f"| {f.arm} | {f.replicas_placed} of {f.replicas_wanted} "
            f"| {len(f.admitted_unbound)} | {f.pods_created} "
            f"| {causes} | {f.pending_at_end} | {f.bound_deployments} of {f.deployments} "
            f"| {_seconds(f.p50)} / {_seconds(f.p99)} "
            f"| {_seconds(f.relay_p50)} / {_seconds(f.relay_p99)} "
            f"| {f.under.waited_minutes:.1f} min "
            f"| {f.under.mean_idle_gpus:.0f}, {f.under.idle_gpu_minutes:.0f} |"
        )
    return rows


def _stale_rows(figures: dict[str, analysis.Figures]) -> list[str]:
    rows = [
        "| arm | status updates with a condition moved back: replicas / deployments "
        "| admissions decided again | placed-at moved back | placements both Admitted "
        "and Overcommitted |",
        "|---|---|---|---|---|",
    ]
    for f in figures.values():
        s = f.stale
        rows.append(
            f"| {f.arm} | {s.replica_conditions_back} / {s.deployment_conditions_back} "
            f"| {s.decided_again} | {s.placements_back} | {s.both_verdicts} |"
        )
    return rows


def _cost_rows(measured: Measured) -> list[str]:
    rows = ["| process | CPU s per minute |", "|---|---|"]
    for name, value in sorted(measured.cpu_per_minute.items()):
        if any(part in name for part in SHOWN):
            rows.append(f"| {name} | {value:.1f} |")
    rows += ["", "| function | requests | KiB received per request |", "|---|---|---|"]
    for function, sent in sorted(measured.requests.items()):
        size = measured.bytes_per_request(function)
        shown = f"{size / 1024:.1f}" if size is not None else "-"
        rows.append(f"| {function} | {sent:.0f} | {shown} |")
    return rows


SHOWN_UNCONVERGED = 12  # the reasons the head names when a run did not converge


def _health(facts: Facts) -> list[str]:
    """What may have bent the figures: what had still not converged, the control plane's
    watch caches that fell behind etcd (their watchers saw changes minutes late), and
    the watches whose record falls short (figures read from them undercount)."""
    lines = []
    if facts.unconverged:
        named = "; ".join(facts.unconverged[:SHOWN_UNCONVERGED])
        more = len(facts.unconverged) - SHOWN_UNCONVERGED
        lines.append(f"unconverged: {named}" + (f"; and {more} more" if more > 0 else ""))
    resets = ", ".join(f"{name} {n}" for name, n in facts.watch_cache_resets.items())
    lines.append(f"control-plane watch cache resets: {resets or 'none'}")
    for name, gap in facts.record_gaps.items():
        last = f", the last: {gap.last_message}" if gap.messages else ""
        lines.append(
            f"record of {name} may fall short: restarted {gap.restarts} times, "
            f"{gap.messages} kubectl messages{last}"
        )
    return lines


def table(facts: Facts, figures: dict[str, analysis.Figures], measured: Measured) -> str:
    p = facts.profile
    left = len(facts.unconverged)
    converged = f"; NOT converged: {left} items" if left else "; converged"
    head = (
        f"profile {p.name} (seed {p.seed}): {facts.clusters} workload clusters, "
        f"{p.nodes} nodes per arm per cluster ({p.nodes_in_all} kwok nodes in all), "
        f"{p.deployments} deployments per arm over {p.window:.0f} s; set-up "
        f"{facts.set_up_seconds:.0f} s, arrivals and converging {facts.run_seconds:.0f} s"
        + converged
    )
    spans = ", ".join(f"{f.arm} {f.arrival_span:.0f} s" for f in figures.values())
    arrived = f"deployments created over (first to last): {spans}"
    rows = [
        head,
        arrived,
        *_health(facts),
        "",
        *_arm_rows(figures),
        "",
        *_stale_rows(figures),
        "",
        *_cost_rows(measured),
    ]
    return "\n".join(rows) + "\n"


def write(out: Path, text: str, figures: dict[str, analysis.Figures], measured: Measured) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(text)
    data = {
        "figures": {arm: asdict(f) for arm, f in figures.items()},
        "cost": asdict(measured),
    }
    (out / "figures.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    print(text)
    return out
