"""The shell against a fake API server: list-watch, resume, relist, rate limit, heartbeat."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx2
import pytest
from lightkube.core.exceptions import ApiError
from modelplane_agent import metrics
from modelplane_agent.controller import Controller, Settings, heartbeat_age
from modelplane_agent.kube import Gone, Idle
from modelplane_agent.snapshot import pool_spec_from
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
)
from modelplane_agent.writes import Pacing, write_reason
from modelplane_testkit import agent_builders as t

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SETTINGS = Settings(
    min_interval=timedelta(seconds=2),
    max_age=timedelta(minutes=5),  # pools heartbeat every 45-60 s, replicas every 90-120 s
    tick=0.01,
    backoff_initial=0.01,
    backoff_max=0.02,
)
CLASS = t.device_class("gpu.nvidia.com", "true")


class FakeApi:
    """Lists from a dict; watch events from a queue per kind; failures injected by tests."""

    def __init__(self, objects: Mapping[str, list[dict]]) -> None:
        self.objects = {kind: list(objects.get(kind, [])) for kind in KINDS}
        self.queues: dict[str, asyncio.Queue] = {kind: asyncio.Queue() for kind in KINDS}
        self.lists: list[str] = []
        self.watches: list[tuple[str, str]] = []
        self.patches: list[tuple[str, str, dict]] = []
        self.events: list[dict] = []
        self.version = 100
        self.unserved: set[str] = set()  # kinds discovery says the API server does not serve
        self.discoveries: list[str] = []
        self.served_as = "resource.k8s.io/v1"  # the version discovery finds the rules in

    async def list(self, kind: str, each) -> str:
        self.lists.append(kind)
        for obj in self.objects[kind]:
            each(obj)
            await asyncio.sleep(0)  # pages arrive with other tasks running in between
        return str(self.version)

    async def watch(self, kind: str, resource_version: str) -> AsyncIterator[tuple[str, Mapping]]:
        self.watches.append((kind, resource_version))
        while True:
            item = await self.queues[kind].get()
            if isinstance(item, Exception):
                raise item
            yield item

    async def served(self, kind: str) -> str | None:
        self.discoveries.append(kind)
        return None if kind in self.unserved else self.served_as

    async def patch_status(self, kind: str, namespace: str, name: str, status: Mapping) -> None:
        self.patches.append((kind, name, dict(status)))

    async def create_event(self, event: Mapping) -> None:
        self.events.append(dict(event))

    def bookmark(self, *kinds: str) -> None:
        """A BOOKMARK on each watch (every kind by default), as the API server sends
        about every minute."""
        for kind in kinds or KINDS:
            meta = {"resourceVersion": str(self.version)}
            self.queues[kind].put_nowait(("BOOKMARK", {"kind": kind, "metadata": meta}))

    def send(self, kind: str, event: str, obj: dict) -> None:
        self.version += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.version)}}
        self.queues[kind].put_nowait((event, obj))


class Clock:
    """The wall clock (call it) and a monotonic clock that moves with it, unless the
    wall clock is stepped (`step`), as NTP or a resumed VM would."""

    def __init__(self) -> None:
        self.now = NOW
        self.stepped = timedelta(0)

    def __call__(self) -> datetime:
        return self.now

    def monotonic(self) -> float:
        return (self.now - self.stepped - NOW).total_seconds()

    def step(self, by: timedelta) -> None:
        self.now += by
        self.stepped += by


def controller_for(api: FakeApi, clock: Clock, settings: Settings = SETTINGS) -> Controller:
    # Jitter 0.5: every backoff is its nominal delay.
    return Controller(api, clock, settings, monotonic=clock.monotonic, jitter=lambda: 0.5)


async def run_ticks(controller: Controller, ticks: int = 5) -> None:
    for _ in range(ticks):
        await asyncio.sleep(SETTINGS.tick * 2)


async def eventually(done, timeout: float = 5.0) -> None:
    """Wait until `done()` holds (a loaded machine runs the tasks late), or fail."""
    for _ in range(int(timeout / SETTINGS.tick)):
        if done():
            return
        await asyncio.sleep(SETTINGS.tick)
    assert done()


def world() -> dict[str, list[dict]]:
    return {
        CLASSES: [CLASS],
        POOLS: [t.pool_observation("a100", [("gpu", t.NVIDIA, "gpu.nvidia.com")])],
        NODES: [t.node("n1"), t.node("n2")],
        SLICES: [
            t.resource_slice("n1", [t.device("g0"), t.device("g1")]),
            t.resource_slice("n2", [t.device("g0"), t.device("g1")]),
        ],
    }


def histogram(patch: tuple[str, str, dict]) -> list:
    return patch[2]["nodesByFreeDevices"]


async def started(api: FakeApi, clock: Clock) -> tuple[Controller, asyncio.Task]:
    controller = controller_for(api, clock)
    task = asyncio.create_task(controller.run())
    await run_ticks(controller)
    return controller, task


async def stopped(controller: Controller, task: asyncio.Task) -> None:
    controller.stop()
    await asyncio.wait_for(task, 1)


def test_it_publishes_once_synced_and_not_again_while_nothing_changes():
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        controller, task = await started(api, clock)
        assert controller.ready
        assert [(k, n) for k, n, _ in api.patches] == [(POOLS, "a100")]
        assert histogram(api.patches[0]) == [{"free": {"gpu": 2}, "nodes": 2}]
        clock.now += timedelta(seconds=30)
        await run_ticks(controller)
        assert len(api.patches) == 1
        await stopped(controller, task)

    asyncio.run(scenario())


def test_a_change_is_published_but_not_twice_within_the_min_interval():
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        controller, task = await started(api, clock)
        api.send(CLAIMS, "ADDED", t.claim("c", [("n1", "g0")]))
        await run_ticks(controller)
        assert len(api.patches) == 1  # still inside the 2s since the first write
        clock.now += timedelta(seconds=3)
        await run_ticks(controller)
        assert len(api.patches) == 2
        assert histogram(api.patches[1]) == [
            {"free": {"gpu": 2}, "nodes": 1},
            {"free": {"gpu": 1}, "nodes": 1},
        ]
        await stopped(controller, task)

    asyncio.run(scenario())


def test_the_heartbeat_rewrites_the_times_of_currency_only():
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        controller, task = await started(api, clock)
        clock.now += timedelta(seconds=61)
        await run_ticks(controller)
        assert len(api.patches) == 2
        first, second = api.patches[0][2], api.patches[1][2]
        assert second["observedAt"] == "2026-11-30T12:01:01Z"
        # Every replica report (none here) was written and current as of this pass.
        assert second["replicasCurrentAt"] == "2026-11-30T12:01:01Z"
        times = ("observedAt", "replicasCurrentAt")
        assert {k: v for k, v in second.items() if k not in times} == {
            k: v for k, v in first.items() if k not in times
        }
        await stopped(controller, task)

    asyncio.run(scenario())


def with_a_replica() -> dict[str, list[dict]]:
    objects = world()
    objects[REPLICAS] = [t.replica_observation()]
    objects[PODS] = [t.pod("r-0", node_name="n1")]
    return objects


def writes_of(api: FakeApi, kind: str) -> list[dict]:
    return [s for k, _, s in api.patches if k == kind]


async def minutes_pass(api: FakeApi, clock: Clock, controller: Controller, n: int) -> None:
    """n steps of 61 s, each with the API server's bookmarks (about every minute)."""
    for _ in range(n):
        api.bookmark()
        clock.now += timedelta(seconds=61)
        await run_ticks(controller)


