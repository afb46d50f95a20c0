"""The publishing queue: whose status the publisher computes and writes, and when.

The shape of client-go's workqueue, kept pure: the shell marks observations
dirty (`mark`), asks the queue about each one in turn (`decide`), performs
the write it is handed, and reports how it went (`written`, `failed`, or
`release` when cancelled). The queue reads no clock: every time is an
argument, and it does no I/O.

Two sets and one book per observation:
- dirty: its status may differ from the one published (an event touched it,
  its freshness changed, someone else overwrote its status, or a write of it
  failed or was held back by the rate limit);
- processing: handed out by `decide`, its write not reported yet;
- the book: the status this process last wrote, when it last attempted and
  last completed a write, its failures in a row and when it may be tried
  again, and the `observedAt` it owes (a refresh, `require`).

Invariants:
1. An observation is never processed twice at once: `decide` hands out
   nothing for one in processing.
2. It leaves dirty when `decide` takes it, before its status is computed; a
   mark while it is processing puts it back, so a change that arrives while
   its write is awaited is processed again after that write (which carries
   the state from before the change).
3. Nothing is lost: an observation whose status could not be computed or
   written, whose change the rate limit held back, or whose processing was
   cancelled is dirty again.
4. After a failure it is held until its backoff has passed (`retry_at`); a
   Retry-After holds every observation until it has passed (`paused_until`).
5. `forget` drops the books of deleted observations, never of one being
   processed.

`decide` is the one place that says whether a write happens, in this order:
nothing while paused, being processed, or backing off; nothing while a kind
the report reads is being relisted, unless that relist failed and a last
status exists to republish frozen; then only if the observation is dirty, owes
a refresh its `observedAt` now reaches, or its heartbeat is due
(`writes.heartbeat_due`); and only then is the status computed, and written
if `writes.write_reason` gives a reason.

Units and clocks, as in `modelplane_agent.writes`: every interval (the rate
limit, the heartbeat, the backoff, a Retry-After) is seconds on the monotonic
clock (`mono`); `observed_at`, `vouches` and a refresh's time are the wall
clock, because they are published.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator, Mapping, Set
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from typing import Generic, TypeVar

from modelplane_agent.status import content
from modelplane_agent.writes import (
    Pacing,
    heartbeat_due,
    observed_at,
    retry_delay,
    vouched_at,
    write_reason,
)

K = TypeVar("K", bound=Hashable)

# Computes a status from the status it replaces (None: none yet) and whether every
# kind it reads is whole (False: republish `current` frozen). Pure over the state.
Compute = Callable[[Mapping | None, bool], dict]


@dataclass(frozen=True, slots=True)
class Limits:
    """How often one observation is written, in monotonic seconds: at most once per
    `min_interval`; after failures in a row, `min_interval` doubling to `backoff_max`;
    never sooner than a Retry-After, honoured up to `retry_after_max`."""

    min_interval: float
    backoff_max: float
    retry_after_max: float


@dataclass(frozen=True, slots=True)
class Probe:
    """One report as its snapshot is taken (nothing awaited since the shell read it)."""

    mono: float  # the monotonic clock now
    observed_at: datetime  # the observedAt the report would carry (wall clock)
    vouches: datetime  # the latest time it would vouch for: observed_at, or later
    heartbeat: float  # seconds between unchanged writes; math.inf for none
    seen: Mapping | None  # its status on the object, as last listed or watched
    whole: bool  # every kind the report reads is listed whole
    relist_failing: bool  # a kind it reads is unlisted and its list failed


@dataclass(frozen=True, slots=True)
class Write:
    """A write `decide` hands out: the observation is processing until it is reported."""

    status: dict
    reason: str  # "change", "heartbeat" or "refresh"
    previous: Mapping | None  # the status it replaces


@dataclass(slots=True)
class _Book:
    written: Mapping | None = None  # the status this process last wrote
    # `writes.vouched_at(written)`, parsed once: every pass asks it of every observation.
    written_vouches: datetime | None = None
    attempted: float | None = None  # mono: the last write handed out (the rate limit)
    completed: float | None = None  # mono: the last successful write (the heartbeat)
    failures: int = 0  # in a row
    retry_at: float = -math.inf  # mono
    newer_than: datetime | None = None  # wall: an observedAt it must publish (refresh)


_UNTOUCHED = _Book()  # read only: the book of an observation never written nor failed


class PublishQueue(Generic[K]):
    """The dirty and processing sets and each observation's book (module docstring)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._books: dict[K, _Book] = {}
        self._paused_until = -math.inf

    # ------------------------------------------------------------------ marks

    def mark(self, key: K) -> None:
        """Its status may have changed: decide on it again."""
        self._dirty.add(key)

    def overwritten(self, key: K, status: Mapping | None) -> None:
        """The status on the object is `status`: unless it says what this process
        last wrote (our own write coming back), it is written again."""
        book = self._books.get(key)
        mine = None if book is None else book.written
        if book is not None and mine is not None and content(status) != content(mine):
            book.written = None
            self._dirty.add(key)

    def require(self, key: K, at: datetime) -> None:
        """It must publish an `observedAt` no older than `at` (wall clock), soon
        rather than at its heartbeat."""
        book = self._book(key)
        book.newer_than = at if book.newer_than is None else max(book.newer_than, at)

    def forget(self, known: Set[K]) -> None:
        """Drop what is kept of every observation not in `known` (deleted), except
        those being processed."""
        for key in (self._dirty | self._books.keys()) - known - self._processing:
            self._books.pop(key, None)
            self._dirty.discard(key)

    # ------------------------------------------------------------------ queries

    def current(self, key: K, seen: Mapping | None) -> Mapping | None:
        """The status last written by this process, else `seen` on the object."""
        book = self._books.get(key)
        return book.written if book is not None and book.written is not None else seen

    def pending(self) -> Iterator[K]:
        """Every observation whose last change may not be published yet: dirty,
        being processed, or failing (one may be listed more than once)."""
        failing = (key for key, book in self._books.items() if book.failures)
        return chain(self._dirty, self._processing, failing)

    # ------------------------------------------------------------------ the decision

    def decide(self, key: K, probe: Probe, compute: Compute) -> Write | None:
        """The write to make now for `key`, or None (the module docstring's order).

        A write handed out leaves `key` processing until `written`, `failed` or
        `release`; `compute` raising releases it (dirty again) and propagates.
        """
        book = self._books.get(key, _UNTOUCHED)
        if key in self._processing or probe.mono < max(self._paused_until, book.retry_at):
            return None
        current = self.current(key, probe.seen)
        if not probe.whole and (current is None or not probe.relist_failing):
            return None  # a relist under way: wait for it (still dirty)
        if not self._due(key, book, probe, current):
            return None
        self._dirty.discard(key)
        self._processing.add(key)
        try:
            new = compute(current, probe.whole)
        except BaseException:
            self.release(key)
            raise
        reason = write_reason(
            new,
            current,
            since_attempt=_since(book.attempted, probe.mono),
            written_age=_since(book.completed, probe.mono),
            pacing=Pacing(self.limits.min_interval, probe.heartbeat),
            newer_than=book.newer_than,
        )
        if reason is None:
            self._processing.discard(key)
            self._hold(key, new, current)
            return None
        self._book(key).attempted = probe.mono
        return Write(new, reason, current)

    def _due(self, key: K, book: _Book, probe: Probe, current: Mapping | None) -> bool:
        """Whether `key`'s status is worth computing: dirty, a refresh its
        `observedAt` now reaches (never while frozen short of it), or a heartbeat."""
        if key in self._dirty:
            return True
        if book.newer_than is not None and probe.observed_at >= book.newer_than:
            return True
        written_age = _since(book.completed, probe.mono)
        current_at = book.written_vouches if book.written is not None else vouched_at(current)
        return heartbeat_due(probe.vouches, current_at, written_age, probe.heartbeat)

    def _hold(self, key: K, new: Mapping, current: Mapping | None) -> None:
        """No write now: a change waits for the rate limit (dirty again); a refresh
        the published status already satisfies is done."""
        book = self._books.get(key, _UNTOUCHED)
        if content(new) != content(current):
            self._dirty.add(key)
        elif book.newer_than is not None:
            published = observed_at(current)
            if published is not None and published >= book.newer_than:
                book.newer_than = None

    # ------------------------------------------------------------------ outcomes

    def written(self, key: K, status: Mapping, mono: float, at: datetime) -> None:
        """The write of `status`, computed at `at` (wall), succeeded at `mono`."""
        self._processing.discard(key)
        book = self._book(key)
        book.written, book.completed = status, mono
        book.written_vouches = vouched_at(status)
        book.failures, book.retry_at = 0, -math.inf
        published = observed_at(status) or at
        if book.newer_than is not None and book.newer_than <= published:
            book.newer_than = None  # done only by an observedAt that reaches it

    def failed(self, key: K, mono: float, jitter: float, retry_after: float | None) -> float:
        """Computing or writing `key`'s status failed at `mono`; returns the seconds
        before it is tried again. `jitter` is uniform in [0, 1); `retry_after` the
        seconds the API server asked for, which hold every observation."""
        self._processing.discard(key)
        self._dirty.add(key)
        book = self._book(key)
        book.failures += 1
        limits = self.limits
        delay = retry_delay(
            book.failures,
            jitter,
            retry_after,
            initial=limits.min_interval,
            backoff_max=limits.backoff_max,
            retry_after_max=limits.retry_after_max,
        )
        book.retry_at = mono + delay
        if retry_after is not None:
            held = mono + min(retry_after, limits.retry_after_max)
            self._paused_until = max(self._paused_until, held)
        return delay

    def release(self, key: K) -> None:
        """Processing of `key` ended without an outcome (cancelled): dirty again."""
        if key in self._processing:
            self._processing.discard(key)
            self._dirty.add(key)

    def _book(self, key: K) -> _Book:
        book = self._books.get(key)
        if book is None:
            book = self._books[key] = _Book()
        return book


def _since(at: float | None, mono: float) -> float | None:
    return None if at is None else mono - at
