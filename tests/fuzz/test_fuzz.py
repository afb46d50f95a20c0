"""Schema-aware mutation fuzzing of the three functions through RunFunction.

The mutation engine lives in modelplane_devtools.fuzz (its docstring says
what a valid and an invalid mutant is). Two profiles:

    ci    (default)  a fixed, derandomized set of mutants per function, about
                     a minute for the whole module on one core;
    long             MODELPLANE_FUZZ=long, many more random mutants per
                     function: `make fuzz`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from modelplane_devtools import fuzz

PROFILE = os.environ.get("MODELPLANE_FUZZ", "ci")
MUTANTS = {"ci": 200, "long": 3000}[PROFILE]
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
        [sys.executable, "-m", "modelplane_devtools.fuzz", "replay", str(saved)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == digests