def test_an_unchanged_replica_report_is_never_rewritten_and_the_pool_heartbeat_vouches_for_it():
    async def scenario():
        api, clock = FakeApi(with_a_replica()), Clock()
        controller, task = await started(api, clock)
        await minutes_pass(api, clock, controller, 10)
        assert [w["observedAt"] for w in writes_of(api, REPLICAS)] == ["2026-11-30T12:00:00Z"]
        pools = writes_of(api, POOLS)
        assert len(pools) == 11  # the first write and a heartbeat every step
        # Each heartbeat vouches for every replica report as of its own pass: the
        # replicas are published first.
        assert [(p["observedAt"], p.get("replicasCurrentAt")) for p in pools[-2:]] == [
            ("2026-11-30T12:09:09Z", "2026-11-30T12:09:09Z"),
            ("2026-11-30T12:10:10Z", "2026-11-30T12:10:10Z"),
        ]
        await stopped(controller, task)

    asyncio.run(scenario())


def test_replicas_current_at_stops_while_a_replica_report_cannot_be_written():
    async def scenario():
        api, clock = FakeApi(with_a_replica()), Clock()
        failing = False
        real_patch = api.patch_status

        async def patch(kind: str, namespace: str, name: str, status: Mapping) -> None:
            if kind == REPLICAS and failing:
                raise ConnectionError("reset by peer")
            await real_patch(kind, namespace, name, status)

        api.patch_status = patch  # type: ignore[method-assign]
        controller, task = await started(api, clock)
        failing = True
        api.send(PODS, "ADDED", t.pod("r-1"))  # a second pod, not bound: news to write
        await run_ticks(controller)
        await minutes_pass(api, clock, controller, 4)
        pools = writes_of(api, POOLS)
        assert len(pools) == 5  # the pool heartbeats on ...
        assert {p["replicasCurrentAt"] for p in pools[1:]} == {"2026-11-30T12:00:00Z"}  # ... frozen
        failing = False
        await minutes_pass(api, clock, controller, 2)
        (_, written) = writes_of(api, REPLICAS)
        assert (written["pods"], written["scheduledPods"]) == (2, 1)
        assert pools[-1]["observedAt"] < written["observedAt"]
        assert writes_of(api, POOLS)[-1]["replicasCurrentAt"] >= written["observedAt"]
        await stopped(controller, task)

    asyncio.run(scenario())


def test_replicas_current_at_never_passes_a_replica_change_held_by_the_rate_limit():
    async def scenario():
        api, clock = FakeApi(with_a_replica()), Clock()
        controller, task = await started(api, clock)
        assert controller.replicas_current_at == NOW
        api.send(PODS, "ADDED", t.pod("r-1"))  # within min_interval of the first write
        clock.now += timedelta(seconds=1)
        await run_ticks(controller)
        assert len(writes_of(api, REPLICAS)) == 1  # held: 2 s between writes
        assert controller.replicas_current_at == NOW  # not the passes at 12:00:01
        clock.now += timedelta(seconds=2)
        await eventually(lambda: controller.replicas_current_at == clock.now)
        assert writes_of(api, REPLICAS)[-1]["pods"] == 2
        await stopped(controller, task)

    asyncio.run(scenario())


def test_replicas_current_at_stops_while_a_watch_the_replica_reports_read_is_failing():
    async def scenario():
        api, clock = FakeApi(with_a_replica()), Clock()
        failing = False
        real_watch = api.watch

        async def watch(kind: str, version: str) -> AsyncIterator[tuple[str, Mapping]]:
            if kind == REPLICAS and failing:
                raise forbidden("replicaobservations")
            async for item in real_watch(kind, version):
                yield item

        api.watch = watch  # type: ignore[method-assign]
        controller, task = await started(api, clock)
        failing = True
        api.queues[REPLICAS].put_nowait(forbidden("replicaobservations"))
        await minutes_pass(api, clock, controller, 3)
        pools = writes_of(api, POOLS)
        # The pools read no ReplicaObservation: they stay current and heartbeat on ...
        assert [p["observedAt"] for p in pools[1:]] == [
            "2026-11-30T12:01:01Z",
            "2026-11-30T12:02:02Z",
            "2026-11-30T12:03:03Z",
        ]
        # ... but vouch for no replica report past the failure.
        assert {p["replicasCurrentAt"] for p in pools[1:]} == {"2026-11-30T12:00:00Z"}
        failing = False
        await minutes_pass(api, clock, controller, 2)
        replica = writes_of(api, REPLICAS)[-1]
        assert current(replica)["reason"] == "WatchesCurrent"
        assert writes_of(api, POOLS)[-1]["replicasCurrentAt"] >= replica["observedAt"]
        await stopped(controller, task)

    asyncio.run(scenario())


def pool_with_max_age(max_age: str | None, name: str = "a100", generation: int = 1) -> dict:
    gpu = [("gpu", t.NVIDIA, "gpu.nvidia.com")]
    return t.pool_observation(name, gpu, max_age=max_age, generation=generation)


@pytest.mark.parametrize(
    ("declared", "override", "expected"),
    [
        pytest.param(["1m"], None, timedelta(minutes=1), id="one pool's maxAge is the cluster's"),
        pytest.param(
            ["5m", "90s", None], None, timedelta(seconds=90), id="several: the smallest declared"
        ),
        pytest.param([], None, timedelta(minutes=5), id="no pool: the InferenceCluster default"),
        pytest.param([None], None, timedelta(minutes=5), id="pools that declare none: the default"),
        pytest.param(
            ["1m"], timedelta(minutes=3), timedelta(minutes=3), id="--max-age overrides them"
        ),
        pytest.param(["2s"], None, timedelta(seconds=10), id="never below 10s"),
    ],
)
def test_heartbeats_follow_the_smallest_max_age_the_pool_observations_declare(
    declared, override, expected
):
    pools = [pool_spec_from(pool_with_max_age(a, f"p{i}")) for i, a in enumerate(declared)]
    assert heartbeat_age(pools, override) == expected


