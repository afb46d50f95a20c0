"""The shell: list-watch every kind, keep `ClusterState` current, publish what changed.

One asyncio task per kind lists (paged), replaces that kind in the state in
one step, then watches from the list's resourceVersion. A watch that breaks
resumes from the last resourceVersion it delivered, after an exponential
backoff with jitter (never sooner than a Retry-After); a 410 Gone (that
version is compacted away), or an event the state could not apply, relists,
and the relist deletes from the state whatever is gone. Each event asks the
state which observations it touches and marks only those dirty. A kind the
API server may not serve (`OPTIONAL`: DeviceTaintRules) is discovered before
each of its lists: not served, it is not watched, holds nothing, counts as
listed and holds no report's freshness back, and is looked for again every
`idle` seconds; any failure of its watch discovers it again. Discovery also
says which version to read (DeviceTaintRules: v1, else v1beta2, else v1alpha3).

The publisher wakes every `tick` and, once every kind has been listed,
offers each observation to its publishing queue (`modelplane_agent.publish_queue`:
dirty and processing sets, and the one place that decides whether a write
happens, by the rules of `modelplane_agent.writes`): replicas first, then pools.
Each report is computed from kinds not being relisted and stamped with the
moment its own snapshot is taken, never the pass's start, since the watches
apply events while earlier writes of the pass are awaited; its `observedAt`
is bounded by what is known current (`modelplane_agent.freshness`). A status
is written through the status subresource when its content differs from the
last status written or seen, when a pool's heartbeat is due, or when a pool
must refresh its `observedAt` for a replica that turned scheduled; never twice
per observation within `min_interval` (monotonic). A replica's report has no
heartbeat: it is written when it changes, and every pool's heartbeat carries
`replicasCurrentAt`, the start of the last pass after which every replica
report was written and the kinds they read were current (`_replicas_current`).
That one time keeps every unchanged replica report fresh on the control plane
(design/agent.md, "Replica currency"). An observation deleted during
a pass is dropped from it; one whose status fails (computed or written) is
logged, counted and retried after a jittered exponential backoff of its own;
a Retry-After holds every write until it has passed.

`run` supervises the tasks: one that ends unexpectedly is logged and
restarted. Liveness (`alive`) is progress: a pass, or one observation of a
pass, finished recently. Stopping (SIGTERM) cancels the watches and the
publisher and closes the client; nothing is left half-written, since each
write is one request.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import math
import random
import time
import zlib
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from modelplane_common.currency import REPLICAS_CURRENT_AT
from modelplane_common.inputs import DEFAULT_MAX_AGE
from modelplane_common.labels import AGENT_API_VERSION
from modelplane_common.outcome import Condition
from modelplane_common.timeutil import format_duration, format_time

from modelplane_agent import metrics
from modelplane_agent.freshness import Currency, Freshness, freshness, frozen, with_freshness
from modelplane_agent.kube import (
    Api,
    Gone,
    Idle,
    describe,
    kind_name,
    retry_after,
    served_versions,
)
from modelplane_agent.publish_queue import Limits, Probe, PublishQueue, Write
from modelplane_agent.snapshot import PoolSpec
from modelplane_agent.state import (
    CLAIMS,
    CLASSES,
    KINDS,
    NODES,
    PODS,
    POOLS,
    REPLICAS,
    RULES,
    SLICES,
    ClusterState,
    ReplicaKey,
    Touched,
)
from modelplane_agent.status import (
    pool_status,
    replica_status,
    transition_time,
    warning,
)

log = logging.getLogger("modelplane_agent")

# An observation, as the publisher keys it: a pool's name, or a replica's (namespace, name).
Key = tuple[str, str, str]  # (kind, namespace, name)


# A report older than the cluster's maxAge is stale (design/observation.md). A pool's
# heartbeat rewrites its unchanged report's observedAt, and the replicasCurrentAt that
# keeps every unchanged replica report fresh, at maxAge/5: well inside maxAge, and
# pools are few. Replica reports, which are many, have no heartbeat of their own.
POOL_HEARTBEAT_SHARE = 0.2
# Each observation heartbeats at its own fraction of that, between 75% and 100%, fixed
# by its name: observations written together at start do not all come due in one tick.
HEARTBEAT_SPREAD = 0.25
# The least maxAge heartbeats are derived from: below it they would come due at about
# every write the rate limit allows (min_interval), for every observation.
MIN_MAX_AGE = timedelta(seconds=10)


@dataclass(frozen=True, slots=True)
class Settings:
    min_interval: timedelta = timedelta(seconds=2)
    # `--max-age`: overrides the maxAge the PoolObservations declare (None: follow them).
    max_age: timedelta | None = None
    tick: float = 0.5  # seconds between publisher passes
    # The API server's watch cache sends a bookmark about every 60 s, once the kind
    # has had an event since it started. A stream silent for `idle` seconds is
    # relisted (a list proves the kind current); a kind not heard from for
    # `silence` seconds is not current (design/agent.md, "Freshness").
    idle: float = 75.0
    silence: float = 90.0
    # A watch just started is taken to have delivered what happened since its version
    # (the API server sends that backlog first, from its watch cache) after `catch_up`
    # seconds; until then its kind is current only as of its list (freshness.Currency).
    catch_up: float = 1.0
    backoff_initial: float = 0.5  # watch and task restarts
    backoff_max: float = 30.0
    write_backoff_max: float = 60.0  # a failed write: min_interval doubling to this
    retry_after_max: float = 300.0  # the longest Retry-After honoured


def heartbeat_age(pools: Iterable[PoolSpec], override: timedelta | None) -> timedelta:
    """The maxAge every heartbeat is derived from: `--max-age` when given, else the
    smallest `spec.maxAge` of the PoolObservations watched (each carries its
    InferenceCluster's `spec.observation.maxAge`; a workload cluster several
    InferenceClusters point at must stay fresh for the strictest), else the
    InferenceCluster's default; never below MIN_MAX_AGE.

    ReplicaObservations carry no maxAge: the pools' is the cluster's, and so theirs.
    """
    declared = [p.max_age for p in pools if p.max_age is not None]
    age = override if override is not None else min(declared, default=DEFAULT_MAX_AGE)
    return max(age, MIN_MAX_AGE)


def heartbeat(key: Key, max_age: timedelta) -> timedelta | None:
    """How old this observation's times of currency may grow before it is rewritten;
    None for a replica's report, which is rewritten only when it changes."""
    if key[0] != POOLS:
        return None
    spread = zlib.crc32("/".join(key).encode()) / 2**32  # stable, in [0, 1)
    return max_age * POOL_HEARTBEAT_SHARE * (1 - HEARTBEAT_SPREAD * spread)


