"""docs/operating.md names only reasons the code writes, and every one the contract lists."""

from __future__ import annotations

import re

import pytest
from modelplane_devtools.paths import ROOT

GUIDE = (ROOT / "docs" / "operating.md").read_text()
SOURCES = [
    p
    for folder in ("agent/src", "common/src", "functions")
    for p in (ROOT / folder).rglob("*.py")
    if "/tests/" not in str(p)
]
CODE = "\n".join(p.read_text() for p in SOURCES)
# Crossplane's own reasons for the Ready condition it writes (design/readiness.md).
CROSSPLANE = {"Creating", "Available"}
# `Type=Status/Reason` and `Type=Status/ReasonA|ReasonB` as the guide and the contract write them.
CONDITION = re.compile(r"`[A-Za-z]+=(?:True|False|Unknown)/([A-Za-z|]+)`")


def _reasons(text: str) -> set[str]:
    return {r for match in CONDITION.findall(text) for r in match.split("|")}


@pytest.mark.parametrize("reason", sorted(_reasons(GUIDE) - CROSSPLANE))
def test_every_reason_the_guide_names_is_written_by_the_code(reason):
    assert f'"{reason}"' in CODE, f"docs/operating.md names {reason}, which no code writes"


# Reasons that mean all is well, which need no fix; and one only an older agent writes.
HEALTHY = {
    "AllPodsBound", "AllPodsScheduled", "AllPoolsObserved", "AllReplicasReady",
    "AllReplicasScheduled", "AllWorkloadsReady", "Available", "ScaledToZero", "ValidSpec",
    "WatchesCurrent", "HistogramTooLarge", "Admitted", "Composed", "InputsValid", "Observed",
    "Created",
}  # fmt: skip
# Condition types the contract names inside a condition cell.
TYPES = {"WorkloadsReady"}


def _contract_reasons() -> set[str]:
    """Every reason in a condition cell of design/api.md (`True/`X`, `Y``...)."""
    found = set()
    for line in (ROOT / "design" / "api.md").read_text().splitlines():
        for cell in line.split("|"):
            if re.search(r"(True|False|Unknown)/`", cell):
                found.update(re.findall(r"`([A-Z][A-Za-z]+)`", cell))
    return found


def test_the_contract_lists_reasons_the_guide_can_be_checked_against():
    assert {"InsufficientCapacity", "Overcommitted", "WatchSilent"} <= _contract_reasons()


@pytest.mark.parametrize("reason", sorted(_contract_reasons() - HEALTHY - TYPES))
def test_every_reason_of_the_contract_that_needs_a_fix_is_in_the_guide(reason):
    assert f"`{reason}`" in GUIDE or reason in _reasons(GUIDE), (
        f"design/api.md lists {reason}: say in docs/operating.md what it means and the fix"
    )
