"""Each policy's run reduced to one row of the table, and the table as text.

GPUs allocated   mean over the run of the GPUs bound to the fleet's
                 pods (background load excluded), and that mean as a
                 share of the upper bound's mean
waiting          mean over the run of the replicas live deployments
                 want but do not have bound (unplaced or pending)
over-promised    pods the core placed that could not bind at once, as a
                 count and as a share of all pods placed
never bound      pods of placements that ended (moved by healing,
                 deleted, or the run ended) without ever binding
stranded         mean free GPUs on nodes where no waiting pod that
                 could use the pool fits
placement p50/p99 minutes from a deployment's arrival to each replica's
                 first bind; a replica never bound before its deployment
                 left counts as never (shown as "never" when the
                 percentile falls on it); replicas still waiting at the
                 end of the run are left out
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from modelplane_sim.world import Sample, Tally


@dataclass(frozen=True, slots=True)
class Row:
    policy: str
    gpus: float
    share: float | None  # of the bound's mean; None for the bound itself
    waiting: float | None
    overpromised_pods: int | None
    overpromised_share: float | None
    never_bound_pods: int | None
    stranded: float | None
    p50: float | None
    p99: float | None
    never_placed: float | None
    passes: int | None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (inf stays inf); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def policy_row(name: str, samples: Sequence[Sample], tally: Tally, bound_mean: float) -> Row:
    gpus = statistics.fmean(s.allocated for s in samples)
    return Row(
        policy=name,
        gpus=gpus,
        share=gpus / bound_mean if bound_mean else None,
        waiting=statistics.fmean(s.waiting for s in samples),
        overpromised_pods=tally.overpromised_pods,
        overpromised_share=tally.overpromised_pods / tally.placed_pods
        if tally.placed_pods
        else 0.0,
        never_bound_pods=tally.never_bound_pods,
        stranded=statistics.fmean(s.stranded for s in samples),
        p50=percentile(tally.waits, 50),
        p99=percentile(tally.waits, 99),
        never_placed=(
            sum(1 for w in tally.waits if math.isinf(w)) / len(tally.waits) if tally.waits else 0.0
        ),
        passes=tally.passes,
    )


def bound_row(series: Sequence[int]) -> Row:
    return Row("upper bound", statistics.fmean(series), None, *([None] * 9))


HEADER = (
    "policy",
    "GPUs allocated",
    "of bound",
    "waiting",
    "over-promised pods",
    "never bound",
    "stranded GPUs",
    "placement p50",
    "p99",
    "never placed",
)


def _minutes(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "never"
    return f"{value:.1f} min" if value < 10 else f"{value:.0f} min"


def cells(row: Row) -> tuple[str, ...]:
    def opt(value: float | int | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    over = (
        "-"
        if row.overpromised_pods is None
        else f"{row.overpromised_pods} ({(row.overpromised_share or 0) * 100:.1f}%)"
    )
    return (
        row.policy,
        f"{row.gpus:.0f}",
        "-" if row.share is None else f"{row.share * 100:.0f}%",
        opt(row.waiting, ".1f"),
        over,
        opt(row.never_bound_pods, "d"),
        opt(row.stranded, ".0f"),
        _minutes(row.p50),
        _minutes(row.p99),
        "-" if row.never_placed is None else f"{row.never_placed * 100:.1f}%",
    )


def table(rows: Sequence[Row]) -> str:
    """A plain-text (and Markdown) table."""
    body = [HEADER, *(cells(r) for r in rows)]
    widths = [max(len(line[i]) for line in body) for i in range(len(HEADER))]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(HEADER), rule, *(line(c) for c in body[1:])])
