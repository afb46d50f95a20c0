"""The e2e suite's ground truth: nodes grouped by free-device vector, most free first.

Pure, so it runs in `make test` too (no e2e marker): the e2e story compares
the real agent's published histograms with it (`fleet.expected_histogram`).
"""

from __future__ import annotations

import pytest
from modelplane_e2e.fleet import histogram

CASES = {
    "one empty pool is one bucket": (
        {"n0": {"gpu": 8}, "n1": {"gpu": 8}},
        ["gpu"],
        [{"free": {"gpu": 8}, "nodes": 2}],
    ),
    "buckets sort most free first": (
        {"n0": {"gpu": 2}, "n1": {"gpu": 8}, "n2": {"gpu": 2}},
        ["gpu"],
        [{"free": {"gpu": 8}, "nodes": 1}, {"free": {"gpu": 2}, "nodes": 2}],
    ),
    "vectors compare in declared device order": (
        {"n0": {"gpu": 4, "nic": 0}, "n1": {"gpu": 3, "nic": 2}},
        ["gpu", "nic"],
        [{"free": {"gpu": 4, "nic": 0}, "nodes": 1}, {"free": {"gpu": 3, "nic": 2}, "nodes": 1}],
    ),
    "a full node is a bucket of zeros": (
        {"n0": {"gpu": 0}},
        ["gpu"],
        [{"free": {"gpu": 0}, "nodes": 1}],
    ),
}


@pytest.mark.parametrize(("free", "order", "expected"), CASES.values(), ids=CASES.keys())
def test_histogram(free, order, expected):
    assert histogram(free, order) == expected
