"""What the control plane spent: CPU of each process, bytes on each function's wire.

- **CPU**: user + system time from `/proc/<pid>/stat` of each process the
  Supervisor started, plus its descendants (a packaged function runs under
  bubblewrap: the Supervisor's PID is the sandbox, the Python server its
  child), plus the children that already exited (`cutime`, `cstime`).
  Snapshots at the first arrival and at the end; the figure is CPU seconds
  per minute of that window.
- **Request bytes per reconcile**: for each function, the bytes its server's
  TCP connections received (`ss -ti`, `bytes_received` of each established
  connection to the function's port, the largest value seen per connection,
  sampled every few seconds) divided by the RunFunctionRequests Crossplane
  sent it (`function_run_function_request_total`, from Crossplane core's
  metrics endpoint). These are the bytes on the wire: the protobuf request
  inside gRPC's HTTP/2 frames inside TLS records, so a few per cent more
  than the serialized request; the responses are not in it.
"""

from __future__ import annotations

import os
import re
import subprocess
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from modelplane_devtools.processes import Process
from prometheus_client.parser import text_string_to_metric_families

TICK = os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")


def _stat(pid: int) -> list[str] | None:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # Fields after the command name, which may hold spaces: state is field 3.
    return text[text.rindex(")") + 2 :].split()


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in (PROC / str(pid) / "task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def cpu_seconds(pid: int) -> float:
    """User + system seconds of `pid`, its live descendants and its reaped children."""
    fields = _stat(pid)
    if fields is None:
        return 0.0
    # utime, stime, cutime, cstime are fields 14-17; `fields` starts at field 3.
    ticks = sum(int(v) for v in fields[11:15])
    return ticks / TICK + sum(cpu_seconds(child) for child in _children(pid))


def snapshot(processes: list[Process]) -> dict[str, float]:
    return {p.name: cpu_seconds(p.pid) for p in processes if p.popen.poll() is None}


def per_minute(before: dict[str, float], after: dict[str, float], seconds: float) -> dict:
    minutes = max(seconds / 60, 1e-9)
    return {name: (after[name] - before.get(name, 0.0)) / minutes for name in after}


BYTES = re.compile(r"bytes_received:(\d+)")


def received(port: int) -> dict[str, int]:
    """bytes_received of each established connection whose local port is `port`."""
    done = subprocess.run(
        ["ss", "-tinH", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
        check=False,
    )
    return parse_ss(done.stdout)


def parse_ss(text: str) -> dict[str, int]:
    """`ss -tinH state established` output: per peer address, `bytes_received`. Each
    connection is a line (queues, local and peer address) and an indented info line."""
    out: dict[str, int] = {}
    peer = ""
    for line in text.splitlines():
        if not line.startswith((" ", "\t")):
            peer = line.split()[-1] if line.split() else ""
            continue
        found = BYTES.search(line)
        if found and peer:
            out[peer] = int(found.group(1))
    return out


@dataclass
class Wire:
    """Bytes each function's server received, per connection, as sampled."""

    ports: dict[str, int]  # function -> port
    seen: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))

    def sample(self) -> None:
        for function, port in self.ports.items():
            for peer, count in received(port).items():
                known = self.seen[function].get(peer, 0)
                self.seen[function][peer] = max(known, count)

    def totals(self) -> dict[str, int]:
        return {f: sum(self.seen[f].values()) for f in self.ports}


REQUESTS = "function_run_function_request_total"


def metrics_port(processes: list[Process]) -> int:
    """Crossplane core's metrics port, from the environment the Supervisor gave it."""
    (crossplane,) = [p for p in processes if p.name == "crossplane"]
    environ = (PROC / str(crossplane.pid) / "environ").read_bytes().split(b"\0")
    for entry in environ:
        if entry.startswith(b"METRICS_PORT="):
            return int(entry.split(b"=", 1)[1])
    raise RuntimeError("Crossplane was started without METRICS_PORT")


def scrape(port: int) -> str:
    """Crossplane core's metrics, as its endpoint on `port` serves them."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


Series = tuple[tuple[str, str], ...]  # one sample's labels, sorted by name


def series(text: str, metric: str) -> dict[Series, float]:
    """Each sample named `metric`, by its labels, from the Prometheus text format
    (prometheus_client's parser); the name is matched whole."""
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == metric
    }


def sums(text: str, metric: str, label: str) -> dict[str, float]:
    """Per value of `label`, the sum of the samples named `metric` over their other
    labels (`series`)."""
    out: dict[str, float] = defaultdict(float)
    for labels, value in series(text, metric).items():
        found = dict(labels)
        if label in found:
            out[found[label]] += value
    return dict(out)


def requests_sent(port: int, functions: list[str]) -> dict[str, float]:
    """RunFunctionRequests Crossplane sent each function so far, from its metrics."""
    sent = sums(scrape(port), REQUESTS, "function_name")
    return {function: sent.get(function, 0.0) for function in functions}
