"""The render tests' time tokens: what each stands for, and how it is filled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from modelplane_devtools.render import fill_time_tokens, token_offset

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

OFFSETS = {
    "__NOW__ is the clock": ("__NOW__", timedelta()),
    "__NOW-<duration>__ is before it": ("__NOW-1m30s__", -timedelta(minutes=1, seconds=30)),
    "__NOW+<duration>__ is after it": ("__NOW+30m__", timedelta(minutes=30)),
    "a time is no token": ("2026-12-01T12:00:00Z", None),
    "a token inside other text is no whole token": ("at __NOW__", None),
    "not text: no token": (None, None),
}  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), OFFSETS.values(), ids=OFFSETS.keys())
def test_token_offset(text, expected):
    assert token_offset(text) == expected


def test_every_token_in_a_text_is_filled_with_the_clock_and_its_offset():
    text = "a: __NOW-1h__\nb: __NOW__\nc: __NOW+30m__\n"
    assert fill_time_tokens(text, NOW) == (
        "a: 2026-12-01T11:00:00Z\nb: 2026-12-01T12:00:00Z\nc: 2026-12-01T12:30:00Z\n"
    )
