"""Time on the wire: RFC 3339 timestamps and Go-style durations.

Every function takes `now` from its shell; nothing here reads the clock.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h))+$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> timedelta:
    """Parse a duration such as "5m", "90s" or "1h30m" (the units the XRDs allow)."""
    if not isinstance(text, str) or not _DURATION.match(text):
        raise ValueError(f"{text!r} is not a duration such as 5m, 90s or 1h30m")
    seconds = sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))
    return timedelta(seconds=seconds)


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 timestamp into an aware UTC datetime.

    Naive timestamps are rejected: a time without a zone cannot be compared
    across clocks, which is the whole point of observedAt and scheduledAt.
    """
    if not isinstance(text, str) or "T" not in text.upper():
        raise ValueError(f"{text!r} is not an RFC 3339 timestamp")
    try:
        parsed = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError as err:
        raise ValueError(f"{text!r} is not an RFC 3339 timestamp") from err
    if parsed.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone")
    return parsed.astimezone(UTC)


def format_time(moment: datetime) -> str:
    """Format an aware datetime as RFC 3339 in UTC with a Z suffix, to the second."""
    return moment.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
