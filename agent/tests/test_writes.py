"""The publisher's retry rule: exponential per observation, jittered, capped, never sooner
than the API server asked."""

from __future__ import annotations

import pytest
from modelplane_agent.writes import retry_delay

DELAYS = {
    "the first failure waits the min interval": (1, 0.5, None, 2.0),
    "each failure in a row doubles it": (3, 0.5, None, 8.0),
    "it is capped": (10, 0.5, None, 60.0),
    "jitter spreads it down to half": (1, 0.0, None, 1.0),
    "and up to one and a half": (2, 0.999, None, 5.996),
    "a Retry-After longer than the backoff is honoured": (1, 0.5, 7.0, 7.0),
    "a Retry-After shorter than the backoff does not shorten it": (3, 0.5, 1.0, 8.0),
    "a Retry-After beyond the cap is cut to the cap": (1, 0.5, 3600.0, 300.0),
}


@pytest.mark.parametrize(("failures", "jitter", "asked", "delay"), DELAYS.values(), ids=DELAYS)
def test_retry_delay(failures, jitter, asked, delay):
    got = retry_delay(failures, jitter, asked, initial=2.0, backoff_max=60.0, retry_after_max=300.0)
    assert got == pytest.approx(delay)
