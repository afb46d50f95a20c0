"""The metrics accept exactly the condition types and reasons design/api.md documents.

`modelplane_common.metrics` counts a condition under its type and reason only
when they are in its fixed sets (anything else is `Other`, so a label never
carries an unbounded string). Those sets must be the contract's: a reason
added to design/api.md and not to the metrics would be counted as `Other`.
"""

from __future__ import annotations

import re

from modelplane_common import metrics
from modelplane_devtools.paths import ROOT

CONTRACT = (ROOT / "design" / "api.md").read_text()
NAME = re.compile(r"`([A-Z][A-Za-z]+)`")
STATUS_REASON = re.compile(r"(?:True|False|Unknown)[^|]*/")


def _condition_rows() -> list[tuple[str, str]]:
    """(type cell, status / reason cell) of every row of a conditions table."""
    rows = []
    for line in CONTRACT.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) >= 5 and STATUS_REASON.search(cells[2]):
            rows.append((cells[1], cells[2]))
    return rows


def test_the_metrics_accept_every_reason_of_the_contract_and_no_other():
    documented = {r for _, cell in _condition_rows() for r in NAME.findall(cell)}
    assert documented == metrics.REASONS


def test_the_metrics_accept_every_condition_type_of_the_contract_and_no_other():
    documented = {t for cell, _ in _condition_rows() for t in NAME.findall(cell)}
    assert documented == metrics.CONDITION_TYPES
