""".github/workflows/release.yaml: pinned actions, the rehearsed path, and who may sign.

No runner executes the workflow here; these hold the rules design/tooling.md
("Releases") gives it. The path it runs is tested whole by
tests/e2e/test_release.py.
"""

from __future__ import annotations

import re

import yaml
from modelplane_devtools.paths import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "release.yaml"
TEXT = WORKFLOW.read_text()
JOBS = yaml.safe_load(TEXT)["jobs"]
# `uses: owner/repo@<40 hex> # vX.Y.Z`
PINNED = re.compile(r"^\s*(?:- )?uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")


def _steps() -> list[dict]:
    return [step for job in JOBS.values() for step in job["steps"]]


def _runs(job: str) -> str:
    return "\n".join(step.get("run", "") for step in JOBS[job]["steps"])


def test_every_action_is_pinned_by_commit_with_its_release_tag_beside_it():
    lines = [line for line in TEXT.splitlines() if re.match(r"^\s*(?:- )?uses:", line)]
    assert len(lines) == sum("uses" in step for step in _steps())
    assert [line for line in lines if not PINNED.match(line)] == []


def test_the_workflow_runs_on_version_tags_only():
    on = yaml.safe_load(TEXT)[True]  # YAML 1.1 reads the key `on` as true
    assert on == {"push": {"tags": ["v*"]}}


def test_the_tag_is_checked_and_the_dry_run_rehearses_before_the_public_push():
    runs = _runs("publish")
    check = runs.index("modelplane_devtools.release check-tag")
    rehearsal = runs.index("make release-dry-run")
    public = runs.index("modelplane_devtools.release publish")
    assert check < rehearsal < public


def test_only_the_signing_job_can_mint_an_oidc_token():
    assert yaml.safe_load(TEXT)["permissions"] == {}
    assert "id-token" not in JOBS["publish"]["permissions"]
    assert JOBS["sign"]["permissions"]["id-token"] == "write"


def test_signatures_are_in_the_format_crossplanes_verifier_reads():
    runs = _runs("sign")
    for command in ("cosign sign ", "cosign attest "):
        (line,) = [line for line in runs.splitlines() if command in line]
        assert "--new-bundle-format=false" in line, line