def test_a_pool_heartbeats_at_its_spec_max_age_and_follows_a_change_of_it():
    async def scenario():
        objects = {**world(), POOLS: [pool_with_max_age("1m")]}
        api, clock = FakeApi(objects), Clock()
        controller = controller_for(api, clock, replace(SETTINGS, max_age=None))
        task = asyncio.create_task(controller.run())
        await run_ticks(controller)
        clock.now += timedelta(seconds=13)  # maxAge 1m: a pool heartbeats every 9-12 s
        await run_ticks(controller)
        assert [s["observedAt"] for _, _, s in api.patches] == [
            "2026-11-30T12:00:00Z",
            "2026-11-30T12:00:13Z",
        ]
        api.send(POOLS, "MODIFIED", pool_with_max_age("5m", generation=2))
        clock.now += timedelta(seconds=3)
        await eventually(lambda: len(api.patches) == 3)  # the new generation, said once
        clock.now += timedelta(seconds=13)
        await run_ticks(controller)
        assert len(api.patches) == 3  # maxAge 5m: the next heartbeat is 45-60 s away
        api.bookmark()
        clock.now += timedelta(seconds=47)
        await run_ticks(controller)
        assert [s["observedAt"] for _, _, s in api.patches[3:]] == ["2026-11-30T12:01:16Z"]
        await stopped(controller, task)

    asyncio.run(scenario())


def test_a_broken_watch_resumes_from_the_last_version_it_delivered():
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        controller, task = await started(api, clock)
        api.send(NODES, "MODIFIED", t.node("n2", cordoned=True))
        await run_ticks(controller)
        api.queues[NODES].put_nowait(ConnectionError("reset by peer"))
        await run_ticks(controller)
        node_watches = [v for k, v in api.watches if k == NODES]
        assert node_watches == ["100", "101"]
        assert api.lists.count(NODES) == 1
        await stopped(controller, task)

    asyncio.run(scenario())


def test_410_gone_relists_and_forgets_what_disappeared_meanwhile():
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        controller, task = await started(api, clock)
        api.objects[NODES] = [t.node("n1")]  # n2 deleted while the watch was away
        api.queues[NODES].put_nowait(Gone("too old resource version"))
        clock.now += timedelta(seconds=3)
        await run_ticks(controller)
        assert api.lists.count(NODES) == 2
        assert api.patches[-1][2]["observedNodes"] == 1
        await stopped(controller, task)

    asyncio.run(scenario())


def test_a_pool_that_cannot_be_observed_gets_one_warning_event_not_one_per_write():
    async def scenario():
        objects = world()
        objects[CLASSES] = []
        api, clock = FakeApi(objects), Clock()
        controller, task = await started(api, clock)
        assert api.patches[0][2]["conditions"][0]["reason"] == "DeviceClassNotFound"
        assert [(e["reason"], e["involvedObject"]["kind"]) for e in api.events] == [
            ("DeviceClassNotFound", "PoolObservation")
        ]
        assert api.events[0]["message"] == (
            "device kind gpu: DeviceClass gpu.nvidia.com does not exist"
        )
        clock.now += timedelta(seconds=61)
        await run_ticks(controller)
        assert len(api.patches) == 2 and len(api.events) == 1  # the heartbeat says it again
        await stopped(controller, task)

    asyncio.run(scenario())


def test_nothing_is_published_while_a_relist_is_half_folded():
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        controller, task = await started(api, clock)
        resume = asyncio.Event()
        real_list = api.list

        async def paused_nodes(kind: str, each):
            if kind != NODES:
                return await real_list(kind, each)
            each(t.node("n1", cordoned=True))  # the first page ...
            await resume.wait()  # ... and the rest later
            each(t.node("n2", cordoned=True))
            return "200"

        api.list = paused_nodes  # type: ignore[method-assign]
        api.queues[NODES].put_nowait(Gone("too old resource version"))
        clock.now += timedelta(seconds=3)
        await run_ticks(controller)
        assert not controller.ready
        assert len(api.patches) == 1  # nothing written from the half-folded list
        resume.set()
        await run_ticks(controller)
        assert controller.ready
        assert api.patches[-1][2]["nodesByFreeDevices"] == []  # both cordoned
        await stopped(controller, task)

    asyncio.run(scenario())


def test_a_relisted_kind_is_current_only_as_of_its_list_until_its_watch_has_caught_up():
    # The watch from the list's version first delivers what happened during the list;
    # until it has had `catch_up` seconds to, a report is as of the list's request.
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        settings = replace(SETTINGS, catch_up=5.0)
        controller = controller_for(api, clock, settings)
        task = asyncio.create_task(controller.run())
        await run_ticks(controller)
        real_list = api.list

        async def slow_nodes(kind: str, each):
            if kind == NODES:
                clock.now += timedelta(seconds=3)  # the list takes 3 s
            return await real_list(kind, each)

        api.list = slow_nodes  # type: ignore[method-assign]
        api.objects[NODES] = [t.node("n1", cordoned=True), t.node("n2")]
        clock.now = NOW + timedelta(seconds=10)
        api.queues[NODES].put_nowait(Gone("too old resource version"))
        await run_ticks(controller)
        relisted = writes_of(api, POOLS)[-1]
        assert histogram(("", "", relisted)) == [{"free": {"gpu": 2}, "nodes": 1}]
        assert (relisted["observedAt"], current(relisted)["status"]) == (
            "2026-11-30T12:00:10Z",
            "True",
        )
        clock.now = NOW + timedelta(seconds=20)
        api.send(NODES, "MODIFIED", t.node("n2", cordoned=True))
        await run_ticks(controller)
        caught_up = writes_of(api, POOLS)[-1]
        assert (caught_up["observedAt"], current(caught_up)["status"]) == (
            "2026-11-30T12:00:20Z",
            "True",
        )
        await stopped(controller, task)

    asyncio.run(scenario())


def test_nothing_is_published_before_every_kind_is_listed():
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        real_list = api.list

        async def slow_claims(kind: str, each):
            if kind == CLAIMS:
                await asyncio.sleep(3600)
            return await real_list(kind, each)

        api.list = slow_claims  # type: ignore[method-assign]
        controller, task = await started(api, clock)
        assert not controller.ready and api.patches == []
        await stopped(controller, task)

    asyncio.run(scenario())


def test_a_status_someone_else_overwrote_is_written_again():
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        controller, task = await started(api, clock)
        pool = dict(world()[POOLS][0])
        pool["status"] = {"observedAt": "2026-11-30T12:00:00Z"}
        api.send(POOLS, "MODIFIED", pool)
        clock.now += timedelta(seconds=3)
        await run_ticks(controller)
        assert len(api.patches) == 2
        assert api.patches[1][2]["nodesByFreeDevices"] == api.patches[0][2]["nodesByFreeDevices"]
        await stopped(controller, task)

    asyncio.run(scenario())


def test_a_replica_turning_scheduled_makes_its_pool_publish_a_newer_observation():
    async def scenario():
        objects = world()
        objects[REPLICAS] = [t.replica_observation()]
        objects[PODS] = [t.pod("r-0")]
        api, clock = FakeApi(objects), Clock()
        controller, task = await started(api, clock)
        assert sorted(k for k, _, _ in api.patches) == [POOLS, REPLICAS]
        clock.now += timedelta(seconds=5)
        api.send(PODS, "MODIFIED", t.pod("r-0", node_name="n1"))
        await run_ticks(controller)
        replica_writes = [s for k, _, s in api.patches if k == REPLICAS]
        assert replica_writes[-1]["conditions"][0]["status"] == "True"
        since = replica_writes[-1]["conditions"][0]["lastTransitionTime"]
        # Seen at 12:00:05, the flip is stamped past its second; the pool refreshes
        # with a snapshot taken once its clock reaches that.
        assert since == "2026-11-30T12:00:06Z"
        assert len(writes_of(api, POOLS)) == 1
        clock.now += timedelta(seconds=1)
        await run_ticks(controller)
        pool_writes = writes_of(api, POOLS)
        assert [w["observedAt"] for w in pool_writes] == ["2026-11-30T12:00:00Z", since]
        assert pool_writes[1]["nodesByFreeDevices"] == pool_writes[0]["nodesByFreeDevices"]
        clock.now += timedelta(seconds=5)
        await run_ticks(controller)
        assert len([k for k, _, _ in api.patches if k == POOLS]) == 2  # once, not again
        await stopped(controller, task)

    asyncio.run(scenario())


