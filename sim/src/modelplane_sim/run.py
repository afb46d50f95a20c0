"""One simulation: every policy's world over the same steps, then the bound and the rows.

`simulate` is the pure part of the command (cli.py): inputs in, a `Result`
out, nothing written. The worlds run one after another on the same list of
steps (simulated times and the arrivals each step notices), so every policy
sees the same arrivals at the same moments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from compose_model_deployment import Matcher, default_matcher

from modelplane_sim import report
from modelplane_sim.arrivals import Arrival, Workload
from modelplane_sim.bound import RelaxedBound
from modelplane_sim.fleet import Fleet
from modelplane_sim.nodelevel import NodeLevelWorld
from modelplane_sim.policies import Policy, all_policies
from modelplane_sim.summary import Row, bound_row, policy_row
from modelplane_sim.world import Settings, World

START = datetime(2026, 1, 1, tzinfo=UTC)
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Result:
    rows: tuple[Row, ...]
    runs: dict[str, report.Run]
    bound: tuple[int, ...]
    worlds: dict[str, World]


_Steps = list[tuple[datetime, list[Arrival]]]


def _steps(workload: Workload, settings: Settings) -> _Steps:
    """Each step's time and the arrivals since the step before."""
    count = int(workload.duration / settings.step)
    pending = sorted(workload.arrivals, key=lambda a: (a.at, a.name))
    steps, i = [], 0
    for n in range(count + 1):
        offset = n * settings.step
        batch = []
        while i < len(pending) and pending[i].at <= offset:
            batch.append(pending[i])
            i += 1
        steps.append((START + offset, batch))
    return steps


def _as_asked(batch: list[Arrival], policy: Policy) -> list[Arrival]:
    """The arrivals as the policy's deployments ask for them (its spec.clusterSpreading)."""
    return [replace(a, cluster_spreading=policy.cluster_spreading) for a in batch]


def _replay(world: World, steps: _Steps, progress: Progress | None) -> World:
    for n, (now, batch) in enumerate(steps):
        world.step(now, _as_asked(batch, world.policy))
        if progress is not None:
            progress(world.policy.name, n + 1, len(steps))
    world.finish()
    return world


def _bound(bound: RelaxedBound, workload: Workload, steps: _Steps) -> tuple[int, ...]:
    """The relaxed bound at each step, over the deployments live then."""
    return tuple(
        bound.at(a for a in workload.arrivals if a.at <= now - START < a.at + a.lifetime)
        for now, _ in steps
    )


def _world(
    fleet: Fleet, policy: Policy, workload: Workload, settings: Settings, matcher: Matcher
) -> World:
    if policy.sees_nodes:
        return NodeLevelWorld(fleet, policy, matcher, settings, START, workload.arrivals)
    return World(fleet, policy, matcher, settings, START)


def simulate(
    fleet: Fleet,
    workload: Workload,
    settings: Settings,
    policies: Sequence[Policy] | None = None,
    progress: Progress | None = None,
) -> Result:
    matcher = default_matcher()
    steps = _steps(workload, settings)
    worlds = {
        policy.name: _replay(_world(fleet, policy, workload, settings, matcher), steps, progress)
        for policy in policies or all_policies()
    }
    clusters = next(iter(worlds.values())).clusters
    bound = _bound(RelaxedBound(fleet, clusters, matcher), workload, steps)
    mean = sum(bound) / len(bound)
    rows = (
        *(policy_row(name, w.samples, w.tally, mean) for name, w in worlds.items()),
        bound_row(bound),
    )
    runs = {name: report.Run(w.samples, w.tally.waits) for name, w in worlds.items()}
    return Result(rows, runs, bound, worlds)
