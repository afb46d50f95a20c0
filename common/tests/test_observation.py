"""The one definition of a valid histogram, rule by rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from modelplane_common.observation import (
    MAX_BUCKETS,
    Blind,
    DeviceKinds,
    Histogram,
    NotReported,
    Observation,
    Rejected,
    growable_nodes,
    parse_observation,
)

GPU_AND_NIC = DeviceKinds.from_declared(
    [
        {"name": "gpu", "claim": "DRA", "count": 8},
        {"name": "nic", "count": 2},
        {"name": "nvlink", "claim": "Synthetic", "count": 1},
    ]
)
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def report(**overrides):
    status = {
        "observedAt": "2026-11-29T11:59:00Z",
        "observedNodes": 4,
        "nodesByFreeDevices": [{"free": {"gpu": 8, "nic": 2}, "nodes": 2}],
    }
    status.update(overrides)
    return status


def test_synthetic_kinds_are_never_observed():
    assert GPU_AND_NIC.names == ("gpu", "nic")
    assert GPU_AND_NIC.per_node == (8, 2)


ACCEPTED = {
    "a well-formed report is accepted": (
        report(),
        Histogram((((8, 2), 2),)),
    ),
    "integral floats from a protobuf Struct are counts": (
        report(observedNodes=4.0, nodesByFreeDevices=[{"free": {"gpu": 8.0}, "nodes": 2.0}]),
        Histogram((((8, 0), 2),)),
    ),
    "a missing device key reads as zero free": (
        report(nodesByFreeDevices=[{"free": {"nic": 1}, "nodes": 1}]),
        Histogram((((0, 1), 1),)),
    ),
    "duplicate vectors merge and buckets sort most-free first": (
        report(
            nodesByFreeDevices=[
                {"free": {"gpu": 1, "nic": 0}, "nodes": 1},
                {"free": {"gpu": 8, "nic": 2}, "nodes": 1},
                {"free": {"gpu": 1}, "nodes": 2},
            ]
        ),
        Histogram((((8, 2), 1), ((1, 0), 3))),
    ),
    "an empty histogram means no schedulable node": (
        report(nodesByFreeDevices=[]),
        Histogram(()),
    ),
    "cordoned nodes make the histogram smaller than observedNodes": (
        report(observedNodes=10),
        Histogram((((8, 2), 2),)),
    ),
}


@pytest.mark.parametrize(("status", "histogram"), ACCEPTED.values(), ids=ACCEPTED.keys())
def test_accepted_reports(status, histogram):
    parsed = parse_observation(status, GPU_AND_NIC)
    assert isinstance(parsed, Observation), parsed
    assert parsed.histogram == histogram
    assert parsed.observed_at == datetime(2026, 11, 29, 11, 59, tzinfo=UTC)


REJECTED = {
    "a negative free count is rejected": (
        report(nodesByFreeDevices=[{"free": {"gpu": -1}, "nodes": 1}]),
        "nodesByFreeDevices[0].free.gpu: must be a non-negative count (got -1)",
    ),
    "more free than the pool declares per node is rejected": (
        report(nodesByFreeDevices=[{"free": {"gpu": 9}, "nodes": 1}]),
        "nodesByFreeDevices[0].free.gpu: above the 8 declared per node (got 9)",
    ),
    "an unknown device key is rejected": (
        report(nodesByFreeDevices=[{"free": {"tpu": 1}, "nodes": 1}]),
        'nodesByFreeDevices[0].free: names an undeclared device kind (got "tpu")',
    ),
    "a synthetic device key is rejected, since synthetic kinds are never observed": (
        report(nodesByFreeDevices=[{"free": {"nvlink": 1}, "nodes": 1}]),
        'nodesByFreeDevices[0].free: names an undeclared device kind (got "nvlink")',
    ),
    "more nodes in the histogram than observed is rejected": (
        report(observedNodes=1),
        "nodesByFreeDevices: counts more nodes than the 1 observed (got 2)",
    ),
    "more buckets than the bound is rejected": (
        report(
            observedNodes=MAX_BUCKETS + 1,
            nodesByFreeDevices=[{"free": {"gpu": 1}, "nodes": 1}] * (MAX_BUCKETS + 1),
        ),
        f"nodesByFreeDevices: more than {MAX_BUCKETS} buckets (got {MAX_BUCKETS + 1})",
    ),
    "a malformed observedAt is rejected": (
        report(observedAt="yesterday"),
        'observedAt: not an RFC 3339 time (got "yesterday")',
    ),
    "an observedAt without a zone is rejected": (
        report(observedAt="2026-11-29T11:59:00"),
        'observedAt: not an RFC 3339 time (got "2026-11-29T11:59:00")',
    ),
    "a bucket of zero nodes is rejected": (
        report(nodesByFreeDevices=[{"free": {"gpu": 1}, "nodes": 0}]),
        "nodesByFreeDevices[0].nodes: must be a positive count (got 0)",
    ),
    "a fractional count is rejected": (
        report(nodesByFreeDevices=[{"free": {"gpu": 1.5}, "nodes": 1}]),
        "nodesByFreeDevices[0].free.gpu: must be a non-negative count (got 1.5)",
    ),
    "a boolean is not a count": (
        report(observedNodes=True),
        "observedNodes: must be a count of nodes (got true)",
    ),
    "a missing observedNodes is rejected": (
        {"observedAt": "2026-11-29T11:59:00Z", "nodesByFreeDevices": []},
        "observedNodes: must be a count of nodes (got null)",
    ),
}


@pytest.mark.parametrize(("status", "defect"), REJECTED.values(), ids=REJECTED.keys())
def test_rejected_reports(status, defect):
    parsed = parse_observation(status, GPU_AND_NIC)
    assert isinstance(parsed, Rejected), parsed
    assert defect in parsed.message


def test_every_defect_is_listed_not_just_the_first():
    parsed = parse_observation(
        report(observedAt="bad", nodesByFreeDevices=[{"free": {"gpu": 99, "tpu": 1}, "nodes": 1}]),
        GPU_AND_NIC,
    )
    assert isinstance(parsed, Rejected)
    assert len(parsed.defects) == 3


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (None, NotReported),
        ({}, NotReported),
        ({"conditions": [{"type": "Observing", "status": "True"}]}, NotReported),
        (
            report(conditions=[{"type": "Observing", "status": "False", "reason": "NoRBAC"}]),
            Blind,
        ),
    ],
    ids=[
        "no status means the agent has not reported",
        "an empty status means the agent has not reported",
        "conditions without counts are not a report",
        "Observing=False means the agent is blind, whatever counts remain",
    ],
)
def test_unobserved_reports(status, outcome):
    assert isinstance(parse_observation(status, GPU_AND_NIC), outcome)


FRESHNESS = {
    "an observation younger than maxAge is fresh": (timedelta(minutes=4), True),
    "an observation exactly maxAge old is still fresh": (timedelta(minutes=5), True),
    "an observation older than maxAge is stale": (timedelta(minutes=5, seconds=1), False),
    "an observation slightly ahead of our clock is fresh": (timedelta(seconds=-30), True),
    "an observation far ahead of our clock is stale": (timedelta(minutes=-6), False),
}


@pytest.mark.parametrize(("age", "fresh"), FRESHNESS.values(), ids=FRESHNESS.keys())
def test_freshness(age, fresh):
    observation = Observation(NOW - age, 1, Histogram(()))
    assert observation.is_fresh(NOW, timedelta(minutes=5)) is fresh


STALENESS = {
    "a fresh observation has no staleness": (timedelta(minutes=1), None),
    "an old observation is older than maxAge": (timedelta(minutes=6), "older than 5m"),
    "an observation far ahead says it is in the future": (
        timedelta(minutes=-6),
        "in the future, more than 5m ahead of the control plane's clock (check the agent's clock)",
    ),
    "an observation in year 9999 says it is in the future": (
        NOW - datetime(9999, 12, 31, tzinfo=UTC),
        "in the future, more than 5m ahead of the control plane's clock (check the agent's clock)",
    ),
}


@pytest.mark.parametrize(("age", "words"), STALENESS.values(), ids=STALENESS.keys())
def test_staleness_says_why(age, words):
    observation = Observation(NOW - age, 1, Histogram(()))
    assert observation.staleness(NOW, timedelta(minutes=5)) == words


@pytest.mark.parametrize(
    ("nodes", "observed", "growable"),
    [(20, 16, 4), (16, 16, 0), (16, 18, 0)],
    ids=[
        "a pool below its maximum can grow by the difference",
        "a pool at its maximum cannot grow",
        "a surge upgrade above the maximum clamps growth to zero",
    ],
)
def test_growable_nodes(nodes, observed, growable):
    assert growable_nodes(nodes, observed) == growable


def test_wire_form_writes_every_dra_key():
    parsed = parse_observation(
        report(nodesByFreeDevices=[{"free": {"nic": 1}, "nodes": 1}]), GPU_AND_NIC
    )
    assert isinstance(parsed, Observation)
    assert parsed.to_wire(GPU_AND_NIC) == {
        "observedAt": "2026-11-29T11:59:00Z",
        "observedNodes": 4,
        "nodesByFreeDevices": [{"free": {"gpu": 0, "nic": 1}, "nodes": 1}],
    }


NOT_CURRENT = {
    "type": "Current",
    "status": "False",
    "reason": "WatchFailing",
    "message": "ResourceClaim watch failing since 2026-11-29T11:54:00Z: ApiError: forbidden",
}
FROZEN = {
    "a report frozen a minute ago is used, as of its observedAt": (
        "2026-11-29T11:59:00Z",
        None,
    ),
    "a report frozen longer than maxAge is stale": ("2026-11-29T11:54:00Z", "older than 5m"),
}


@pytest.mark.parametrize(("observed_at", "stale"), FROZEN.values(), ids=FROZEN.keys())
def test_a_report_the_agent_says_is_not_current_is_judged_by_its_observed_at(observed_at, stale):
    # The agent freezes observedAt while a watch fails (design/agent.md, "Freshness") and
    # says so in its Current condition; readers need nothing but observedAt for it.
    status = report(
        observedAt=observed_at,
        conditions=[{"type": "Observing", "status": "True", "reason": "Observed"}, NOT_CURRENT],
    )
    parsed = parse_observation(status, GPU_AND_NIC)
    assert isinstance(parsed, Observation)
    assert parsed.staleness(NOW, timedelta(minutes=5)) == stale


@pytest.mark.parametrize(
    ("declared", "observed_nodes", "defect"),
    [
        pytest.param(4, 4, None, id="a pool reporting its declared nodes is believed"),
        pytest.param(4, 5, None, id="one node of surge above four declared is believed"),
        pytest.param(
            4,
            6,
            "observedNodes: more than the pool's 4 declared node(s) plus a surge margin of 1 "
            "(got 6)",
            id="two nodes above four declared is rejected naming both counts",
        ),
        pytest.param(40, 44, None, id="ten percent of surge above forty declared is believed"),
        pytest.param(
            40,
            45,
            "observedNodes: more than the pool's 40 declared node(s) plus a surge margin of 4 "
            "(got 45)",
            id="more than ten percent above forty declared is rejected",
        ),
        pytest.param(
            0,
            2,
            "observedNodes: more than the pool's 0 declared node(s) plus a surge margin of 1 "
            "(got 2)",
            id="a pool declared empty may surge by one node only",
        ),
    ],
)
def test_observed_nodes_beyond_the_declared_pool_and_its_surge_are_rejected(
    declared, observed_nodes, defect
):
    status = report(observedNodes=observed_nodes, nodesByFreeDevices=[])
    parsed = parse_observation(status, GPU_AND_NIC, declared=declared)
    if defect is None:
        assert isinstance(parsed, Observation), parsed
    else:
        assert isinstance(parsed, Rejected), parsed
        assert parsed.defects == (defect,)


def test_a_histogram_promising_phantom_nodes_is_rejected_with_every_defect():
    status = report(observedNodes=1000, nodesByFreeDevices=[{"free": {"gpu": 8}, "nodes": 1000}])
    parsed = parse_observation(status, GPU_AND_NIC, declared=8)
    assert isinstance(parsed, Rejected), parsed
    assert parsed.defects == (
        "observedNodes: more than the pool's 8 declared node(s) plus a surge margin of 1 "
        "(got 1000)",
    )


CEILINGS = {
    "beyond the declared nodes plus the margin: the histogram is a ceiling": (
        report(observedNodes=6),
        True,
    ),
    "a histogram of more nodes than observed: a ceiling": (
        report(nodesByFreeDevices=[{"free": {"gpu": 8}, "nodes": 5}]),
        True,
    ),
    "a malformed bucket beside the bound: no ceiling": (
        report(observedNodes=6, nodesByFreeDevices=[{"free": {"gpu": 9}, "nodes": 1}]),
        False,
    ),
    "an unreadable observedAt: no ceiling": (report(observedAt="soon", observedNodes=6), False),
}


@pytest.mark.parametrize(("status", "has_ceiling"), CEILINGS.values(), ids=CEILINGS.keys())
def test_only_a_well_formed_report_breaking_a_node_count_bound_carries_a_ceiling(
    status, has_ceiling
):
    parsed = parse_observation(status, GPU_AND_NIC, declared=4)
    assert isinstance(parsed, Rejected)
    assert (parsed.ceiling is not None) == has_ceiling
