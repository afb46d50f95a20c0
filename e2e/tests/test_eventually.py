"""`e2e.kube.eventually`: what it returns, what it waits through, and how it fails."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from modelplane_e2e.kube import KubectlFailed, NotYet, eventually


class NotServed(Exception):
    pass


def answers(*steps: object) -> Callable[[], object]:
    """A probe answering each step in turn (an exception step is raised), the last one forever."""
    sequence: Iterator[object] = iter(steps)
    last: list[object] = []

    def probe() -> object:
        step = next(sequence, last[0] if last else None)
        last[:] = [step]
        if isinstance(step, BaseException):
            raise step
        return step

    return probe


@pytest.mark.parametrize(
    ("steps", "not_yet", "returned"),
    [
        pytest.param(("done",), (), "done", id="the first truthy answer is returned"),
        pytest.param((None, 0, [], {"a": 1}), (), {"a": 1}, id="falsy answers mean not yet"),
        pytest.param(
            (AssertionError("saw 1"), KubectlFailed("not found"), 7),
            (),
            7,
            id="an assertion or a failed kubectl means not yet",
        ),
        pytest.param(
            (NotServed("404"), True), (NotServed,), True, id="a not_yet exception means not yet"
        ),
    ],
)
def test_returns_once_the_probe_holds(steps, not_yet, returned):
    assert eventually(answers(*steps), "x", timeout=5, every=0, not_yet=not_yet) == returned


@pytest.mark.parametrize(
    ("steps", "says"),
    [
        pytest.param((False,), "x: not within 0.05s; last seen: probe returned False", id="falsy"),
        pytest.param(
            (AssertionError("the agent reports 3"),),
            "x: not within 0.05s; last seen: the agent reports 3",
            id="the last assertion explains the failure",
        ),
    ],
)
def test_fails_saying_what_was_last_seen(steps, says):
    with pytest.raises(NotYet) as failure:
        eventually(answers(*steps), "x", timeout=0.05, every=0.01)
    assert str(failure.value) == says


def test_an_exception_not_named_not_yet_escapes_at_once():
    with pytest.raises(NotServed):
        eventually(answers(NotServed("boom"), True), "x", timeout=5, every=0)
