from datetime import UTC, datetime, timedelta

import pytest
from modelplane_common.timeutil import (
    DurationTooLong,
    format_duration,
    format_placement_time,
    format_time,
    parse_duration,
    parse_time,
)


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


@pytest.mark.parametrize(
    "text",
    ["2562048h", "99999999999h", "9" * 400 + "h"],
    ids=["an hour past what Go holds", "99999999999h", "four hundred digits"],
)
def test_durations_longer_than_go_holds_are_value_errors_not_overflows(text):
    with pytest.raises(DurationTooLong, match="longer than 2562047h47m16s"):
        parse_duration(text)


def test_the_longest_go_duration_still_parses():
    assert parse_duration("2562047h") == timedelta(hours=2562047)


@pytest.mark.parametrize(
    "text",
    ["9999-12-31T23:59:59Z", "9708-01-01T00:00:00Z", "0001-01-01T00:00:00Z"],
    ids=["the last second datetime holds", "year 9708", "the first second datetime holds"],
)
def test_times_a_duration_could_move_past_datetimes_range_are_value_errors(text):
    with pytest.raises(ValueError, match="outside the years 294-9706"):
        parse_time(text)


def test_times_normalise_to_utc_and_round_trip():
    parsed = parse_time("2026-11-29T13:00:00+01:00")
    assert parsed == datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    assert format_time(parsed) == "2026-11-29T12:00:00Z"


NINE = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)

RFC3339 = {
    "upper case T and Z": ("2026-01-01T09:00:00Z", NINE),
    "lower case t and z": ("2026-01-01t09:00:00z", NINE),
    "a space for the T": ("2026-01-01 09:00:00Z", NINE),
    "a positive offset": ("2026-01-01T10:30:00+01:30", NINE),
    "a negative offset": ("2026-01-01T04:00:00-05:00", NINE),
    "a zero offset": ("2026-01-01T09:00:00+00:00", NINE),
    "milliseconds": ("2026-01-01T09:00:00.250Z", NINE.replace(microsecond=250000)),
    "nanoseconds kept to the microsecond": (
        "2026-01-01T09:00:00.123456789Z",
        NINE.replace(microsecond=123456),
    ),
    "one fractional digit with lower case z": (
        "2026-01-01t09:00:00.5z",
        NINE.replace(microsecond=500000),
    ),
    "an offset that crosses a year": ("2025-12-31T23:00:00-10:00", NINE),
}


@pytest.mark.parametrize(("text", "moment"), RFC3339.values(), ids=RFC3339.keys())
def test_every_rfc3339_spelling_parses(text, moment):
    assert parse_time(text) == moment


NOT_RFC3339 = {
    "no zone": "2026-01-01T09:00:00",
    "a date alone": "2026-01-01",
    "a time alone": "09:00:00Z",
    "month 13": "2026-13-01T09:00:00Z",
    "hour 25": "2026-01-01T25:00:00Z",
    "a leap second, which the API server rejects too": "2026-12-31T23:59:60Z",
    "an offset of 24 hours": "2026-01-01T09:00:00+24:00",
    "an offset without a colon": "2026-01-01T09:00:00+0100",
    "a fraction without digits": "2026-01-01T09:00:00.Z",
    "words": "yesterday",
    "a number": 1767258000,
    "null": None,
    "the first moment, out of range once moved to UTC": "0001-01-01T00:00:00+01:00",
}


@pytest.mark.parametrize("text", NOT_RFC3339.values(), ids=NOT_RFC3339.keys())
def test_anything_else_is_a_value_error_naming_rfc3339(text):
    with pytest.raises(ValueError, match="not an RFC 3339 time"):
        parse_time(text)


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(minutes=5), "5m"),
        (timedelta(minutes=1, seconds=30), "1m30s"),
        (timedelta(hours=2), "2h"),
        (timedelta(), "0s"),
    ],
    ids=["minutes", "minutes and seconds", "hours", "zero"],
)
def test_durations_format_like_the_xrds(delta, text):
    assert format_duration(delta) == text


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        pytest.param(
            datetime(2026, 12, 1, 15, 0, 0, 250000, tzinfo=UTC),
            "2026-12-01T15:00:00.250000Z",
            id="a placement is stamped to the microsecond",
        ),
        pytest.param(
            datetime(2026, 12, 1, 15, 0, 0, tzinfo=UTC),
            "2026-12-01T15:00:00Z",
            id="a whole second keeps the second-precision form stamps had before",
        ),
    ],
)
def test_placement_times_round_trip_to_the_same_string(moment, text):
    assert format_placement_time(moment) == text
    assert format_placement_time(parse_time(text)) == text
