"""Schema-aware mutation fuzzing of the three functions through RunFunction.

The mutation engine lives in modelplane_testkit.fuzz (its docstring says
what a valid and an invalid mutant is). Two profiles:

    ci    (default)  a fixed, derandomized set of mutants per function, about
                     a minute for the whole module on one core;
    long             MODELPLANE_FUZZ=long, many more random mutants per
                     function: `make fuzz`.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from modelplane_common import labels, nesting
from modelplane_testkit import fuzz

PROFILE = os.environ.get("MODELPLANE_FUZZ", "ci")
MUTANTS = {"ci": 200, "long": 3000}[PROFILE]
HOSTILE = {"ci": 40, "long": 600}[PROFILE]
REPLAYED = {"ci": 60, "long": 600}[PROFILE]
FUNCTIONS = tuple(fuzz.FUNCTION_OF_COMPOSITION.values())
SEEDS = fuzz.seeds()
RUNNERS = fuzz.all_runners()


def fuzz_settings(examples: int):
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=PROFILE == "ci",
        suppress_health_check=list(HealthCheck),
    )


@pytest.mark.parametrize("function", FUNCTIONS)
def test_no_mutant_crashes_a_function_or_drops_running_work_on_invalid_input(function):
    pool = [s for s in SEEDS if s.function == function]
    seen = {"valid": 0, "invalid": 0}

    @fuzz_settings(MUTANTS)
    @given(fuzz.mutants(pool))
    def probe(mutant: fuzz.Mutant) -> None:
        outcome = fuzz.check(mutant, RUNNERS)
        failure = outcome.failure(mutant.invalid)
        assert failure is None, f"{mutant.describe()}: {failure}"
        if mutant.valid or mutant.invalid:
            seen["valid" if mutant.valid else "invalid"] += 1

    probe()
    # The test must exercise both halves, or it proves less than it says.
    assert seen["valid"] > 0 and seen["invalid"] > 0, seen


@pytest.mark.parametrize("function", FUNCTIONS)
def test_no_deeply_nested_or_oversized_value_crashes_a_function_or_drops_running_work(function):
    pool = [s for s in SEEDS if s.function == function]
    seen = {"decoded": 0, "undecodable": 0}

    @fuzz_settings(HOSTILE)
    @given(fuzz.hostile_mutants(pool))
    def probe(mutant: fuzz.Mutant) -> None:
        outcome = fuzz.check(mutant, RUNNERS)
        failure = outcome.failure(invalid=True)
        assert failure is None, f"{mutant.describe()}: {failure}"
        seen["undecodable" if outcome.undecodable else "decoded"] += 1

    probe()
    assert seen["decoded"] > 0, seen


def _scheduler_seed() -> fuzz.Seed:
    """The first deployment seed whose fleet holds a ModelReplica of another deployment."""
    return next(
        s
        for s in SEEDS
        if s.function == "compose-model-deployment"
        and any(b.get("kind") == "ModelReplica" for b in s.fetchable)
    )


def _with_hostile_replica(seed: fuzz.Seed, template: object) -> fuzz.Seed:
    """The seed with one more ModelReplica in the fleet, of another deployment, whose
    first member's pod template is `template`, its charge pending."""
    replica = copy.deepcopy(next(b for b in seed.fetchable if b.get("kind") == "ModelReplica"))
    replica["metadata"]["name"] = "hostile-0"
    replica["metadata"]["namespace"] = "elsewhere"
    # Pending, so a placing pass requires it (a counted one it would not even read).
    replica["metadata"].setdefault("labels", {})[labels.CHARGE] = labels.CHARGE_PENDING
    replica["spec"]["engines"][0]["members"][0]["template"] = template
    return fuzz.Seed(seed.name + "-hostile", seed.function, seed.xr, seed.observed,
                     (*seed.fetchable, replica))  # fmt: skip


@pytest.mark.parametrize(
    "template",
    [
        pytest.param(
            fuzz.nested_map(nesting.MAX_TEMPLATE_DEPTH),
            id="the-deepest-template-a-deployment-accepts",
        ),
        pytest.param(fuzz.nested_map(25), id="the-deepest-template-a-deployment-request-decodes"),
        pytest.param(
            {"spec": {"containers": [{"name": "x", "image": "y" * fuzz.OVERSIZED_STRINGS[-1]}]}},
            id="a-template-holding-a-1-MiB-string",
        ),
    ],
)
def test_the_scheduler_keeps_placing_when_the_fleet_holds_a_hostile_replica(template):
    seed = _scheduler_seed()
    before = fuzz.check(fuzz.Mutant(seed, ()), RUNNERS)
    outcome = fuzz.check(fuzz.Mutant(_with_hostile_replica(seed, template), ()), RUNNERS)
    assert outcome.undecodable is None and outcome.failure(invalid=True) is None, outcome
    assert outcome.fatal is None, outcome.fatal
    after = fuzz.run(_with_hostile_replica(seed, template), RUNNERS[seed.function])
    planned = fuzz.run(seed, RUNNERS[seed.function])
    assert sorted(after.desired.resources) == sorted(planned.desired.resources)
    assert before.fatal is None


def test_a_replica_nested_past_what_protobuf_decodes_cannot_come_from_a_deployment():
    """The poison the VAP and the depth limit keep out (design/tenancy.md, "Nesting"):
    a deployment whose template nests that deep does not even decode as its own request,
    and one that decodes but nests past the limit composes no ModelReplica."""
    seed = _scheduler_seed()
    too_deep = fuzz.nested_map(28)
    poisoned = fuzz.check(fuzz.Mutant(_with_hostile_replica(seed, too_deep), ()), RUNNERS)
    assert poisoned.undecodable and "MaxDepth" in poisoned.undecodable, poisoned
    for levels, decodes in ((28, False), (25, True), (nesting.MAX_TEMPLATE_DEPTH + 1, True)):
        xr = copy.deepcopy(seed.xr)
        xr["spec"]["template"]["spec"]["engines"][0]["members"][0]["template"] = fuzz.nested_map(
            levels
        )
        outcome = fuzz.check(
            fuzz.Mutant(fuzz.Seed("deep", seed.function, xr, {}, seed.fetchable), ()), RUNNERS
        )
        assert (outcome.undecodable is None) == decodes, (levels, outcome.undecodable)
        if decodes:
            rsp = fuzz.run(fuzz.Seed("deep", seed.function, xr, {}, seed.fetchable))
            assert not [n for n in rsp.desired.resources if n.startswith("replica")], sorted(
                rsp.desired.resources
            )


def test_every_seed_runs_clean():
    for seed in SEEDS:
        outcome = fuzz.check(fuzz.Mutant(seed, ()), RUNNERS)
        assert outcome.failure(invalid=True) is None, seed.name
        assert outcome.fatal is None, (seed.name, outcome.fatal)


def test_responses_are_the_same_in_another_process_with_another_hash_seed(tmp_path: Path):
    collected: list[tuple[str, object]] = []
    digests: list[str] = []

    @fuzz_settings(REPLAYED)
    @given(fuzz.mutants(SEEDS))
    def collect(mutant: fuzz.Mutant) -> None:
        outcome = fuzz.check(mutant, RUNNERS)
        if outcome.requests:
            collected.append((mutant.seed.function, outcome.requests[-1]))
            digests.append(outcome.digests[-1])

    collect()
    assert len(collected) >= REPLAYED // 2
    saved = tmp_path / "requests.jsonl"
    fuzz.save(saved, collected)  # type: ignore[arg-type]
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    done = subprocess.run(
        [sys.executable, "-m", "modelplane_testkit.fuzz", "replay", str(saved)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == digests
