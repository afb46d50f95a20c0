"""The report: PNG plots (matplotlib, Agg: no display needed) and one HTML page.

gpus.png        GPUs allocated over time per policy, with the upper bound
waiting.png     replicas waiting over time
overpromised.png  over-promised pods, cumulative
stranded.png    stranded GPUs over time
placement.png   time to placement, as the share of replicas placed within t
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from modelplane_sim import bound, policies, summary
from modelplane_sim.summary import HEADER, Row, cells
from modelplane_sim.world import Sample


@dataclass(frozen=True, slots=True)
class Run:
    """What one policy left: its samples and its times to placement (minutes)."""

    samples: Sequence[Sample]
    waits: Sequence[float]


PLOTS = {
    "gpus.png": ("GPUs allocated", "allocated"),
    "waiting.png": ("replicas waiting", "waiting"),
    "overpromised.png": ("over-promised pods (cumulative)", "overpromised_pods"),
    "stranded.png": ("stranded GPUs (free, no waiting pod fits)", "stranded"),
}


def _series_plot(
    path: Path, title: str, field: str, runs: Mapping[str, Run], bound: Sequence[int] | None
) -> None:
    fig, ax = plt.subplots(figsize=(7.5, 3.6), dpi=90)
    for name, run in runs.items():
        hours = [s.minute / 60 for s in run.samples]
        ax.plot(hours, [getattr(s, field) for s in run.samples], label=name, linewidth=1.4)
    if bound is not None:
        first = next(iter(runs.values()))
        hours = [s.minute / 60 for s in first.samples]
        ax.plot(hours, bound, label="upper bound", color="black", linestyle="--", linewidth=1)
    ax.set_title(title)
    ax.set_xlabel("simulated hours")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _placement_plot(path: Path, runs: Mapping[str, Run]) -> None:
    fig, ax = plt.subplots(figsize=(7.5, 3.6), dpi=90)
    for name, run in runs.items():
        finite = sorted(w for w in run.waits if not math.isinf(w))
        total = len(run.waits) or 1
        ax.step(finite, [(i + 1) / total for i in range(len(finite))], where="post", label=name)
    ax.set_title("time to placement: share of replicas bound within")
    ax.set_xlabel("minutes after the deployment arrived")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plots(out: Path, runs: Mapping[str, Run], bound: Sequence[int]) -> list[Path]:
    written = []
    for filename, (title, field) in PLOTS.items():
        path = out / filename
        _series_plot(path, title, field, runs, bound if field == "allocated" else None)
        written.append(path)
    path = out / "placement.png"
    _placement_plot(path, runs)
    written.append(path)
    return written


def page(out: Path, rows: Sequence[Row], images: Sequence[Path], facts: Mapping[str, str]) -> Path:
    """report.html beside the PNGs it shows."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADER)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells(r)) + "</tr>" for r in rows
    )
    settings = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in facts.items()
    )
    definitions = "".join(
        f"<pre>{html.escape(module.__doc__ or '')}</pre>" for module in (policies, bound, summary)
    )
    figures = "".join(f'<p><img src="{html.escape(p.name)}" alt="{p.stem}"></p>' for p in images)
    text = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>modelplane-sim report</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}
table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.2em .6em;text-align:left}}</style>
</head><body>
<h1>modelplane-sim</h1>
<p>The same arrivals replayed through the project's placement core under each accounting
policy; a node-level model of the cluster scheduler decides what really binds.
Definitions: <code>sim/src/modelplane_sim/summary.py</code>;
the upper bound: <code>sim/bound.py</code>.</p>
<table>{settings}</table>
<h2>Summary</h2>
<table><tr>{head}</tr>{body}</table>
<h2>Definitions</h2>
{definitions}
<h2>Over time</h2>
{figures}
</body></html>
"""
    path = out / "report.html"
    path.write_text(text)
    return path
