"""Kubernetes' own verdict on DRA CEL selectors: a client for `.tools/bin/cel-oracle`.

The oracle (tools/cel-oracle/main.go, built by `make setup`) compiles each
selector with `k8s.io/dynamic-resource-allocation/cel` as the API server
validates a new ResourceClaim, and evaluates it on a device as the allocator
does. One process serves a whole test session: a case is one JSON line on
its stdin, its verdict one JSON line on its stdout, in order. Its stderr goes
to a log file a failing test can show.

A verdict's `outcome` is one of:

* ``true`` / ``false``: the selector evaluated to that on the device;
* ``compile``: validation rejects the expression (syntax, undeclared name,
  type check, result not bool, too long);
* ``cost``: it compiles, but its estimated worst-case cost exceeds
  ``CELSelectorExpressionMaxCost`` (validation rejects it as too complex), or
  evaluation reached the runtime cost limit;
* ``runtime``: evaluation on this device failed (a missing key, a type error
  on a dynamic value, a bad ``quantity()`` literal...);
* ``input``: the case was malformed (a bug in the caller).

The binary is `.tools/bin/cel-oracle` unless CEL_ORACLE names another; a
missing binary is an error naming `make setup`, never a skip.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from modelplane_devtools import paths

OUTCOMES = frozenset({"true", "false", "compile", "cost", "runtime", "input"})


@dataclass(frozen=True, slots=True)
class OracleAnswer:
    outcome: str
    message: str = ""


def binary() -> Path:
    """The oracle's path; raises paths.ToolMissing with the fix."""
    return paths.binary("cel-oracle", "CEL_ORACLE")


class Oracle:
    """One running oracle process; `judge` asks it about one case at a time."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self._log_file: IO[str] = log.open("w")
        self._process = subprocess.Popen(
            [str(binary())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            text=True,
            bufsize=1,
        )
        self.pid = self._process.pid

    def judge(self, expression: str, device: Mapping[str, Any]) -> OracleAnswer:
        """Kubernetes' verdict on one selector for one device (`{driver, attributes,
        capacity}` with attributes as `{int|bool|string|version: value}` and capacity as
        quantity strings)."""
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(json.dumps({"expression": expression, "device": device}) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"cel-oracle (pid {self.pid}) exited; its log: {self.stderr()}")
        answer = json.loads(line)
        verdict = OracleAnswer(answer["outcome"], answer.get("message", ""))
        if verdict.outcome not in OUTCOMES or verdict.outcome == "input":
            raise RuntimeError(f"cel-oracle could not read the case: {verdict}")
        return verdict

    def stderr(self) -> str:
        self._log_file.flush()
        return self.log.read_text()

    def stop(self) -> None:
        """Close its stdin (it exits at end of input); kill it, by its PID, if it lingers."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._log_file.close()
