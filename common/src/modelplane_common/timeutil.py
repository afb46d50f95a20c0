"""Time on the wire: RFC 3339 timestamps and Go-style durations.

Every function takes `now` from its shell; nothing here reads the clock.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h))+$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


# The longest duration Go's time.Duration holds (int64 nanoseconds, about 292 years):
# the API server's CEL `duration()` refuses anything longer, and so does this parser,
# whose callers add durations to times (a longer one overflows datetime).
LONGEST_DURATION = timedelta(microseconds=(2**63 - 1) // 1000)


class DurationTooLong(ValueError):
    """A well-formed duration longer than `LONGEST_DURATION`, or than a field's maximum."""


def parse_duration(text: object) -> timedelta:
    """Parse a duration such as "5m", "90s" or "1h30m" (the units the XRDs allow).

    Raises ValueError for anything else, and its subclass DurationTooLong for a
    duration longer than LONGEST_DURATION (never OverflowError)."""
    if not isinstance(text, str) or not _DURATION.match(text):
        raise ValueError("not a duration such as 5m, 90s or 1h30m")
    seconds = sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))
    # Also false for the infinity a few hundred digits make.
    if not seconds <= LONGEST_DURATION.total_seconds():
        raise DurationTooLong(f"longer than {format_duration(LONGEST_DURATION)}")
    return timedelta(seconds=seconds)


# RFC 3339 section 5.6: full-date "T" full-time, where the "T" and "Z" may be
# lower case (section 5.6's note) and a space may stand for the "T". Seconds
# are 00-59: the API server (Go's time.Parse) rejects a leap second, and so
# does datetime.
_RFC3339 = re.compile(
    r"^(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})[Tt ]"
    r"(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2})(?:\.(?P<fraction>\d+))?"
    r"(?:(?P<utc>[Zz])|(?P<sign>[+-])(?P<off_hour>\d{2}):(?P<off_minute>\d{2}))$"
)


# Times any parsed duration may be added to or taken from without leaving what datetime
# holds (years 1-9999): a time read from the wire is only ever compared with, or moved
# by, such durations, so no arithmetic on it can overflow.
_EARLIEST = datetime.min.replace(tzinfo=UTC) + LONGEST_DURATION
_LATEST = datetime.max.replace(tzinfo=UTC) - LONGEST_DURATION
_READABLE_YEARS = f"the years {_EARLIEST.year + 1}-{_LATEST.year - 1}"


def parse_time(text: object) -> datetime:
    """Parse an RFC 3339 timestamp into an aware UTC datetime.

    The one time parser of the project: every time read from the wire
    (observedAt, scheduledAt, lastTransitionTime, expiresAt, annotations)
    goes through it. It accepts every spelling RFC 3339 allows - lower case
    "t" and "z", numeric offsets, any number of fractional digits (kept to
    the microsecond) - and raises ValueError for anything else, including a
    time without a zone: such a time cannot be compared across clocks, which
    is the whole point of observedAt and scheduledAt. A time so close to
    datetime's limits that a duration would move it past them is a ValueError
    too (_EARLIEST, _LATEST).
    """
    if not isinstance(text, str):
        raise ValueError("not an RFC 3339 time")
    match = _RFC3339.match(text)
    if match is None:
        raise ValueError("not an RFC 3339 time")
    part = {k: int(v) for k, v in match.groupdict().items() if v and v.isdigit()}
    offset = timedelta()
    if match["sign"]:
        if part["off_hour"] > 23 or part["off_minute"] > 59:
            raise ValueError("not an RFC 3339 time: the zone offset is out of range")
        offset = timedelta(hours=part["off_hour"], minutes=part["off_minute"])
        offset = -offset if match["sign"] == "-" else offset
    micro = int((match["fraction"] or "0")[:6].ljust(6, "0"))
    try:
        local = datetime(
            part["year"],
            part["month"],
            part["day"],
            part["hour"],
            part["minute"],
            part["second"],
            micro,
            tzinfo=timezone(offset),
        )
        utc = local.astimezone(UTC)
    except (ValueError, OverflowError) as err:
        raise ValueError(f"not an RFC 3339 time: {err}") from err
    if not _EARLIEST <= utc <= _LATEST:
        raise ValueError(f"not a time this project reads: outside {_READABLE_YEARS}")
    return utc


def parse_time_or_none(text: object) -> datetime | None:
    """parse_time, with None for anything that is not a time (a missing time is common)."""
    try:
        return parse_time(text)
    except ValueError:
        return None


def format_time(moment: datetime) -> str:
    """Format an aware datetime as RFC 3339 in UTC with a Z suffix, to the second."""
    return moment.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_placement_time(moment: datetime) -> str:
    """A placement time (`modelplane.ai/placed-at`) in UTC, to the microsecond.

    Whole seconds keep the second-precision form placed-at had before, so a
    stamp written then and read back formats to the same string (a verdict
    binds its placement's string, design/admission.md).
    """
    utc = moment.astimezone(UTC)
    if utc.microsecond == 0:
        return format_time(utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def format_duration(delta: timedelta) -> str:
    """A duration the way the XRDs spell them: 5m, 1m30s, 45s, 2h."""
    seconds = int(delta.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (seconds, "s")) if n]
    return "".join(parts) or "0s"