_KIND_NAMES = {POOLS: "PoolObservation", REPLICAS: "ReplicaObservation"}

# Kinds watched only where the API server serves them (discovered before each list):
# DeviceTaintRules exist only as resource.k8s.io/v1alpha3, behind an alpha gate.
OPTIONAL = frozenset({RULES})

# The kinds each kind of report reads, so the kinds whose freshness bounds its
# observedAt. A pool reads pods too: the pods bound to its nodes (the requests
# that use up a node, the replicas it is refreshed for). A replica reads claims:
# a bound pod counts as scheduled only once every claim it references is seen
# allocated.
REPORT_INPUTS = {
    POOLS: (NODES, PODS, SLICES, CLAIMS, CLASSES, POOLS, RULES),
    REPLICAS: (PODS, CLAIMS, REPLICAS),
}


def bound_logger(kind: str, namespace: str, name: str) -> logging.LoggerAdapter:
    """A logger whose every line names the observation it is about."""
    kind = _KIND_NAMES.get(kind, kind)
    resource = f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"
    return logging.LoggerAdapter(log, {"resource": resource})


class Unapplied(Exception):
    """A watch event the state could not apply: its kind is relisted."""


class Controller:
    def __init__(
        self,
        api: Api,
        clock: Callable[[], datetime],
        settings: Settings = Settings(),
        state: ClusterState | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        """`clock`: the wall clock (`observedAt`, transition times); `monotonic`: the
        clock of every interval; `jitter`: uniform in [0, 1), spreads retries."""
        self.api = api
        self.clock = clock
        self.monotonic = monotonic
        self.jitter = jitter
        self.settings = settings
        self.state = state or ClusterState()
        self.synced: dict[str, bool] = dict.fromkeys(KINDS, False)
        self.listed_once = False  # every kind listed at least once: reports can be computed
        self.currency: dict[str, Currency] = {kind: Currency() for kind in KINDS}
        # The group/version each optional kind is served in, as discovery last said.
        self.served_as: dict[str, str] = {}
        # What each kind of report last said of its freshness: a change rewrites them all.
        self.freshness_said: dict[str, Condition] = {}
        self.heartbeat_age_said: timedelta | None = None  # the last one logged
        # Which observation is written when: dirty and processing sets, each one's
        # rate limit, heartbeat, backoff and owed refresh, and a Retry-After's hold.
        self.queue: PublishQueue[Key] = PublishQueue(
            Limits(
                settings.min_interval.total_seconds(),
                settings.write_backoff_max,
                settings.retry_after_max,
            )
        )
        # The pools' replicasCurrentAt: the start of the last pass that left every replica
        # report written from a current view (`_replicas_current`); None until one has.
        self.replicas_current_at: datetime | None = None
        self.last_progress = monotonic()
        self.passes = 0  # publisher passes finished
        self._stopping = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle

    @property
    def ready(self) -> bool:
        return all(self.synced.values())

    def alive(self, allowance: float) -> bool:
        """Whether the publisher made progress within `allowance` seconds: it finished
        a pass, or one observation of a pass (a long pass on a slow API server is
        progress; a write that hangs, or a publisher that died, is not)."""
        return self.monotonic() - self.last_progress <= allowance

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        """Watch and publish until `stop()`; then cancel everything and return.

        A task that ends while the agent is not stopping (an exception no handler
        caught, which is a bug) is logged with its traceback, counted in
        `modelplane_agent_task_restarts_total` and started again after a backoff:
        a dead publisher must never leave a live process that writes nothing.
        """
        factories: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {
            f"watch-{kind}": functools.partial(self._watch, kind) for kind in KINDS
        }
        factories["publish"] = self._publish_forever
        tasks: dict[asyncio.Task, str] = {
            asyncio.create_task(start(), name=name): name for name, start in factories.items()
        }
        stopping: asyncio.Task = asyncio.create_task(self._stopping.wait(), name="stopping")
        restarts = dict.fromkeys(factories, 0)
        while not self._stopping.is_set():
            done, _ = await asyncio.wait({*tasks, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if self._stopping.is_set():
                break  # tasks that end now are ending because of it
            for task in done:
                name = tasks.pop(task)
                delay = self._restart_delay(restarts[name])
                restarts[name] += 1
                _log_ended(task, delay)
                metrics.TASK_RESTARTS.labels(name).inc()
                restarted = _after(delay, factories[name])
                tasks[asyncio.create_task(restarted, name=name)] = name
        log.info("stopping", extra={"resource": "-"})
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, stopping, return_exceptions=True)

    def _restart_delay(self, restarts: int) -> float:
        return min(self.settings.backoff_max, self.settings.backoff_initial * 2**restarts)

    # ------------------------------------------------------------------ watches

    async def _watch(self, kind: str) -> None:
        """Keep `kind` folded into the state: list, then watch from the list's version;
        a watch that must restart relists (`_restarting`), one that fails resumes after
        a doubling backoff (`_watch_failed`)."""
        backoff = self.settings.backoff_initial
        version: str | None = None
        while not self._stopping.is_set():
            try:
                if version is None:
                    version = await self._start_listing(kind)
                    if version is None:
                        continue
                self.currency[kind].watching(self.monotonic(), self.settings.catch_up)
                async for event, obj in self.api.watch(kind, version):
                    version = _resource_version(obj) or version
                    self._on_watch_event(kind, event, obj)
                    backoff = self.settings.backoff_initial
            except asyncio.CancelledError:
                raise
            except (Idle, Gone, Unapplied) as restart:
                self._restarting(kind, restart)
                version = None
            except Exception as error:  # network, API server restarts, 403, 5xx ...
                delay = self._watch_failed(kind, error, backoff)
                if kind in OPTIONAL:
                    version = None  # it may have stopped being served: discover it again
                await asyncio.sleep(delay)
                backoff = min(backoff * 2, self.settings.backoff_max)

    async def _start_listing(self, kind: str) -> str | None:
        """Relist `kind` and return the list's version; None (after waiting `idle`) for
        an optional kind the API server does not serve."""
        if kind in OPTIONAL and not await self._discovered(kind):
            await asyncio.sleep(self.settings.idle)  # then look again
            return None
        return await self._relist(kind)

    def _on_watch_event(self, kind: str, event: str, obj: Mapping) -> None:
        """Fold one watch event (or bookmark) into the state."""
        if event in ("ADDED", "MODIFIED", "DELETED"):
            metrics.EVENTS.labels(kind, event).inc()
            started = time.perf_counter()
            self._mark(kind, self._apply(kind, event, obj), [obj])
            metrics.RECOMPUTE.labels("event").observe(time.perf_counter() - started)
        # An event, or a BOOKMARK (only its version matters): current up to now.
        self.currency[kind].heard(self.clock(), self.monotonic())

    def _restarting(self, kind: str, restart: Idle | Gone | Unapplied) -> None:
        """Count and log why `kind`'s watch restarts from a relist."""
        if isinstance(restart, Idle):
            # No event nor bookmark for that long: the stream may be half-open, or
            # the server sends no bookmarks. A list proves the kind current again.
            metrics.WATCH_RESTARTS.labels(kind, "silent").inc()
            log.info("%s watch silent (%s): relisting", kind, restart, extra={"resource": "-"})
        elif isinstance(restart, Gone):
            metrics.WATCH_RESTARTS.labels(kind, "gone").inc()
            log.info("%s watch expired (410 Gone): relisting", kind, extra={"resource": "-"})
        else:
            # Its resourceVersion is already behind us: resuming would skip it for
            # good. A relist folds the object as it is now.
            metrics.WATCH_RESTARTS.labels(kind, "unapplied").inc()
            log.error(
                "%s watch event not applied (%s): relisting",
                kind,
                restart,
                exc_info=restart.__cause__,
                extra={"resource": "-"},
            )

    def _watch_failed(self, kind: str, error: Exception, backoff: float) -> float:
        """Count, record and log a failed watch of `kind`; return the seconds to wait
        before resuming (`backoff` jittered, or longer if the server asked for it)."""
        metrics.WATCH_RESTARTS.labels(kind, "error").inc()
        self.currency[kind].failed(self.clock(), describe(error))
        delay = backoff * (0.5 + self.jitter())
        asked = retry_after(error)
        if asked is not None:
            delay = max(delay, min(asked, self.settings.retry_after_max))
        log.warning(
            "%s watch failed (%s); resuming in %.1fs",
            kind,
            describe(error),
            delay,
            extra={"resource": "-"},
        )
        return delay

    async def _discovered(self, kind: str) -> bool:
        """Whether the API server serves an optional kind (a failure to tell raises).

        Not served, the kind is not watched: whatever the state held of it is
        forgotten (as on an agent started against this API server), it counts as
        listed, and no report's freshness waits on it. Said in the log when that
        starts (at start, or when the kind disappears) and when it ends.
        """
        served = await self.api.served(kind)
        known = self.currency[kind]
        if served:
            if not known.watched or self.served_as.get(kind) != served:
                log.info("%s now served as %s: watching it", kind, served, extra={"resource": "-"})
            self.served_as[kind] = served
            return True
        self.served_as.pop(kind, None)
        if known.watched:
            log.info(
                "%s not served by the API server (none of %s): not watched, so none can "
                "taint a device; looking again every %gs",
                kind,
                served_versions(kind),
                self.settings.idle,
                extra={"resource": "-"},
            )
        first_sync = not self.listed_once
        self._mark(kind, self.state.replace(kind, ()), [])
        known.watched, known.error, known.failing_since = False, None, None
        self._listed(kind, first_sync)
        return False

    def _listed(self, kind: str, first_sync: bool) -> None:
        """`kind` is whole in the state again; the first time every kind is, reports
        can be computed."""
        self.synced[kind] = True
        metrics.SYNCED.labels(kind).set(1)
        if first_sync and self.ready:
            self.listed_once = True
            freeze_heap()

    def _apply(self, kind: str, event: str, obj: Mapping) -> Touched:
        try:
            return self.state.apply(kind, event, obj)
        except Exception as error:
            meta = obj.get("metadata") or {}
            name = "/".join(str(meta.get(k)) for k in ("namespace", "name") if meta.get(k))
            raise Unapplied(f"{event} {name}: {type(error).__name__}: {error}") from error

    async def _relist(self, kind: str) -> str:
        """Fold a full list of `kind` into the state, page by page; return its version.

        The kind is not synced while this runs (the state is part old, part new),
        so the publisher holds its writes until the list is complete.
        """
        first_sync = not self.listed_once
        self.synced[kind] = False
        metrics.SYNCED.labels(kind).set(0)
        seen: set[object] = set()
        touched = Touched()
        observations: list[Mapping] = []

        def fold(obj: Mapping) -> None:
            nonlocal touched
            seen.add(self.state.key_of(kind, obj))
            touched |= self.state.apply(kind, "MODIFIED", obj)
            if kind in (POOLS, REPLICAS):
                observations.append(obj)

        asked_at, asked_mono = self.clock(), self.monotonic()
        started = time.perf_counter()
        version = await self.api.list(kind, fold)
        touched |= self.state.delete_missing(kind, seen)
        self._mark(kind, touched, observations)
        metrics.RECOMPUTE.labels("relist").observe(time.perf_counter() - started)
        self.currency[kind].listed(asked_at, asked_mono)  # the list is at least that recent
        self.currency[kind].watched = True
        self._listed(kind, first_sync)
        log.info("listed %d %s", len(seen), kind, extra={"resource": "-"})
        return version

    def _mark(self, kind: str, touched: Touched, objs: list[Mapping]) -> None:
        for pool in touched.pools:
            self.queue.mark((POOLS, "", pool))
        for namespace, name in touched.replicas:
            self.queue.mark((REPLICAS, namespace, name))
        if kind not in (POOLS, REPLICAS):
            return
        # A status someone else changed (or wiped) is rewritten; our own echo is not news.
        for obj in objs:
            meta = obj.get("metadata") or {}
            key = (kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            self.queue.overwritten(key, obj.get("status"))

    # ------------------------------------------------------------------ publishing

    async def _publish_forever(self) -> None:
        while not self._stopping.is_set():
            if self.listed_once:
                await self.publish_once()
            self.last_progress = self.monotonic()
            self.passes += 1
            metrics.PASSES.inc()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.settings.tick)

    def _known(self) -> list[Key]:
        return [(POOLS, "", p) for p in self.state.pools] + [
            (REPLICAS, ns, name) for ns, name in self.state.replicas
        ]

    async def publish_once(self) -> int:
        """One publisher pass; returns how many statuses it wrote.

        The watches run while a write is awaited, so an observation listed at the
        start of the pass may be deleted before its turn: it is then dropped from
        the pass. A failure to compute or write one observation's status is
        logged on its logger, counted, and retried after a backoff (`writes`); it
        never ends the pass, nor the publisher. A Retry-After ends the pass.
        """
        now = self.clock()
        writes = 0
        known = self._known()
        self.queue.forget(set(known))
        fresh = self._freshness(now, known)
        max_age = self._heartbeat_age()
        # A report is computed only from kinds that are not being relisted (a relist
        # folds page by page: the state is part old, part new until it completes);
        # each report checks that again when it is computed, since a relist may start
        # while an earlier write is awaited. This pass-wide view moves replicasCurrentAt.
        whole = {report: all(self.synced[k] for k in REPORT_INPUTS[report]) for report in fresh}
        # Replicas first: the pools written after them carry this pass's replicasCurrentAt,
        # and a pool refreshes in the pass its replica turned scheduled.
        for kind in (REPLICAS, POOLS):
            for key in (k for k in known if k[0] == kind):
                if not self._exists(key):
                    continue  # deleted while an earlier write of this pass was awaited
                try:
                    writes += await self._publish(key, max_age)
                except asyncio.CancelledError:
                    self.queue.release(key)  # still dirty for the next publisher
                    raise
                except Exception as error:
                    self._failed(key, error)
                self.last_progress = self.monotonic()
            if kind == REPLICAS and self._replicas_current(fresh[REPLICAS], whole[REPLICAS]):
                vouched = fresh[REPLICAS].observed_at  # the pass's start, or a catching-up list's
                self.replicas_current_at = max(vouched, self.replicas_current_at or vouched)
        return writes

    def _replicas_current(self, fresh: Freshness, whole: bool) -> bool:
        """Whether, after this pass's replicas, every replica report says what the state
        said at the pass's start: the kinds they read were current and listed whole, and
        no replica is left dirty (a change not yet written: rate-limited, failed, backing
        off, or held by a Retry-After) or backing off.

        Only then may `replicasCurrentAt` move to the pass's start. It vouches for
        reports nobody rewrites, so it must never pass a change a replica's report
        does not carry yet (agent/tests/test_controller.py tests that invariant).
        """
        if fresh.condition.status != "True" or not whole:
            return False
        return not any(key[0] == REPLICAS for key in self.queue.pending())

    def _heartbeat_age(self) -> timedelta:
        """This pass's `heartbeat_age`, logged when it changes (a PoolObservation's
        maxAge changed, or the pool that declared the smallest is gone)."""
        age = heartbeat_age(self.state.pools.values(), self.settings.max_age)
        if age != self.heartbeat_age_said:
            source = "--max-age" if self.settings.max_age is not None else "PoolObservations"
            log.info(
                "heartbeats follow maxAge %s (from %s)",
                format_duration(age),
                source,
                extra={"resource": "-"},
            )
            self.heartbeat_age_said = age
        return age

    def _freshness(self, now: datetime, known: list[Key]) -> dict[str, Freshness]:
        """Each kind of report's freshness this pass; a change marks all of them dirty."""
        mono = self.monotonic()
        fresh = {
            report: freshness(inputs, self.currency, now, mono, self.settings.silence, kind_name)
            for report, inputs in REPORT_INPUTS.items()
        }
        for report, this in fresh.items():
            if self.freshness_said.get(report) != this.condition:
                for key in known:
                    if key[0] == report:
                        self.queue.mark(key)
                self.freshness_said[report] = this.condition
        for kind in KINDS:
            lagging = freshness((kind,), self.currency, now, mono, self.settings.silence, kind_name)
            metrics.CURRENT.labels(kind).set(lagging.condition.status == "True")
        return fresh

    def _exists(self, key: Key) -> bool:
        kind, namespace, name = key
        if kind == POOLS:
            return name in self.state.pools
        return (namespace, name) in self.state.replicas

    def _failed(self, key: Key, error: Exception) -> None:
        kind, namespace, name = key
        metrics.STATUS_FAILURES.labels(kind).inc()
        delay = self._retry_later(key, error)
        bound_logger(kind, namespace, name).exception(
            "status not published: %s; retrying in %.1fs", describe(error), delay
        )

    def _retry_later(self, key: Key, error: Exception) -> float:
        """Back `key` off after a failure; returns the delay. A Retry-After holds all writes."""
        return self.queue.failed(key, self.monotonic(), self.jitter(), retry_after(error))

    async def _publish(self, key: Key, max_age: timedelta) -> int:
        """Ask the queue whether to write `key`'s status now (its heartbeat derived from
        `max_age`), and write it if so; 1 if it was written.

        The report is stamped with its own moment (`at`), read when its snapshot is
        taken: nothing is awaited between reading the clock, the kinds' currency and
        the state and computing the status (inside `decide`), so everything it says
        was true then (design/agent.md, "Publishing"). While a kind the report reads
        is being relisted the report cannot be computed: the queue holds it while
        that relist goes well, and once it fails (the kind is then not current) the
        last status is written again as it was, with the frozen `observedAt` and the
        `Current` condition saying why.
        """
        at = self.clock()
        fresh = self._report_freshness(key[0], at)
        compute = functools.partial(self._new_status, key, at, fresh)
        write = self.queue.decide(key, self._probe(key, fresh, max_age), compute)
        if write is None or not await self._write(key, write, at):
            return 0
        problem = warning(write.previous, write.status)
        if problem is not None:
            await self._warn(key, *problem, at)
        return 1

    def _probe(self, key: Key, fresh: Freshness, max_age: timedelta) -> Probe:
        """What the queue needs of `key`'s report as of `fresh` (read just now)."""
        kind, namespace, name = key
        every = heartbeat(key, max_age)
        whole = all(self.synced[k] for k in REPORT_INPUTS[kind])
        # A pool's heartbeat also carries replicasCurrentAt: due when either time moved.
        vouches = fresh.observed_at
        if kind == POOLS and self.replicas_current_at is not None:
            vouches = max(vouches, self.replicas_current_at)
        seen = (
            self.state.pool_status.get(name)
            if kind == POOLS
            else self.state.replica_status.get((namespace, name))
        )
        return Probe(
            mono=self.monotonic(),
            observed_at=fresh.observed_at,
            vouches=vouches,
            heartbeat=math.inf if every is None else every.total_seconds(),
            seen=seen,
            whole=whole,
            relist_failing=not whole and self._relist_failing(kind),
        )

    def _report_freshness(self, kind: str, at: datetime) -> Freshness:
        """The freshness of one report of `kind` computed at `at`."""
        inputs = REPORT_INPUTS[kind]
        silence = self.settings.silence
        return freshness(inputs, self.currency, at, self.monotonic(), silence, kind_name)

    def _relist_failing(self, report: str) -> bool:
        """Whether a kind this report reads is unlisted and its list failed."""
        return any(
            not self.synced[k] and self.currency[k].error is not None for k in REPORT_INPUTS[report]
        )

    def _new_status(
        self, key: Key, now: datetime, fresh: Freshness, current: Mapping | None, whole: bool
    ) -> dict:
        """The status to publish: computed from the state, or the last one `frozen` while
        a kind it reads cannot be relisted. A pool's carries `replicasCurrentAt` either
        way: the replica reports may be current when the pool's own kinds are not, and
        that word is all that keeps them fresh."""
        started = time.perf_counter()
        new = self._status(key, now, current, fresh) if whole else frozen(current, fresh, now)
        if key[0] == POOLS and self.replicas_current_at is not None:
            new[REPLICAS_CURRENT_AT] = format_time(self.replicas_current_at)
        metrics.RECOMPUTE.labels(key[0]).observe(time.perf_counter() - started)
        return new

    def _status(self, key: Key, now: datetime, previous: Mapping | None, fresh: Freshness) -> dict:
        kind, namespace, name = key
        if kind == POOLS:
            spec = self.state.pools[name]
            generation = spec.generation
            status = pool_status(
                self.state.pool_report(name), spec.kind_names, now, previous, generation
            )
        else:
            replica: ReplicaKey = (namespace, name)
            generation = self.state.replicas[replica].generation
            status = replica_status(self.state.replica_report(replica), now, previous, generation)
        return with_freshness(status, fresh, previous, now, generation)

    async def _write(self, key: Key, write: Write, at: datetime) -> bool:
        """Patch the status the queue handed out and report the outcome to it."""
        kind, namespace, name = key
        logger = bound_logger(kind, namespace, name)
        try:
            await self.api.patch_status(kind, namespace, name, write.status)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            metrics.WRITES.labels(kind, write.reason, "error").inc()
            delay = self._retry_later(key, error)
            logger.warning("status write failed: %s; retrying in %.1fs", describe(error), delay)
            return False
        metrics.WRITES.labels(kind, write.reason, "ok").inc()
        self.queue.written(key, write.status, self.monotonic(), at)
        condition = write.status["conditions"][0]
        if kind == POOLS:
            metrics.LAST_PUBLISH.labels(name).set(at.timestamp())
        elif condition["status"] == "True" and condition["lastTransitionTime"] == format_time(
            since := transition_time(at)
        ):
            # The replica just turned scheduled, `since` on our clock. The scheduler charges
            # it until its pools publish an observation at least that recent (the histogram
            # already holds its devices), so those pools publish one soon instead of at
            # their next heartbeat.
            for pool in self.state.pools_of_replica((namespace, name)):
                self.queue.require((POOLS, "", pool), since)
        logger.info(
            "status written (%s): %s=%s %s",
            write.reason,
            condition["type"],
            condition["status"],
            condition["reason"],
        )
        return True

    async def _warn(self, key: Key, reason: str, message: str, at: datetime) -> None:
        """One Warning event on the observation; a failure to create it is only logged."""
        kind, namespace, name = key
        stamp = format_time(at)
        event = {
            "metadata": {"generateName": f"{name}.", "namespace": namespace or "default"},
            "involvedObject": {
                "apiVersion": AGENT_API_VERSION,
                "kind": _KIND_NAMES[kind],
                "name": name,
                "namespace": namespace or None,
                "uid": self.state.uids.get(key) or None,
            },
            "type": "Warning",
            "reason": reason,
            "message": message,
            "source": {"component": "modelplane-agent"},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            await self.api.create_event(event)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            bound_logger(kind, namespace, name).warning(
                "event not created: %s: %s", type(error).__name__, error
            )


def _log_ended(task: asyncio.Task, delay: float) -> None:
    error = None if task.cancelled() else task.exception()
    how = f"{type(error).__name__}: {error}" if error else "returned"
    log.error(
        "task %s ended (%s); restarting it in %.1fs",
        task.get_name(),
        "cancelled" if task.cancelled() else how,
        delay,
        exc_info=error,
        extra={"resource": "-"},
    )


async def _after(delay: float, start: Callable[[], Coroutine[Any, Any, None]]) -> None:
    await asyncio.sleep(delay)
    await start()


def freeze_heap() -> None:
    """Move what the first lists built out of the garbage collector's sight.

    Millions of long-lived objects (the indexes of a 5,000-node cluster) would
    otherwise be traversed by every full collection, a pause of a few hundred
    milliseconds in the middle of handling an event.
    """
    gc.collect()
    gc.freeze()


def _resource_version(obj: Mapping) -> str | None:
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return version if isinstance(version, str) and version else None
