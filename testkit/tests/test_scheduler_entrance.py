"""Outside code reaches compose-model-deployment through its entrance only, and the test
kit's `schedule` runs the phases production runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from modelplane_testkit import deployment_builders as t

ROOT = Path(__file__).resolve().parents[2]


def _unreadable_replica() -> dict:
    replica = t.running_replica(0, "a")
    del replica["spec"]["clusterName"]
    return replica


@pytest.mark.parametrize(
    ("clusters", "own", "reason"),
    [
        pytest.param([], {}, "NoClusters", id="no cluster selected"),
        pytest.param(
            [t.cluster("a", [t.pool("p", 1)])],
            {"replica-0": _unreadable_replica()},
            "InvalidReplica",
            id="one of its replicas cannot be read",
        ),
    ],
)
def test_a_pass_that_plans_nothing_fails_the_test_naming_its_reason(clusters, own, reason):
    with pytest.raises(t.NothingPlanned, match=reason):
        t.schedule(t.deployment(), clusters, own)


def _lint(source: str, path: str) -> subprocess.CompletedProcess[str]:
    """The repository's ruff configuration applied to `source` as if it were `path`."""
    return subprocess.run(
        ["ruff", "check", "--no-cache", "--select", "TID251", "--stdin-filename", path, "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


@pytest.mark.parametrize(
    ("source", "path", "refused"),
    [
        pytest.param(
            "from compose_model_deployment import placement\n",
            "tests/property/x.py",
            True,
            id="a test importing an internal module is refused",
        ),
        pytest.param(
            "from compose_model_deployment.readers import read_deployment\n",
            "sim/src/modelplane_sim/x.py",
            True,
            id="the simulator importing from an internal module is refused",
        ),
        pytest.param(
            "from compose_model_deployment import decide, plan\n",
            "tests/property/x.py",
            False,
            id="the entrance is allowed",
        ),
        pytest.param(
            "from compose_model_deployment import placement\n",
            "functions/compose-model-deployment/src/compose_model_deployment/x.py",
            False,
            id="the package itself uses its modules",
        ),
    ],
)
def test_lint_keeps_outside_code_off_the_schedulers_internal_modules(source, path, refused):
    result = _lint(source, path)
    assert ("TID251" in result.stdout) is refused, result.stdout + result.stderr
