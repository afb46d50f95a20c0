"""The fleet-scale run's reduced profile on the e2e session's stack (`profile.REDUCED`).

One workload cluster (the session's, with its agent), both arms side by
side on 20 nodes each, 10 deployments per arm over 45 s, then until it
converges (at most 420 s: a replica whose pod lost a race is re-placed only
after its 1m grace period, and a loaded machine composes slowly; a quiet
run converges within a minute). `make e2e-scale` runs the full profile on its
own stack.
What must hold whatever the machine's load:

- on the Observed arm the model itself makes no pod that never binds (a cause
  of `the model`, as `modelplane_e2e.scale.analysis` defines it:
  the observation was current and nothing else moved in the pool);
- on the Observed arm every replica admitted for its current placement has
  all its pods bound by the end (one that lost a race has been healed by
  then), no pod is left pending, and the arm converges (the
  Declared arm's whole-node fallback cannot see the background load, so its
  over-promised pods are measured, not asserted);
- the table is produced, for both arms, and each placed some replicas.
"""

from __future__ import annotations

import time

import pytest
from modelplane_devtools.paths import ROOT
from modelplane_e2e.kube import Kube, eventually
from modelplane_e2e.scale import analysis, profile, run

pytestmark = pytest.mark.e2e


def leave_nothing_behind(control: Kube, workload: Kube) -> None:
    """Remove the deployments, then the clusters and the background: the story's
    deployment, which selects every cluster, must not find these."""
    for arm in profile.ARMS:
        control.kubectl(
            "delete", "modeldeployments.modelplane.ai", "--all", "-n", profile.team(arm),
            "--wait=false",
        )  # fmt: skip
    eventually(
        lambda: (
            not any(
                control.list("modelreplicas.modelplane.ai", profile.team(arm))
                for arm in profile.ARMS
            )
        ),
        "the run's ModelReplicas gone",
        timeout=240,
    )
    for arm in profile.ARMS:
        control.delete("inferencecluster", profile.cluster_name(arm, 0))
    eventually(
        lambda: (
            not any(
                control.get("inferencecluster", profile.cluster_name(arm, 0))
                for arm in profile.ARMS
            )
        ),
        "the run's InferenceClusters gone",
        timeout=240,
    )
    workload.kubectl("delete", "pods", "--all", "-n", profile.BACKGROUND, "--wait=false")


def test_a_reduced_fleet_scale_run_binds_what_it_places_and_the_model_misses_nothing(
    e2e_stack, planes
):
    control, workload = planes
    out = ROOT / "out" / "scale" / f"{time.strftime('%Y%m%d-%H%M%S')}-reduced"
    try:
        assert e2e_stack.provider is not None
        outcome = run.run(e2e_stack, [workload], [e2e_stack.provider], profile.REDUCED, out)
    finally:
        leave_nothing_behind(control, workload)

    assert (outcome.folder / "table.md").read_text() == outcome.table
    assert set(outcome.figures) == set(profile.ARMS), outcome.table
    observed = outcome.figures[profile.OBSERVED]
    assert observed.never_bound[analysis.MODEL] == 0, outcome.table
    assert not observed.admitted_unbound, f"{observed.admitted_unbound}\n{outcome.table}"
    assert observed.pending_at_end == 0, outcome.table
    unconverged = [u for u in outcome.unconverged if u.startswith(profile.OBSERVED)]
    assert not unconverged, f"not converged: {unconverged}\n{outcome.table}"
    for figures in outcome.figures.values():
        assert figures.replicas_placed > 0, outcome.table
