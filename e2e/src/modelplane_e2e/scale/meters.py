"""A run's instruments, which the run drives and its report reads.

`Meters` holds the watches (record), the wire's counters (cost) and the
snapshots taken before the run; `sampling` waits while sampling the wire
every `SAMPLE` seconds, since its counters are per connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from modelplane_e2e.scale import cost, record

SAMPLE = 5.0  # seconds between samples of the wire while waiting


@dataclass
class Meters:
    """The run's instruments: the watches, the wire, the CPU snapshots."""

    recorder: record.Recorder
    wire: cost.Wire
    metrics_port: int
    began: float = 0.0
    cpu_before: dict[str, float] = field(default_factory=dict)
    requests_before: dict[str, float] = field(default_factory=dict)

    def sample(self) -> None:
        self.recorder.keep_alive()
        self.wire.sample()

    def wait(self, seconds: float) -> None:
        """Sleep `seconds`, sampling the wire along the way."""
        sampling(seconds, self.sample)


def sampling(seconds: float, sample: Callable[[], None]) -> None:
    """Sleep `seconds`, calling `sample` every SAMPLE seconds along the way (the wire's
    counters are per connection, so a connection that closes between samples is lost)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        sample()
        time.sleep(min(SAMPLE, left))