def with_a_replica_claiming(claim: str) -> dict[str, list[dict]]:
    objects = world()
    objects[REPLICAS] = [t.replica_observation()]
    objects[PODS] = [t.pod("r-0", claims=[claim])]
    objects[CLAIMS] = [t.claim(claim, [], namespace="team")]
    return objects


def test_a_pool_snapshot_taken_before_a_binding_never_reads_as_recent_as_the_binding():
    # The wire carries whole seconds, and the fleet takes a replica scheduled at or
    # before a pool's observedAt to be in that pool's histogram already. A pool
    # published from a snapshot taken at 12:00:05.1, before the replica's claim is
    # allocated and its pod bound at 12:00:05.6, must read older than the flip.
    async def scenario():
        api, clock = FakeApi(with_a_replica_claiming("c")), Clock()
        controller, task = await started(api, clock)
        clock.now = NOW + timedelta(seconds=5.1)
        api.send(CLAIMS, "ADDED", t.claim("x", [("n2", "g0")]))
        await run_ticks(controller)
        assert histogram(api.patches[-1]) == [
            {"free": {"gpu": 2}, "nodes": 1},
            {"free": {"gpu": 1}, "nodes": 1},
        ]
        clock.now = NOW + timedelta(seconds=5.6)
        api.send(CLAIMS, "MODIFIED", t.claim("c", [("n1", "g0")], namespace="team"))
        api.send(PODS, "MODIFIED", t.pod("r-0", node_name="n1", claims=["c"]))
        await run_ticks(controller)
        clock.now = NOW + timedelta(seconds=10)
        await run_ticks(controller)
        replica = writes_of(api, REPLICAS)[-1]["conditions"][0]
        assert replica["status"] == "True"
        holding = [{"free": {"gpu": 1}, "nodes": 2}]
        as_recent = [
            p["nodesByFreeDevices"]
            for p in writes_of(api, POOLS)
            if p["observedAt"] >= replica["lastTransitionTime"]
        ]
        assert as_recent and all(h == holding for h in as_recent)
        await stopped(controller, task)

    asyncio.run(scenario())


def test_each_report_of_a_pass_is_stamped_when_its_own_snapshot_is_taken():
    # The watches apply events while a write is awaited: a report computed after an
    # earlier write of the pass says what was true when it was computed, not at the
    # pass's start.
    async def scenario():
        api, clock = FakeApi(with_a_replica()), Clock()
        controller, task = await started(api, clock)
        real_patch = api.patch_status

        async def slow_replica_write(kind: str, namespace: str, name: str, status) -> None:
            if kind == REPLICAS:
                clock.now += timedelta(seconds=3)  # a slow API server
            await real_patch(kind, namespace, name, status)

        api.patch_status = slow_replica_write  # type: ignore[method-assign]
        clock.now = NOW + timedelta(seconds=5)
        api.send(CLAIMS, "ADDED", t.claim("x", [("n2", "g0")]))
        api.send(PODS, "ADDED", t.pod("r-1", node_name="n2"))
        await run_ticks(controller)
        assert writes_of(api, REPLICAS)[-1]["observedAt"] == "2026-11-30T12:00:05Z"
        assert writes_of(api, POOLS)[-1]["observedAt"] == "2026-11-30T12:00:08Z"
        await stopped(controller, task)

    asyncio.run(scenario())


def test_an_event_handled_while_a_status_is_being_written_is_published_after_it():
    # The write carries the state from before the event; the event's own mark must
    # survive the write, or the report stays one event behind until the heartbeat.
    async def scenario():
        objects = world()
        objects[REPLICAS] = [t.replica_observation()]
        objects[PODS] = [t.pod("r-0", node_name="n1"), t.pod("r-1", node_name="n2")]
        api, clock = FakeApi(objects), Clock()
        controller, task = await started(api, clock)
        real_patch = api.patch_status

        async def slow_patch(kind: str, namespace: str, name: str, status: Mapping) -> None:
            await real_patch(kind, namespace, name, status)
            if kind == REPLICAS and status["pods"] == 1:
                api.send(PODS, "DELETED", t.pod("r-0", node_name="n1"))
                await asyncio.sleep(SETTINGS.tick * 5)  # the watch handles it meanwhile

        api.patch_status = slow_patch  # type: ignore[method-assign]
        clock.now += timedelta(seconds=3)
        api.send(PODS, "DELETED", t.pod("r-1", node_name="n2"))
        await run_ticks(controller)
        clock.now += timedelta(seconds=3)
        await run_ticks(controller)
        replica_writes = [s for k, _, s in api.patches if k == REPLICAS]
        assert [(w["pods"], w["scheduledPods"]) for w in replica_writes] == [(2, 2), (1, 1), (0, 0)]
        await stopped(controller, task)

    asyncio.run(scenario())


BEFORE = NOW - timedelta(seconds=1)
# (current status, seconds since the last attempt, age of our last write, newer_than, reason)
REASONS = {
    "a first status is a change": (None, None, None, None, "change"),
    "an equal status younger than the heartbeat is left alone": (
        {"observedAt": "2026-11-30T11:59:30Z", "observedNodes": 1},
        None,
        None,
        None,
        None,
    ),
    "an equal status as old as the heartbeat is a heartbeat": (
        {"observedAt": "2026-11-30T11:59:00Z", "observedNodes": 1},
        None,
        None,
        None,
        "heartbeat",
    ),
    "an equal status we wrote a heartbeat ago is a heartbeat, whatever the wall clock says": (
        {"observedAt": "2026-11-30T12:00:30Z", "observedNodes": 1},
        60.0,
        60.0,
        None,
        "heartbeat",
    ),
    "an equal status we wrote recently is left alone though its observedAt looks old": (
        {"observedAt": "2026-11-30T11:50:00Z", "observedNodes": 1},
        30.0,
        30.0,
        None,
        None,
    ),
    "an equal status seen with an observedAt in the future is rewritten at once": (
        {"observedAt": "2026-11-30T12:10:00Z", "observedNodes": 1},
        None,
        None,
        None,
        "heartbeat",
    ),
    "an equal status carrying the same observedAt is never a heartbeat": (
        {"observedAt": "2026-11-30T12:00:00Z", "observedNodes": 1},
        600.0,
        600.0,
        None,
        None,
    ),
    "an equal status older than a replica's turn to scheduled is refreshed": (
        {"observedAt": "2026-11-30T11:59:58Z", "observedNodes": 1},
        None,
        None,
        BEFORE,
        "refresh",
    ),
    "an equal status as recent as a replica's turn to scheduled is left alone": (
        {"observedAt": "2026-11-30T11:59:59Z", "observedNodes": 1},
        None,
        None,
        BEFORE,
        None,
    ),
    "a changed status within the min interval waits": (
        {"observedAt": "2026-11-30T11:59:59Z", "observedNodes": 2},
        1.0,
        1.0,
        None,
        None,
    ),
    "a changed status after the min interval is a change": (
        {"observedAt": "2026-11-30T11:59:59Z", "observedNodes": 2},
        2.0,
        2.0,
        None,
        "change",
    ),
}


