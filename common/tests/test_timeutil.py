from datetime import UTC, datetime, timedelta

import pytest
from modelplane_common.timeutil import format_time, parse_duration, parse_time


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5m", timedelta(minutes=5)),
        ("90s", timedelta(seconds=90)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("250ms", timedelta(milliseconds=250)),
    ],
    ids=["minutes", "seconds", "hours and minutes", "milliseconds"],
)
def test_durations_parse_like_go(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "5", "5 m", "-5m", "five minutes"])
def test_malformed_durations_are_errors(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_times_normalise_to_utc_and_round_trip():
    parsed = parse_time("2026-11-29T13:00:00+01:00")
    assert parsed == datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    assert format_time(parsed) == "2026-11-29T12:00:00Z"
