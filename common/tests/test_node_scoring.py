"""spec.nodeScoring: how a cluster's scheduler scores nodes decides the node class a pod
is assumed to take (modelplane_common.capacity.fit, "Assumed node choice")."""

from __future__ import annotations

import pytest
from modelplane_common.capacity.fit import Ledger, NodeScoring, Reservation
from modelplane_common.capacity.pools import empty_ledger
from modelplane_common.capacity.readers import read_cluster
from modelplane_testkit import deployment_builders as t


def cluster(**spec) -> dict:
    obj = t.cluster("a", [t.pool("p", 2, histogram=[({"gpu": 8}, 1), ({"gpu": 3}, 1)])])
    obj["spec"].update(spec)
    return obj


READ = [
    pytest.param({}, NodeScoring.SPREAD, [], id="absent: Spread, kube-scheduler's default"),
    pytest.param({"nodeScoring": "Pack"}, NodeScoring.PACK, [], id="Pack is read"),
    pytest.param({"nodeScoring": "Spread"}, NodeScoring.SPREAD, [], id="Spread is read"),
    pytest.param(
        {"nodeScoring": "BinPack"},
        NodeScoring.SPREAD,
        ['cluster a: spec.nodeScoring: must be one of Spread, Pack; using Spread (got "BinPack")'],
        id="a value outside the enum is Spread, with one line naming the field and value",
    ),
]


@pytest.mark.parametrize(("spec", "scoring", "notes"), READ)
def test_the_reader_carries_the_node_scoring(spec, scoring, notes):
    read, read_notes = read_cluster(cluster(**spec))
    assert read.node_scoring is scoring
    assert [n for n in read_notes if "nodeScoring" in n] == notes


CHOICE = [
    pytest.param(NodeScoring.SPREAD, (1,), (8,), id="spread: a 1-GPU pod on the emptiest node"),
    pytest.param(NodeScoring.PACK, (1,), (3,), id="pack: a 1-GPU pod on the fullest node it fits"),
    pytest.param(NodeScoring.PACK, (4,), (8,), id="pack: a 4-GPU pod on the only node it fits"),
    pytest.param(NodeScoring.PACK, (0,), (3,), id="a claimless pod: the fullest node either way"),
]


@pytest.mark.parametrize(("scoring", "demand", "node"), CHOICE)
def test_the_assumed_node_follows_the_clusters_scoring(scoring, demand, node):
    ledger = Ledger({(8,): 1, (3,): 1}, (8,), whole_node=False, scoring=scoring)
    assert ledger.place_shared(demand, 1)
    assert ledger.reservations == [Reservation(None, node, demand)]


@pytest.mark.parametrize("scoring", list(NodeScoring))
def test_a_gang_follows_the_clusters_scoring_on_distinct_nodes(scoring):
    ledger = Ledger({(8,): 1, (3,): 2}, (8,), whole_node=False, scoring=scoring)
    assert ledger.place_gang([(1,), (1,)])
    first = (8,) if scoring is NodeScoring.SPREAD else (3,)
    assert ledger.reservations[0].node == first
    assert ledger.copy().scoring is scoring


def test_a_pools_ledger_takes_its_clusters_scoring():
    read, _ = read_cluster(cluster(nodeScoring="Pack"))
    ledger, _ = empty_ledger(read.pools[0], read, t.NOW)
    assert ledger.place_shared((1,), 1)
    assert ledger.reservations[0].node == (3,)