@pytest.mark.parametrize(
    ("current", "since_attempt", "written_age", "newer_than", "reason"),
    list(REASONS.values()),
    ids=list(REASONS),
)
def test_write_reason(current, since_attempt, written_age, newer_than, reason):
    new = {"observedAt": "2026-11-30T12:00:00Z", "observedNodes": 1}
    assert (
        write_reason(
            new,
            current,
            since_attempt=since_attempt,
            written_age=written_age,
            pacing=Pacing(min_interval=2.0, heartbeat=60.0),
            newer_than=newer_than,
        )
        == reason
    )


def test_observations_deleted_while_a_write_is_awaited_are_dropped_and_publishing_goes_on():
    # The fresh-machine e2e failure: a cleanup deleted observations while the publisher
    # was writing; the pass then computed a status for one that was gone (KeyError) and
    # the publisher task ended, so a PoolObservation created later never got a status.
    async def scenario():
        objects = world()
        objects[POOLS].append(t.pool_observation("b200", [("gpu", t.NVIDIA, "gpu.nvidia.com")]))
        objects[REPLICAS] = [t.replica_observation("r"), t.replica_observation("s")]
        api, clock = FakeApi(objects), Clock()
        real_patch = api.patch_status

        async def deleting_patch(kind: str, namespace: str, name: str, status: Mapping) -> None:
            await real_patch(kind, namespace, name, status)
            if name == "r" and len(api.patches) == 1:  # replicas are published first
                api.send(POOLS, "DELETED", objects[POOLS][1])
                api.send(REPLICAS, "DELETED", objects[REPLICAS][1])
                await asyncio.sleep(SETTINGS.tick * 5)  # the watches handle both meanwhile

        api.patch_status = deleting_patch  # type: ignore[method-assign]
        controller, task = await started(api, clock)
        assert [n for _, n, _ in api.patches] == ["r", "a100"]
        api.send(POOLS, "ADDED", t.pool_observation("c300", [("gpu", t.NVIDIA, "gpu.nvidia.com")]))
        await run_ticks(controller)
        assert [n for _, n, _ in api.patches] == ["r", "a100", "c300"]
        await stopped(controller, task)

    asyncio.run(scenario())


def test_one_observation_whose_status_cannot_be_computed_is_logged_and_retried(caplog):
    async def scenario():
        objects = world()
        objects[POOLS].append(t.pool_observation("b200", [("gpu", t.NVIDIA, "gpu.nvidia.com")]))
        api, clock = FakeApi(objects), Clock()
        controller = controller_for(api, clock)
        real_report = controller.state.pool_report
        failures = iter([RuntimeError("a bug in the rules")])

        def failing_once(pool: str):
            if pool == "a100":
                error = next(failures, None)
                if error is not None:
                    raise error
            return real_report(pool)

        controller.state.pool_report = failing_once  # type: ignore[method-assign]
        task = asyncio.create_task(controller.run())
        await run_ticks(controller)
        assert [n for _, n, _ in api.patches] == ["b200"]  # the pass went on past a100
        clock.now += timedelta(seconds=3)
        await run_ticks(controller)
        assert [n for _, n, _ in api.patches] == ["b200", "a100"]  # retried
        await stopped(controller, task)

    before = failures_of(POOLS)
    with caplog.at_level("ERROR", logger="modelplane_agent"):
        asyncio.run(scenario())
    assert failures_of(POOLS) == before + 1
    lines = [(r.resource, r.getMessage()) for r in caplog.records]  # type: ignore[attr-defined]
    assert lines == [
        (
            "PoolObservation/a100",
            "status not published: RuntimeError: a bug in the rules; retrying in 2.0s",
        )
    ]


def test_a_task_that_dies_is_logged_and_started_again(caplog):
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        controller = controller_for(api, clock)
        real_publish = controller._publish_forever
        deaths = iter([KeyError("gone")])

        async def dying_once() -> None:
            error = next(deaths, None)
            if error is not None:
                raise error
            await real_publish()

        controller._publish_forever = dying_once  # type: ignore[method-assign]
        task = asyncio.create_task(controller.run())
        await eventually(lambda: api.patches)
        assert [n for _, n, _ in api.patches] == ["a100"]
        await stopped(controller, task)

    with caplog.at_level("ERROR", logger="modelplane_agent"):
        asyncio.run(scenario())
    assert [r.getMessage() for r in caplog.records] == [
        "task publish ended (KeyError: 'gone'); restarting it in 0.0s"
    ]


def failures_of(kind: str) -> float:
    return (
        metrics.REGISTRY.get_sample_value("modelplane_agent_status_failures_total", {"kind": kind})
        or 0.0
    )


def two_pools() -> dict[str, list[dict]]:
    objects = world()
    objects[POOLS].append(t.pool_observation("b200", [("gpu", t.NVIDIA, "gpu.nvidia.com")]))
    return objects


async def tick_by(clock: Clock, controller: Controller, seconds: int) -> None:
    """Advance the clocks a second at a time, each followed by a whole publisher pass."""
    for _ in range(seconds):
        clock.now += timedelta(seconds=1)
        passes = controller.passes
        await eventually(lambda p=passes: controller.passes >= p + 2)


def throttled(seconds: int) -> ApiError:
    request = httpx2.Request("PATCH", "https://apiserver.test/status")
    response = httpx2.Response(
        429,
        headers={"Retry-After": str(seconds), "Content-Type": "application/json"},
        json={"kind": "Status", "code": 429, "message": "the server is handling too many requests"},
        request=request,
    )
    return ApiError(request=request, response=response)


def test_a_failing_write_backs_off_exponentially_per_observation_up_to_the_cap():
    async def scenario():
        api, clock = FakeApi(two_pools()), Clock()
        attempts: list[float] = []
        real_patch = api.patch_status

        async def failing_a100(kind: str, namespace: str, name: str, status: Mapping) -> None:
            if name == "a100":
                attempts.append(clock.monotonic())
                raise ConnectionError("reset by peer")
            await real_patch(kind, namespace, name, status)

        api.patch_status = failing_a100  # type: ignore[method-assign]
        controller = controller_for(api, clock, replace(SETTINGS, write_backoff_max=8.0))
        task = asyncio.create_task(controller.run())
        await run_ticks(controller)
        await tick_by(clock, controller, 31)
        assert attempts == [0, 2, 6, 14, 22, 30]  # 2 s doubling, capped at 8 s
        assert [n for _, n, _ in api.patches] == ["b200"]  # the other pool is not held back
        await stopped(controller, task)

    asyncio.run(scenario())


