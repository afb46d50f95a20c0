"""What the run saw, as the API servers told it: one `kubectl get --watch` per kind.

Each watch is a process of the stack's Supervisor writing its events
(`--output-watch-events -o json`: `{"type": ADDED|MODIFIED|DELETED, "object": ...}`)
to its log; the analysis reads those logs afterwards. Nothing is sampled: every
change of every watched object is there, with the times the objects carry
themselves (creation, conditions' transitions, `observedAt`, `decidedAt`), so
what is computed from them does not depend on how busy the machine was when
it happened. A watch the server closes is started again (its log continues;
the new watch's initial ADDED events repeat states already recorded, which
the analysis reads as no change). A watch that cannot start again (its list
fails on an overloaded API server) leaves the record short from then on:
`gaps` says so, and the table names it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from modelplane_devtools.processes import Process, Supervisor

from modelplane_e2e.kube import Kube

# (kind, where) for every watch: `control` is the control plane, `workload` each
# workload cluster.
CONTROL_KINDS = ("modeldeployments.modelplane.ai", "modelreplicas.modelplane.ai")
WORKLOAD_KINDS = ("pods", "poolobservations.agent.modelplane.ai")


@dataclass
class Watch:
    name: str
    command: tuple[str, ...]
    process: Process | None = None
    restarts: int = 0

    @property
    def log_name(self) -> str:
        return f"watch-{self.name}"


@dataclass
class Recorder:
    supervisor: Supervisor
    watches: list[Watch] = field(default_factory=list)

    def watch(self, kube: Kube, kind: str) -> Watch:
        short = kind.split(".", 1)[0]
        command = (
            str(kube.kubectl_path),
            f"--kubeconfig={kube.kubeconfig}",
            "get",
            kind,
            "--all-namespaces",
            "--watch",
            "--output-watch-events",
            "-o",
            "json",
        )
        w = Watch(f"{kube.name}-{short}", command)
        w.process = self.supervisor.start(w.log_name, command)
        self.watches.append(w)
        return w

    def keep_alive(self) -> None:
        """Start again every watch whose process ended (the server closed it)."""
        for w in self.watches:
            if w.process is not None and w.process.popen.poll() is not None:
                self.supervisor.stop_process(w.process)
                w.process = self.supervisor.start(w.log_name, w.command)
                w.restarts += 1

    def stop(self) -> None:
        for w in self.watches:
            if w.process is not None:
                self.supervisor.stop_process(w.process)
                w.process = None

    def gaps(self) -> dict[str, Gap]:
        """Each watch that may not have recorded the whole run: restarted, or kubectl
        printed something of its own (why it stopped, or could not start)."""
        found = {}
        for w in self.watches:
            said = messages(self.supervisor.logs / f"{w.log_name}.log")
            if w.restarts or said:
                found[w.name] = Gap(w.restarts, len(said), said[-1] if said else "")
        return found

    def log(self, kube: Kube, kind: str) -> Path:
        return self.supervisor.logs / f"watch-{kube.name}-{kind.split('.', 1)[0]}.log"


@dataclass(frozen=True)
class Gap:
    """How a watch's record may fall short: a restart loses the changes between the old
    watch's end and the new one's list; a list the API server failed (kubectl says so)
    loses everything until a later restart lists again."""

    restarts: int
    messages: int  # kubectl's own lines in the log
    last_message: str


def messages(path: Path) -> list[str]:
    """kubectl's own lines in a watch's log: its events are JSON objects (a line each, or
    pretty-printed), anything else is kubectl telling why it stopped or a warning."""
    text = path.read_text(errors="replace") if path.exists() else ""
    return [line for line in text.splitlines() if line and line[0] not in "{} "]


def events(path: Path) -> list[dict]:
    """Every watch event in a watch's log, in order; lines that are not events (kubectl's
    own messages share the log) are skipped."""
    text = path.read_text(errors="replace") if path.exists() else ""
    decoder = json.JSONDecoder()
    found: list[dict] = []
    at = text.find("{")
    while at >= 0:
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("{", at + 1)
            continue
        if isinstance(value, dict) and "type" in value and "object" in value:
            found.append(value)
        at = text.find("{", end)
    return found
