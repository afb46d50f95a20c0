"""Every example validates against the schemas; every invalid example fails for its reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from modelplane_devtools import render

EXAMPLES = render.ROOT / "examples"
# Not resources: the render case list, and Function packages (no schema offline).
NOT_RESOURCES = {"renders.yaml", "functions.yaml"}
# Not resources either: the invalid examples (checked below) and the simulator's fleet
# and arrival models (examples/sim), which its own reader checks (sim/tests).
NOT_RESOURCE_FOLDERS = {"invalid", "sim"}

VALID = sorted(
    p
    for p in EXAMPLES.rglob("*.yaml")
    if p.name not in NOT_RESOURCES
    and not NOT_RESOURCE_FOLDERS.intersection(p.relative_to(EXAMPLES).parts)
)
INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))


def expected_error(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name} must say what error it expects"
    return first.removeprefix("# expect: ")


@pytest.mark.parametrize("path", VALID, ids=[str(p.relative_to(EXAMPLES)) for p in VALID])
def test_example_validates(path, api_extensions):
    done = render.validate(api_extensions, path)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_example_fails_validation_for_its_reason(path, api_extensions):
    done = render.validate(api_extensions, path)
    assert done.returncode != 0, f"{path.name} validated but must not:\n{done.stdout}"
    assert expected_error(path) in done.stdout + done.stderr


def test_there_are_examples_of_both_kinds():
    assert len(VALID) >= 4
    assert len(INVALID) >= 6