def test_a_retry_after_holds_every_write_until_it_has_passed():
    async def scenario():
        api, clock = FakeApi(two_pools()), Clock()
        answers = iter([throttled(7)])
        real_patch = api.patch_status

        async def throttling_once(kind: str, namespace: str, name: str, status: Mapping) -> None:
            error = next(answers, None)
            if error is not None:
                raise error
            await real_patch(kind, namespace, name, status)

        api.patch_status = throttling_once  # type: ignore[method-assign]
        controller, task = await started(api, clock)
        await tick_by(clock, controller, 6)
        assert api.patches == []  # b200 waits too: the API server is overloaded
        await tick_by(clock, controller, 2)
        assert sorted(n for _, n, _ in api.patches) == ["a100", "b200"]
        await stopped(controller, task)

    asyncio.run(scenario())


def test_a_wall_clock_stepped_back_does_not_suppress_a_change():
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        controller, task = await started(api, clock)
        clock.step(-timedelta(seconds=30))  # NTP steps the clock back ...
        clock.now += timedelta(seconds=3)  # ... and 3 s pass
        api.send(CLAIMS, "ADDED", t.claim("c", [("n1", "g0")]))
        await run_ticks(controller)
        assert len(api.patches) == 2
        assert api.patches[1][2]["observedAt"] == "2026-11-30T11:59:33Z"
        await stopped(controller, task)

    asyncio.run(scenario())


def test_liveness_is_progress_within_a_pass_not_the_start_of_one():
    async def scenario():
        objects = two_pools()
        objects[POOLS].append(t.pool_observation("c300", [("gpu", t.NVIDIA, "gpu.nvidia.com")]))
        api, clock = FakeApi(objects), Clock()
        hang = asyncio.Event()
        alive_during: list[bool] = []
        real_patch = api.patch_status

        async def slow_patch(kind: str, namespace: str, name: str, status: Mapping) -> None:
            if name == "c300":
                await hang.wait()  # a write that never returns
            alive_during.append(controller.alive(35))
            clock.now += timedelta(seconds=20)  # a slow API server: 20 s per write
            await real_patch(kind, namespace, name, status)

        api.patch_status = slow_patch  # type: ignore[method-assign]
        controller = controller_for(api, clock)
        task = asyncio.create_task(controller.run())
        await run_ticks(controller)
        assert [n for _, n, _ in api.patches] == ["a100", "b200"]
        assert alive_during == [True, True]  # 40 s into the pass, but each write advanced
        assert controller.alive(35)
        clock.now += timedelta(seconds=36)
        await run_ticks(controller)
        assert not controller.alive(35)  # stuck in c300's write for 36 s
        hang.set()
        await run_ticks(controller)
        assert controller.alive(35)
        await stopped(controller, task)

    asyncio.run(scenario())


def test_an_event_the_state_cannot_apply_relists_its_kind():
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        controller, task = await started(api, clock)
        real_apply = controller.state.apply
        failures = iter([ValueError("unexpected shape")])

        def failing_once(kind: str, event: str, obj: Mapping):
            if kind == NODES and event == "MODIFIED":
                error = next(failures, None)
                if error is not None:
                    raise error
            return real_apply(kind, event, obj)

        controller.state.apply = failing_once  # type: ignore[method-assign]
        api.objects[NODES] = [t.node("n1"), t.node("n2", cordoned=True)]
        api.send(NODES, "MODIFIED", t.node("n2", cordoned=True))
        clock.now += timedelta(seconds=3)
        await run_ticks(controller)
        assert api.lists.count(NODES) == 2  # not skipped for good: relisted
        assert api.patches[-1][2]["nodesByFreeDevices"] == [{"free": {"gpu": 2}, "nodes": 1}]
        await stopped(controller, task)

    asyncio.run(scenario())


def forbidden(
    resource: str = "resourceclaims", code: int = 403, reason: str = "Forbidden"
) -> ApiError:
    request = httpx2.Request("GET", f"https://apiserver.test/apis/resource.k8s.io/v1/{resource}")
    response = httpx2.Response(
        code,
        headers={"Content-Type": "application/json"},
        json={
            "kind": "Status",
            "code": code,
            "reason": reason,
            "message": f"{resource} is forbidden"
            if code == 403
            else "the server could not find it",
        },
        request=request,
    )
    return ApiError(request=request, response=response)


def current(status: Mapping) -> dict:
    return next(c for c in status["conditions"] if c["type"] == "Current")


def test_a_failing_watch_freezes_observed_at_and_says_which_kind_and_why():
    async def scenario():
        objects = world()
        objects[REPLICAS] = [t.replica_observation()]
        objects[PODS] = [t.pod("r-0", node_name="n1")]
        api, clock = FakeApi(objects), Clock()
        controller, task = await started(api, clock)
        assert current(api.patches[0][2])["reason"] == "WatchesCurrent"
        clock.now += timedelta(seconds=10)
        api.queues[CLAIMS].put_nowait(forbidden())  # RBAC revoked: resumes, hears nothing
        await run_ticks(controller)
        pool = [s for k, _, s in api.patches if k == POOLS]
        assert len(pool) == 2 and pool[1]["observedAt"] == "2026-11-30T12:00:00Z"
        assert {k: v for k, v in current(pool[1]).items() if k != "observedGeneration"} == {
            "type": "Current",
            "status": "False",
            "reason": "WatchFailing",
            "message": "ResourceClaim watch failing since 2026-11-30T12:00:10Z: 403 Forbidden: "
            "resourceclaims is forbidden; the report is as of 2026-11-30T12:00:00Z",
            "lastTransitionTime": "2026-11-30T12:00:10Z",
        }
        assert pool[1]["conditions"][0]["reason"] == "Observed"  # the accounting is unchanged
        # A replica reads claims too (its pods count as scheduled once their claims are seen
        # allocated): its report is frozen with the same condition.
        replica = [s for k, _, s in api.patches if k == REPLICAS]
        assert len(replica) == 2 and replica[1]["observedAt"] == "2026-11-30T12:00:00Z"
        assert current(replica[1])["reason"] == "WatchFailing"
        clock.now += timedelta(seconds=61)
        api.bookmark(NODES, PODS, SLICES, CLASSES, POOLS, REPLICAS, RULES)
        await run_ticks(controller)
        assert len([k for k, _, _ in api.patches if k == POOLS]) == 2  # no fresh heartbeat
        api.bookmark(CLAIMS)  # the watch is heard from again
        await run_ticks(controller)
        pool = [s for k, _, s in api.patches if k == POOLS]
        assert pool[-1]["observedAt"] == "2026-11-30T12:01:11Z"
        assert current(pool[-1])["reason"] == "WatchesCurrent"
        await stopped(controller, task)

    asyncio.run(scenario())


