"""Which shapes a recorded verdict covers, and what a growth claims (capacity/admission.py)."""

from __future__ import annotations

import pytest
from crossplane.function import resource
from modelplane_common.capacity.admission import ADMITTED, OVERCOMMITTED, Record, covers, growth
from modelplane_common.capacity.readers import read_engines
from modelplane_testkit import deployment_builders as t


def shape(*engines: dict):
    return read_engines(resource.dict_to_struct({"engines": list(engines)}))


ADMITTED_AT = shape(t.replica_engine("serve", "p", gpus=8, copies=2))
GANG_AT = shape(t.replica_engine("serve", "p", gpus=8, role="Worker", workers=2))


@pytest.mark.parametrize(
    ("held", "now", "covered"),
    [
        pytest.param(ADMITTED_AT, ADMITTED_AT, True, id="the same shape is covered"),
        pytest.param(
            ADMITTED_AT, shape(t.replica_engine("serve", "p", gpus=8)), True, id="fewer copies"
        ),
        pytest.param(
            ADMITTED_AT,
            shape(t.replica_engine("serve", "p", gpus=4, copies=2)),
            True,
            id="fewer devices per request",
        ),
        pytest.param(
            ADMITTED_AT,
            shape(t.replica_engine("serve", "p", gpus=8, copies=64)),
            False,
            id="more copies is a growth",
        ),
        pytest.param(
            ADMITTED_AT,
            shape(t.replica_engine("serve", "p", gpus=9, copies=2)),
            False,
            id="a larger count is a growth",
        ),
        pytest.param(
            GANG_AT,
            shape(t.replica_engine("serve", "p", gpus=8, role="Worker", workers=3)),
            False,
            id="more worker nodes is a growth",
        ),
        pytest.param(
            ADMITTED_AT,
            shape(t.replica_engine("serve", "q", gpus=8, copies=2)),
            False,
            id="another pool is not covered",
        ),
        pytest.param(
            ADMITTED_AT,
            shape(
                t.replica_engine("serve", "p", gpus=8, copies=2),
                t.replica_engine("extra", "p", gpus=0),
            ),
            False,
            id="a new engine, even without devices, is not covered",
        ),
        pytest.param(
            ADMITTED_AT,
            shape(t.replica_engine("serve", "p", gpus=8, device_class="other")),
            False,
            id="a device class it did not charge is not covered",
        ),
    ],
)
def test_a_verdict_covers_only_a_shape_that_claims_no_more(held, now, covered):
    assert covers(held, now) is covered


@pytest.mark.parametrize(
    ("record", "binds"),
    [
        pytest.param(Record("t", ADMITTED), True, id="a record from before shapes binds any"),
        pytest.param(Record("t", ADMITTED, charged=ADMITTED_AT), False, id="admitted: grown"),
        pytest.param(
            Record("t", OVERCOMMITTED, charged=ADMITTED_AT), True, id="overcommitted: its placement"
        ),
        pytest.param(Record("u", ADMITTED), False, id="another placement"),
    ],
)
def test_a_record_binds_its_placement_and_the_shape_it_charged(record, binds):
    grown = shape(t.replica_engine("serve", "p", gpus=8, copies=3))
    assert record.binds("t", grown) is binds


def test_a_growth_in_copies_claims_only_the_added_copies():
    (extra,) = growth(ADMITTED_AT, shape(t.replica_engine("serve", "p", gpus=8, copies=5)))
    assert extra.copies == 3


def test_a_grown_copy_claims_the_whole_new_engine():
    grown = shape(t.replica_engine("serve", "p", gpus=16, copies=2))
    assert growth(ADMITTED_AT, grown) == grown
