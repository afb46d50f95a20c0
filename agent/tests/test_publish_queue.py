"""The publishing queue's invariants, as sequences of what the shell tells it and asks it.

Each case plays steps against a fresh queue (min interval 2 s, backoff to 60 s, a
Retry-After honoured up to 300 s, jitter 0.5 so that every backoff is its nominal
delay) and checks what each `decide` said and what is left pending. A decision reads
None (nothing computed), "held" (computed, not written), "raised" (computing it
raised) or the reason of the write handed out. Monotonic seconds and the wall clock
move together: `observedAt` is NOW plus the step's `at`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from modelplane_agent.publish_queue import Limits, Probe, PublishQueue, Write

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
A, B = "a", "b"


def status(nodes: int, at: float = 0.0) -> dict:
    """A status whose content is `nodes`, observed `at` seconds after NOW."""
    observed = (NOW + timedelta(seconds=at)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"observedAt": observed, "observedNodes": nodes}


@dataclass(frozen=True)
class Mark:
    key: str = A


@dataclass(frozen=True)
class Decide:
    key: str = A
    at: float = 0.0  # monotonic seconds, and the observedAt's offset from NOW
    nodes: int = 1  # the content of the status computed
    seen: int | None = None  # the content of the status on the object, observed at 0
    heartbeat: float = 60.0
    whole: bool = True
    relist_failing: bool = False
    raises: bool = False


@dataclass(frozen=True)
class Written:
    key: str = A
    at: float = 0.0


@dataclass(frozen=True)
class Failed:
    key: str = A
    at: float = 0.0
    retry_after: float | None = None


@dataclass(frozen=True)
class Release:
    key: str = A


@dataclass(frozen=True)
class Forget:
    known: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Require:
    key: str = A
    at: float = 0.0  # the observedAt owed, seconds after NOW


@dataclass(frozen=True)
class Overwritten:
    key: str = A
    nodes: int = 1


Step = Mark | Decide | Written | Failed | Release | Forget | Require | Overwritten


def play(steps: list[Step]) -> tuple[list[str | None], set[str]]:
    queue: PublishQueue[str] = PublishQueue(Limits(2.0, 60.0, 300.0))
    decisions: list[str | None] = []
    handed: dict[str, Write] = {}
    for step in steps:
        match step:
            case Decide():
                decisions.append(_decide(queue, step, handed))
            case Mark(key):
                queue.mark(key)
            case Written(key, at):
                queue.written(key, handed[key].status, at, NOW + timedelta(seconds=at))
            case Failed(key, at, retry_after):
                queue.failed(key, at, 0.5, retry_after)
            case Release(key):
                queue.release(key)
            case Forget(known):
                queue.forget(known)
            case Require(key, at):
                queue.require(key, NOW + timedelta(seconds=at))
            case Overwritten(key, nodes):
                queue.overwritten(key, status(nodes))
    return decisions, set(queue.pending())


def _decide(queue: PublishQueue[str], step: Decide, handed: dict[str, Write]) -> str | None:
    computed: list[bool] = []

    def compute(current: Mapping | None, whole: bool) -> dict:
        computed.append(True)
        if step.raises:
            raise RuntimeError("a bug in the rules")
        if not whole:  # republished frozen: the last content, saying it is not current
            return {**(current or {}), "frozen": True}
        return status(step.nodes, step.at)

    probe = Probe(
        mono=step.at,
        observed_at=NOW + timedelta(seconds=step.at),
        vouches=NOW + timedelta(seconds=step.at),
        heartbeat=step.heartbeat,
        seen=None if step.seen is None else status(step.seen),
        whole=step.whole,
        relist_failing=step.relist_failing,
    )
    try:
        write = queue.decide(step.key, probe, compute)
    except RuntimeError:
        return "raised"
    if write is None:
        return "held" if computed else None
    handed[step.key] = write
    return write.reason


NONE: set[str] = set()
# name: (steps, what each decide said, what is left pending)
CASES: dict[str, tuple[list[Step], list[str | None], set[str]]] = {
    "an observation marked dirty is computed and written as a change": (
        [Mark(), Decide()],
        ["change"],
        {A},
    ),
    "an observation never written nor seen is written though never marked": (
        [Decide()],
        ["change"],
        {A},
    ),
    "an observation being processed is not handed out again, however dirty": (
        [Mark(), Decide(), Mark(), Decide(at=5, nodes=2)],
        ["change", None],
        {A},
    ),
    "a mark while processing is processed again after the write": (
        [Mark(), Decide(), Mark(), Written(), Decide(at=3, nodes=2)],
        ["change", "change"],
        {A},
    ),
    "a written observation is no longer pending": (
        [Mark(), Decide(), Written()],
        ["change"],
        NONE,
    ),
    "an unchanged observation is left alone before its heartbeat": (
        [Decide(), Written(), Decide(at=30)],
        ["change", None],
        NONE,
    ),
    "an unchanged observation is written again once its heartbeat is due": (
        [Decide(), Written(), Decide(at=61)],
        ["change", "heartbeat"],
        {A},
    ),
    "an observation without a heartbeat is never rewritten unchanged": (
        [Decide(heartbeat=math.inf), Written(), Decide(at=600, heartbeat=math.inf)],
        ["change", None],
        NONE,
    ),
    "a status only seen on the object is aged by its observedAt": (
        [Decide(at=59, seen=1), Decide(at=60, seen=1)],
        [None, "heartbeat"],
        {A},
    ),
    "a change within the min interval is held and stays dirty until it has passed": (
        [Decide(), Written(), Mark(), Decide(at=1, nodes=2), Decide(at=2, nodes=2)],
        ["change", "held", "change"],
        {A},
    ),
    "the min interval counts from the attempt, not from a slow write's success": (
        [Decide(), Written(at=1.5), Mark(), Decide(at=2, nodes=2)],
        ["change", "change"],
        {A},
    ),
    "the heartbeat counts from the last success": (
        [Decide(), Written(at=10), Decide(at=61), Decide(at=70)],
        ["change", None, "heartbeat"],
        {A},
    ),
    "a failed write is tried again only after its backoff": (
        [Decide(), Failed(), Decide(at=1.9), Decide(at=2)],
        ["change", None, "change"],
        {A},
    ),
    "each failure in a row doubles the backoff": (
        [Decide(), Failed(), Decide(at=2), Failed(at=2), Decide(at=5.9), Decide(at=6)],
        ["change", "change", None, "change"],
        {A},
    ),
    "a failing observation stays pending until a write of it succeeds": (
        [Decide(), Failed(), Decide(at=2), Failed(at=2), Decide(at=6), Written(at=6)],
        ["change", "change", "change"],
        NONE,
    ),
    "a success resets the backoff": (
        [
            *(Decide(), Failed(), Decide(at=2), Written(at=2)),
            *(Mark(), Decide(at=4, nodes=2), Failed(at=4), Decide(at=6, nodes=2)),
        ],
        ["change", "change", "change", "change"],
        {A},
    ),
    "one observation's backoff does not hold another": (
        [Decide(), Failed(), Decide(B, at=1)],
        ["change", "change"],
        {A, B},
    ),
    "a Retry-After holds every observation, not only the one refused": (
        [Decide(), Failed(retry_after=7), Decide(B, at=6.9), Decide(B, at=7)],
        ["change", None, "change"],
        {A, B},
    ),
    "a Retry-After beyond its cap holds only up to the cap": (
        [Decide(), Failed(retry_after=3600), Decide(B, at=299), Decide(B, at=300)],
        ["change", None, "change"],
        {A, B},
    ),
    "a status whose computation raised is dirty again and not processing": (
        [Mark(), Decide(raises=True), Decide()],
        ["raised", "change"],
        {A},
    ),
    "a released observation (its write cancelled) is dirty and handed out again": (
        [Mark(), Decide(), Release(), Decide(at=2)],
        ["change", "change"],
        {A},
    ),
    "a relist under way holds a dirty observation without computing it": (
        [Mark(), Decide(whole=False)],
        [None],
        {A},
    ),
    "a failed relist republishes the last status, frozen": (
        [Mark(), Decide(seen=1, whole=False, relist_failing=True)],
        ["change"],
        {A},
    ),
    "a failed relist with no last status to republish holds the observation": (
        [Mark(), Decide(whole=False, relist_failing=True)],
        [None],
        {A},
    ),
    "a refresh waits for an observedAt that reaches the time owed": (
        [Decide(), Written(), Require(at=5), Decide(at=3), Decide(at=5)],
        ["change", None, "refresh"],
        {A},
    ),
    "a refresh is owed no more once written": (
        [Decide(), Written(), Require(at=5), Decide(at=5), Written(at=5), Decide(at=8)],
        ["change", "refresh", None],
        NONE,
    ),
    "a refresh the published status already satisfies is dropped after one look": (
        [Decide(at=2), Written(at=2), Require(at=1), Decide(at=4), Decide(at=5)],
        ["change", "held", None],
        NONE,
    ),
    "forget drops a deleted observation's marks": (
        [Mark(), Forget(), Decide(seen=1)],
        [None],
        NONE,
    ),
    "forget drops a deleted observation's backoff": (
        [Decide(), Failed(), Forget(), Decide()],
        ["change", "change"],
        {A},
    ),
    "forget keeps what an observation being processed is owed": (
        [Decide(), Mark(), Forget(), Written(), Decide(at=2, nodes=2)],
        ["change", "change"],
        {A},
    ),
    "forget keeps the observations still known": (
        [Mark(), Mark(B), Forget(frozenset({B})), Decide(B, seen=1)],
        ["held"],
        NONE,
    ),
    "our own write coming back through the watch is not news": (
        [Decide(), Written(), Overwritten(nodes=1), Decide(at=2)],
        ["change", None],
        NONE,
    ),
    "a status someone else overwrote is written again": (
        [Decide(), Written(), Overwritten(nodes=3), Decide(at=2, seen=3)],
        ["change", "change"],
        {A},
    ),
}


@pytest.mark.parametrize(("steps", "decisions", "pending"), CASES.values(), ids=CASES)
def test_publish_queue(steps, decisions, pending):
    assert play(steps) == (decisions, pending)