def test_a_watch_silent_beyond_the_bound_freezes_observed_at_and_relists_when_idle():
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        controller, task = await started(api, clock)
        clock.now += timedelta(seconds=50)
        api.bookmark()
        await run_ticks(controller)
        clock.now += timedelta(seconds=50)  # nodes heard at 12:00:50, the rest bookmark again
        api.bookmark(PODS, SLICES, CLAIMS, CLASSES, POOLS, REPLICAS, RULES)
        await run_ticks(controller)
        # Nodes were heard 50 s ago: current, so the heartbeat is fresh.
        assert [p[2]["observedAt"] for p in api.patches] == [
            "2026-11-30T12:00:00Z",
            "2026-11-30T12:01:40Z",
        ]
        clock.now += timedelta(seconds=45)  # nodes silent for 95 s
        api.bookmark(PODS, SLICES, CLAIMS, CLASSES, POOLS, REPLICAS, RULES)
        await run_ticks(controller)
        last = api.patches[-1][2]
        assert last["observedAt"] == "2026-11-30T12:00:50Z"
        assert (current(last)["reason"], current(last)["message"]) == (
            "WatchSilent",
            "Node watch silent for more than 90s (no event or bookmark since "
            "2026-11-30T12:00:50Z); the report is as of 2026-11-30T12:00:50Z",
        )
        clock.now += timedelta(seconds=3)
        api.queues[NODES].put_nowait(Idle("no event for 90s"))  # kube.py's own timer
        await run_ticks(controller)
        assert api.lists.count(NODES) == 2
        last = api.patches[-1][2]
        assert (last["observedAt"], current(last)["status"]) == ("2026-11-30T12:02:28Z", "True")
        await stopped(controller, task)

    asyncio.run(scenario())


def test_a_relist_that_fails_republishes_the_reports_that_read_its_kind_frozen():
    async def scenario():
        objects = world()
        objects[REPLICAS] = [t.replica_observation()]
        objects[PODS] = [t.pod("r-0")]
        api, clock = FakeApi(objects), Clock()
        controller, task = await started(api, clock)
        real_list = api.list

        async def claims_forbidden(kind: str, each):
            if kind == CLAIMS:
                raise forbidden()
            return await real_list(kind, each)

        api.list = claims_forbidden  # type: ignore[method-assign]
        clock.now += timedelta(seconds=10)
        api.queues[CLAIMS].put_nowait(Gone("too old resource version"))
        api.send(PODS, "MODIFIED", t.pod("r-0", node_name="n1"))
        await run_ticks(controller)
        assert not controller.ready
        pools = [s for k, _, s in api.patches if k == POOLS]
        replicas = [s for k, _, s in api.patches if k == REPLICAS]
        # The replica reads claims too: the pod bound meanwhile is not published while the
        # claims that would say whether it holds its devices cannot be listed.
        assert replicas[-1]["observedAt"] == "2026-11-30T12:00:00Z"
        assert replicas[-1]["conditions"][0] == replicas[0]["conditions"][0]
        assert current(replicas[-1])["reason"] == "WatchFailing"
        assert len(pools) == 2
        assert pools[1]["observedAt"] == "2026-11-30T12:00:00Z"
        assert (current(pools[1])["reason"], current(pools[1])["message"]) == (
            "WatchFailing",
            "ResourceClaim watch failing since 2026-11-30T12:00:10Z: 403 Forbidden: "
            "resourceclaims is forbidden; the report is as of 2026-11-30T12:00:00Z",
        )
        unchanged = ("observedNodes", "nodesByFreeDevices")
        assert [pools[1][k] for k in unchanged] == [pools[0][k] for k in unchanged]
        assert pools[1]["conditions"][0] == pools[0]["conditions"][0]
        api.list = real_list  # type: ignore[method-assign]
        clock.now += timedelta(seconds=3)
        await eventually(lambda: controller.ready)
        await run_ticks(controller)
        pools = [s for k, _, s in api.patches if k == POOLS]
        assert pools[-1]["observedAt"] == "2026-11-30T12:00:13Z"
        assert current(pools[-1])["status"] == "True"
        replicas = [s for k, _, s in api.patches if k == REPLICAS]
        assert replicas[-1]["observedAt"] == "2026-11-30T12:00:13Z"
        assert replicas[-1]["conditions"][0]["reason"] == "AllPodsBound"
        await stopped(controller, task)

    asyncio.run(scenario())


def test_replicas_current_at_moves_on_while_a_kind_only_the_pools_read_cannot_be_relisted():
    async def scenario():
        api, clock = FakeApi(with_a_replica()), Clock()
        controller, task = await started(api, clock)
        real_list = api.list

        async def nodes_forbidden(kind: str, each):
            if kind == NODES:
                raise forbidden("nodes")
            return await real_list(kind, each)

        api.list = nodes_forbidden  # type: ignore[method-assign]
        clock.now += timedelta(seconds=10)
        api.queues[NODES].put_nowait(Gone("too old resource version"))
        await run_ticks(controller)
        for _ in range(2):  # two heartbeats; every kind but Nodes heard from meanwhile
            api.bookmark(PODS, SLICES, CLAIMS, CLASSES, POOLS, REPLICAS, RULES)
            clock.now += timedelta(seconds=61)
            await run_ticks(controller)
        last = writes_of(api, POOLS)[-1]
        # The pool's own report is frozen where its Nodes were last heard ...
        assert (last["observedAt"], current(last)["reason"]) == (
            "2026-11-30T12:00:00Z",
            "WatchFailing",
        )
        # ... but the replica reports read no Node: they are current, and the pool's
        # heartbeat says so (else every replica on the cluster would turn stale).
        assert last["replicasCurrentAt"] == "2026-11-30T12:02:12Z"
        assert len(writes_of(api, REPLICAS)) == 1  # unchanged, never rewritten
        await stopped(controller, task)

    asyncio.run(scenario())


def test_a_slow_relist_that_has_not_failed_writes_nothing_frozen():
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        controller, task = await started(api, clock)
        resume = asyncio.Event()
        real_list = api.list

        async def slow_nodes(kind: str, each):
            if kind != NODES:
                return await real_list(kind, each)
            await resume.wait()
            return await real_list(kind, each)

        api.list = slow_nodes  # type: ignore[method-assign]
        api.queues[NODES].put_nowait(Idle("no event for 75s"))
        clock.now += timedelta(seconds=100)  # the relist outlasts the 90 s bound
        api.bookmark(PODS, SLICES, CLAIMS, CLASSES, POOLS, REPLICAS, RULES)
        await run_ticks(controller)
        assert len(api.patches) == 1  # nothing frozen: the relist is going well
        resume.set()
        await run_ticks(controller)
        assert [(p[2]["observedAt"], current(p[2])["status"]) for p in api.patches] == [
            ("2026-11-30T12:00:00Z", "True"),
            ("2026-11-30T12:01:40Z", "True"),
        ]
        await stopped(controller, task)

    asyncio.run(scenario())


# --------------------------------------------------------------------------- optional kinds

