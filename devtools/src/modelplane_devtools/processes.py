"""Processes of the e2e stack: each with its own log, each stopped by its PID.

A `Supervisor` starts every server of the stack into one log folder and
stops them all, newest first (a controller goes before the API server it
talks to, the API server before its etcd). Nothing is ever stopped by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int, host: str = "127.0.0.1") -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), 0.2):
        return True
    return False


class StartFailed(RuntimeError):
    pass


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def argument(self, flag: str) -> str | None:
        """The value its command line gives `flag` as `flag=value` (the first), or None."""
        args = self.popen.args
        words = [str(a) for a in args] if isinstance(args, list) else []
        return next((w.removeprefix(f"{flag}=") for w in words if w.startswith(f"{flag}=")), None)

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(text[-lines:])


def exit_on_terminate() -> None:
    """Turn SIGTERM into SystemExit, so that a run stopped by `kill` (or by `uv`, which
    forwards it) leaves through its `finally` and stops every process it started by
    PID, as Ctrl-C does; by default SIGTERM ends Python at once and leaves them running."""

    def _exit(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)


@dataclass
class Supervisor:
    logs: Path
    processes: list[Process] = field(default_factory=list)

    def start(
        self,
        name: str,
        command: Sequence[str | Path],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Process:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{name}.log"
        with log.open("ab") as out:
            popen = subprocess.Popen(
                [str(part) for part in command],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
                cwd=cwd,
                # Its own process group, so a Ctrl-C aimed at pytest does not
                # kill the stack before the fixture stops it in order.
                start_new_session=True,
            )
        process = Process(name, popen, log)
        self.processes.append(process)
        with (self.logs / "pids").open("a") as pids:
            pids.write(f"{popen.pid} {name}\n")
        return process

    def wait_until(
        self, process: Process, ready: Callable[[], bool], what: str, timeout: float = 60
    ) -> None:
        """Poll ready() until it holds; fail early, with the log, if the process exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.popen.poll() is not None:
                raise StartFailed(
                    f"{process.name} exited with {process.popen.returncode} before {what}; "
                    f"log {process.log}:\n{process.tail()}"
                )
            with contextlib.suppress(Exception):
                if ready():
                    return
            time.sleep(0.2)
        raise StartFailed(
            f"{process.name} not {what} within {timeout}s; log {process.log}:\n{process.tail()}"
        )

    def stop(self, timeout: float = 15) -> None:
        for process in reversed(list(self.processes)):
            self.stop_process(process, timeout)

    def stop_process(self, process: Process, timeout: float = 15) -> int:
        """SIGTERM to its PID, SIGKILL after `timeout`; returns its exit status.

        It leaves the stack's list (so `exited` no longer reports it); its log stays.
        """
        if process.popen.poll() is None:
            _signal(process, signal.SIGTERM)
            try:
                process.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _signal(process, signal.SIGKILL)
                process.popen.wait(timeout=timeout)
        return self._forget(process)

    def kill_process(self, process: Process, timeout: float = 15) -> int:
        """SIGKILL to its PID at once, as a crash; returns its exit status.

        Like `stop_process`, it leaves the list and its log stays.
        """
        if process.popen.poll() is None:
            _signal(process, signal.SIGKILL)
            process.popen.wait(timeout=timeout)
        return self._forget(process)

    def _forget(self, process: Process) -> int:
        if process in self.processes:
            self.processes.remove(process)
        return process.popen.returncode

    def exited(self) -> list[Process]:
        """Processes that died while the stack was supposed to be up."""
        return [p for p in self.processes if p.popen.poll() is not None]

    def tails(self, lines: int = 15) -> str:
        """The last lines of every process's log, oldest process first, for a failure's report."""
        return "\n".join(f"--- {p.name} ({p.log})\n{p.tail(lines)}" for p in self.processes)


def _signal(process: Process, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signum)
