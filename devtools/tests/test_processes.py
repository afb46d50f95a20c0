"""The harness stops what it started when it is itself stopped (processes.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# A run as the scale harnesses are: exit_on_terminate, one supervised process, a
# `finally` that stops it. It prints the child's PID once it is up.
RUN = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from modelplane_devtools.processes import Supervisor, exit_on_terminate
    if sys.argv[2] == "handled":
        exit_on_terminate()
    supervisor = Supervisor(Path(sys.argv[1]))
    try:
        child = supervisor.start("sleeper", ["sleep", "300"])
        print(child.popen.pid, flush=True)
        time.sleep(300)
    finally:
        supervisor.stop()
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A reaped-or-zombie child of a dead parent is adopted and reaped by init; a zombie
    # counts as stopped.
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def _stopped_run(tmp_path: Path, mode: str) -> tuple[int, int]:
    run = subprocess.Popen(
        [sys.executable, "-c", RUN, str(tmp_path), mode], stdout=subprocess.PIPE, text=True
    )
    assert run.stdout is not None
    child = int(run.stdout.readline())
    run.send_signal(signal.SIGTERM)
    code = run.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    return code, child


@pytest.mark.parametrize(
    ("mode", "child_stopped"),
    [
        pytest.param("handled", True, id="SIGTERM with exit_on_terminate stops every child"),
        pytest.param("default", False, id="SIGTERM by default leaves the children running"),
    ],
)
def test_a_terminated_run_stops_what_it_started(tmp_path, mode, child_stopped):
    code, child = _stopped_run(tmp_path, mode)
    try:
        assert (not _alive(child)) == child_stopped
        assert code == (128 + signal.SIGTERM if mode == "handled" else -signal.SIGTERM)
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
