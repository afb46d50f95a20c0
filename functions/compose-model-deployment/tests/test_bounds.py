"""Durations past their maximum, through RunFunction: never a Fatal, never a longer hold.

design/robustness.md ("Durations"), design/tenancy.md ("No phantom reservations").
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from compose_model_deployment import fn
from compose_model_deployment.model import LONGEST_HEALING
from modelplane_common import inputs, pods_created
from modelplane_common.timeutil import format_duration
from modelplane_testkit import deployment_builders as t
from modelplane_testkit import wire
from modelplane_testkit.wire import conditions, desired

MATCHER = fn.default_matcher()
FULL = {"gpu": 8}
# Longer than Go's time.Duration (and Python's timedelta) can hold.
NO_CLOCK_HOLDS = "99999999999h"


def run(req):
    return fn.run_function(req, t.NOW, MATCHER)


def fleet(max_age_of_b: str) -> list[dict]:
    return [
        t.cluster("a", [t.pool("p", 2, histogram=[(FULL, 2)])], cluster_labels={"tier": "1"}),
        t.cluster(
            "b",
            [t.pool("p", 2, histogram=[(FULL, 2)])],
            cluster_labels={"tier": "1"},
            max_age=max_age_of_b,
        ),
    ]


def fatal(rsp) -> list[str]:
    return [m for s, m in wire.events(rsp) if s == "Fatal"]


@pytest.mark.parametrize(
    ("max_age", "why"),
    [
        (NO_CLOCK_HOLDS, "longer than 2562047h47m16s"),
        ("48h", "longer than 24h"),
    ],
    ids=["a maxAge no clock holds", "a maxAge over its 24h maximum"],
)
def test_one_clusters_bad_max_age_stops_no_deployment_and_reads_as_5m(max_age, why):
    xr = t.deployment(replicas=4, match_labels={"tier": "1"})
    rsp = run(t.request(xr, fleet(max_age), [], {}))
    assert fatal(rsp) == []
    assert sorted(r["spec"]["clusterName"] for r in desired(rsp).values()) == ["a", "a", "b", "b"]
    line = f'cluster b: spec.observation.maxAge: {why}; using 5m (got "{max_age}")'
    assert line in conditions(rsp)[fn.INPUTS][2]
    assert ("Warning", line) in wire.events(rsp)


GRACES = ["unschedulableGracePeriod", "missingClusterGracePeriod", "missingPodsGracePeriod"]


@pytest.mark.parametrize("value", ["100000h", NO_CLOCK_HOLDS], ids=["100000h", "99999999999h"])
@pytest.mark.parametrize("field", GRACES)
def test_a_grace_longer_than_the_platforms_hour_reads_as_one_hour_and_says_so(field, value):
    xr = t.deployment(replicas=1, match_labels={"tier": "1"}, healing={field: value})
    rsp = run(t.request(xr, fleet("5m"), [], {}))
    assert fatal(rsp) == []
    line = f'spec.healing.{field}: longer than the maximum 1h; using 1h (got "{value}")'
    assert line in conditions(rsp)[fn.INPUTS][2]
    assert ("Warning", line) in wire.events(rsp)
    (replica,) = desired(rsp).values()
    expected = "1h" if field == "missingPodsGracePeriod" else "5m"
    assert replica["spec"]["missingPodsGracePeriod"] == expected


def test_avoid_for_past_its_day_reads_as_one_day_and_says_so():
    xr = t.deployment(replicas=1, match_labels={"tier": "1"}, healing={"avoidFor": NO_CLOCK_HOLDS})
    rsp = run(t.request(xr, fleet("5m"), [], {}))
    assert fatal(rsp) == []
    line = f'spec.healing.avoidFor: longer than the maximum 24h; using 24h (got "{NO_CLOCK_HOLDS}")'
    assert line in conditions(rsp)[fn.INPUTS][2]


def unschedulable_for(minutes: float) -> dict:
    return t.running_replica(
        0,
        "a",
        pods_scheduled="False",
        reason="Unschedulable",
        since=t.ago(minutes),
        ready=False,
        placed_at=t.ago(120),
    )


@pytest.mark.parametrize(
    ("minutes", "cluster"),
    [(59, "a"), (61, "b")],
    ids=[
        "unschedulable for 59m under a 100000h grace it stays",
        "unschedulable for 61m under a 100000h grace it is re-placed: the hold ends at 1h",
    ],
)
def test_an_unschedulable_replica_holds_its_place_at_most_an_hour(minutes, cluster):
    xr = t.deployment(
        replicas=1, match_labels={"tier": "1"}, healing={"unschedulableGracePeriod": "100000h"}
    )
    rsp = run(t.request(xr, fleet("5m"), [], {"replica-0": unschedulable_for(minutes)}))
    assert desired(rsp)["replica-0"]["spec"]["clusterName"] == cluster


ROOT = Path(__file__).resolve().parents[3]


def xrd_rule(kind: str, *path: str) -> str:
    """The x-kubernetes-validations rule of one field of an XRD's spec."""
    definition = yaml.safe_load((ROOT / "apis" / kind / "definition.yaml").read_text())
    node = definition["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for step in path:
        node = node["properties"][step]
    (rule,) = node["x-kubernetes-validations"]
    return rule["rule"]


@pytest.mark.parametrize(
    ("kind", "path", "longest"),
    [
        *[("modeldeployment", ("healing", f), LONGEST_HEALING[f]) for f in LONGEST_HEALING],
        ("modelreplica", ("missingPodsGracePeriod",), pods_created.LONGEST_GRACE),
        ("inferencecluster", ("observation", "maxAge"), inputs.LONGEST_MAX_AGE),
    ],
    ids=lambda v: ".".join(v) if isinstance(v, tuple) else str(v),
)
def test_the_api_server_refuses_what_the_readers_clamp(kind, path, longest):
    assert xrd_rule(kind, *path) == f"duration(self) <= duration('{format_duration(longest)}')"