RULE_ON_N1 = t.taint_rule("n1-g0", driver=t.NVIDIA, pool="n1", device="g0")
TAINTED_N1 = [{"free": {"gpu": 2}, "nodes": 1}, {"free": {"gpu": 1}, "nodes": 1}]
ALL_FREE = [{"free": {"gpu": 2}, "nodes": 2}]
DISCOVERY = replace(SETTINGS, idle=0.05)  # an unserved kind is looked for again every 50 ms


def test_device_taint_rules_not_served_are_not_watched_nor_waited_for(caplog):
    caplog.set_level(logging.INFO, logger="modelplane_agent")

    async def scenario():
        api, clock = FakeApi(world()), Clock()
        api.unserved = {RULES}
        controller = controller_for(api, clock, DISCOVERY)
        task = asyncio.create_task(controller.run())
        await eventually(lambda: api.discoveries.count(RULES) >= 3 and len(api.patches) == 1)
        assert controller.ready and RULES not in api.lists
        assert RULES not in {kind for kind, _ in api.watches}
        assert histogram(api.patches[0]) == ALL_FREE
        assert current(api.patches[0][2])["reason"] == "WatchesCurrent"
        clock.now += timedelta(seconds=100)  # rules never heard of: nothing waits on them
        api.bookmark(NODES, PODS, SLICES, CLAIMS, CLASSES, POOLS, REPLICAS)
        await run_ticks(controller)
        last = api.patches[-1][2]
        assert (last["observedAt"], current(last)["reason"]) == (
            "2026-11-30T12:01:40Z",
            "WatchesCurrent",
        )
        await stopped(controller, task)

    asyncio.run(scenario())
    said = [r.getMessage() for r in caplog.records if "not served" in r.getMessage()]
    assert said == [
        "devicetaintrules not served by the API server (none of resource.k8s.io/v1, "
        "v1beta2, v1alpha3): not watched, so none can taint a device; looking again "
        "every 0.05s"
    ]


def test_device_taint_rules_served_later_are_discovered_and_watched(caplog):
    caplog.set_level(logging.INFO, logger="modelplane_agent")

    async def scenario():
        api, clock = FakeApi({**world(), RULES: [RULE_ON_N1]}), Clock()
        api.unserved = {RULES}
        controller = controller_for(api, clock, DISCOVERY)
        task = asyncio.create_task(controller.run())
        await eventually(lambda: len(api.patches) == 1)
        assert histogram(api.patches[0]) == ALL_FREE
        api.unserved.clear()  # the alpha API turned on
        await eventually(lambda: RULES in api.lists)
        clock.now += timedelta(seconds=3)
        await eventually(lambda: histogram(api.patches[-1]) == TAINTED_N1)
        assert (RULES, str(api.version)) in api.watches
        await stopped(controller, task)

    asyncio.run(scenario())
    assert "devicetaintrules now served as resource.k8s.io/v1: watching it" in caplog.messages


def test_device_taint_rules_that_stop_being_served_are_forgotten():
    async def scenario():
        api, clock = FakeApi({**world(), RULES: [RULE_ON_N1]}), Clock()
        controller = controller_for(api, clock, DISCOVERY)
        task = asyncio.create_task(controller.run())
        await eventually(lambda: len(api.patches) == 1)
        assert histogram(api.patches[0]) == TAINTED_N1
        api.unserved.add(RULES)
        api.queues[RULES].put_nowait(forbidden("devicetaintrules", 404, "NotFound"))
        await eventually(lambda: not controller.state.devices.taint_rules.rules)
        clock.now += timedelta(seconds=3)
        await eventually(lambda: histogram(api.patches[-1]) == ALL_FREE)
        assert current(api.patches[-1][2])["reason"] == "WatchesCurrent"
        await stopped(controller, task)

    asyncio.run(scenario())


def test_device_taint_rules_served_in_a_new_version_after_an_upgrade_are_read_in_it(caplog):
    caplog.set_level(logging.INFO, logger="modelplane_agent")

    async def scenario():
        api, clock = FakeApi({**world(), RULES: [RULE_ON_N1]}), Clock()
        api.served_as = "resource.k8s.io/v1beta2"  # v1.36
        controller = controller_for(api, clock, DISCOVERY)
        task = asyncio.create_task(controller.run())
        await eventually(lambda: len(api.patches) == 1)
        assert histogram(api.patches[0]) == TAINTED_N1
        lists = api.lists.count(RULES)
        api.served_as = "resource.k8s.io/v1"  # upgraded to v1.37: v1beta2 went away
        api.queues[RULES].put_nowait(forbidden("devicetaintrules", 404, "NotFound"))
        await eventually(lambda: api.lists.count(RULES) > lists)
        assert controller.served_as[RULES] == "resource.k8s.io/v1"
        clock.now += timedelta(seconds=3)
        await run_ticks(controller)
        assert histogram(api.patches[-1]) == TAINTED_N1
        await stopped(controller, task)

    asyncio.run(scenario())
    assert [m for m in caplog.messages if "now served" in m] == [
        "devicetaintrules now served as resource.k8s.io/v1beta2: watching it",
        "devicetaintrules now served as resource.k8s.io/v1: watching it",
    ]


def test_a_device_taint_rule_event_changes_the_histogram():
    async def scenario():
        api, clock = FakeApi(world()), Clock()
        controller, task = await started(api, clock)
        assert histogram(api.patches[0]) == ALL_FREE
        api.send(RULES, "ADDED", RULE_ON_N1)
        clock.now += timedelta(seconds=3)
        await run_ticks(controller)
        assert histogram(api.patches[-1]) == TAINTED_N1
        api.send(RULES, "DELETED", RULE_ON_N1)
        clock.now += timedelta(seconds=3)
        await run_ticks(controller)
        assert histogram(api.patches[-1]) == ALL_FREE
        await stopped(controller, task)

    asyncio.run(scenario())


def test_device_taint_rules_that_cannot_be_listed_say_so_in_the_current_condition():
    async def scenario():
        api, clock = FakeApi({**world(), RULES: [RULE_ON_N1]}), Clock()
        controller, task = await started(api, clock)
        real_list = api.list

        async def rules_forbidden(kind: str, each):
            if kind == RULES:
                raise forbidden("devicetaintrules")
            return await real_list(kind, each)

        api.list = rules_forbidden  # type: ignore[method-assign]
        clock.now += timedelta(seconds=10)
        api.queues[RULES].put_nowait(forbidden("devicetaintrules"))  # RBAC revoked
        await run_ticks(controller)
        last = api.patches[-1][2]
        assert histogram(api.patches[-1]) == TAINTED_N1  # frozen as it was
        assert (current(last)["reason"], current(last)["message"]) == (
            "WatchFailing",
            "DeviceTaintRule watch failing since 2026-11-30T12:00:10Z: 403 Forbidden: "
            "devicetaintrules is forbidden; the report is as of 2026-11-30T12:00:00Z",
        )
        api.list = real_list  # type: ignore[method-assign]
        clock.now += timedelta(seconds=3)
        await eventually(lambda: controller.ready)
        await run_ticks(controller)
        assert current(api.patches[-1][2])["reason"] == "WatchesCurrent"
        await stopped(controller, task)

    asyncio.run(scenario())
