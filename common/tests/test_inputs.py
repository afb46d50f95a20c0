import math
from datetime import UTC, datetime, timedelta

import pytest
from crossplane.function import resource
from google.protobuf import struct_pb2
from hypothesis import given, settings
from hypothesis import strategies as st
from modelplane_common import inputs
from modelplane_common.inputs import InvalidInput, UnknownValue


@pytest.mark.parametrize(
    ("path", "reason", "value", "line"),
    [
        (
            "spec.nodePools[0].name",
            "must be a DNS label",
            7,
            "spec.nodePools[0].name: must be a DNS label (got 7)",
        ),
        ("spec.mode", "must be one of A, B", "C", 'spec.mode: must be one of A, B (got "C")'),
        ("pods", "must be a count", 3.0, "pods: must be a count (got 3)"),
        ("spec", "must be an object", None, "spec: must be an object (got null)"),
        ("x", "is too long", "a" * 200, 'x: is too long (got "' + "a" * 76 + "...)"),
    ],
    ids=[
        "a number is shown as JSON",
        "a string is quoted",
        "an integral float from the wire is shown as an integer",
        "null is shown as null",
        "a long value is cut to 80 characters",
    ],
)
def test_a_problem_is_one_line_naming_path_reason_and_value(path, reason, value, line):
    assert inputs.problem(path, reason, value) == line


MODES = {
    "an absent mode is the default": ({}, "Observed"),
    "an absent observation is the default": (None, "Observed"),
    "Declared is read as Declared": ({"mode": "Declared"}, "Declared"),
}


@pytest.mark.parametrize(("observation", "mode"), MODES.values(), ids=MODES.keys())
def test_observation_modes_read_under_the_shared_enum_rule(observation, mode):
    assert inputs.observation_mode(observation) == mode


@pytest.mark.parametrize(
    ("observation", "error", "line"),
    [
        (
            {"mode": "Sometimes"},
            UnknownValue,
            'spec.observation.mode: must be one of Observed, Declared (got "Sometimes")',
        ),
        (
            {"mode": "observed"},
            UnknownValue,
            'spec.observation.mode: must be one of Observed, Declared (got "observed")',
        ),
        (
            {"mode": 1},
            UnknownValue,
            "spec.observation.mode: must be one of Observed, Declared (got 1)",
        ),
        ("Observed", InvalidInput, 'spec.observation: must be an object (got "Observed")'),
    ],
    ids=[
        "an unknown mode is unresolved, never a default",
        "case matters: a near miss is unknown too",
        "a number is unknown",
        "an observation that is not an object is invalid",
    ],
)
def test_unknown_or_malformed_enum_values_raise_naming_the_field(observation, error, line):
    with pytest.raises(error) as raised:
        inputs.observation_mode(observation)
    assert str(raised.value) == line


@pytest.mark.parametrize(
    ("observation", "age", "defect"),
    [
        (None, timedelta(minutes=5), None),
        ({"maxAge": "90s"}, timedelta(seconds=90), None),
        (
            {"maxAge": "soon"},
            timedelta(minutes=5),
            "spec.observation.maxAge: not a duration such as 5m, 90s or 1h30m; using 5m "
            '(got "soon")',
        ),
        (
            {"maxAge": "99999999999h"},
            timedelta(minutes=5),
            'spec.observation.maxAge: longer than 2562047h47m16s; using 5m (got "99999999999h")',
        ),
        (
            {"maxAge": "25h"},
            timedelta(minutes=5),
            'spec.observation.maxAge: longer than 24h; using 5m (got "25h")',
        ),
        ({"maxAge": "24h"}, timedelta(hours=24), None),
    ],
    ids=[
        "absent is 5m",
        "a duration is read",
        "a malformed one falls back to 5m and says so",
        "one no clock holds falls back to 5m and says so",
        "one over the 24h maximum falls back to 5m and says so",
        "24h is the longest read as written",
    ],
)
def test_max_age_has_one_default(observation, age, defect):
    assert inputs.max_age(observation) == (age, defect)


CONDITIONS = {
    "a present condition is found": (
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        "True",
    ),
    "a missing condition is Unknown": ({"status": {"conditions": []}}, "Unknown"),
    "conditions that are not a list are Unknown": ({"status": {"conditions": True}}, "Unknown"),
    "a status that is not an object is Unknown": ({"status": "ok"}, "Unknown"),
    "a condition that is not an object is skipped": (
        {"status": {"conditions": ["Ready", {"type": "Ready", "status": "False"}]}},
        "False",
    ),
    "a status word outside True/False is Unknown": (
        {"status": {"conditions": [{"type": "Ready", "status": "yes"}]}},
        "Unknown",
    ),
}


@pytest.mark.parametrize(("obj", "status"), CONDITIONS.values(), ids=CONDITIONS.keys())
def test_condition_lookup_tolerates_every_shape(obj, status):
    assert inputs.condition_status(obj, "Ready") == status


def test_a_condition_time_in_lower_case_parses():
    condition = {"type": "Ready", "lastTransitionTime": "2026-01-01t09:00:00z"}
    assert inputs.condition_since(condition) == datetime(2026, 1, 1, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    ("spec", "lines"),
    [
        (
            {"credentials": {"secretRef": {"namespace": "ops", "name": "kc"}}, "nodePools": []},
            [
                "spec.credentials.secretRef.key: is required (got no value)",
                "spec.nodePools: List should have at least 1 item after validation, not 0 (got [])",
            ],
        ),
        ("east", ['spec: must be an object (got "east")']),
    ],
    ids=["every schema defect is one line, without a URL", "a spec that is not an object"],
)
def test_inference_cluster_specs_are_checked_against_the_xrd(spec, lines):
    assert inputs.inference_cluster_problems(spec) == lines


@pytest.mark.parametrize(
    ("value", "whole"),
    [
        pytest.param(3.0, 3, id="an integral float from the wire is a whole number"),
        pytest.param(7, 7, id="an int is itself"),
        pytest.param(-2.0, -2, id="a negative integral float is a whole number"),
        pytest.param(2.5, None, id="a fraction is not a whole number"),
        pytest.param(True, None, id="a JSON true is not a number although Python's bool is an int"),
        pytest.param("5", None, id="a numeric string is not a number"),
        pytest.param(float("inf"), None, id="infinity is not a whole number"),
        pytest.param(float("nan"), None, id="NaN is not a whole number"),
        pytest.param(
            2.0**63 - 1024, 2**63 - 1024, id="the largest float below 2**63 is a whole number"
        ),
        pytest.param(2.0**63, None, id="2**63 is integral yet outside int64 and stays a float"),
        pytest.param(-(2.0**63), -(2**63), id="-2**63 is the smallest int64 and a whole number"),
        pytest.param(-(2.0**63) - 2048, None, id="below -2**63 is outside int64"),
        pytest.param(1e300, None, id="a huge integral float is not a count"),
    ],
)
def test_whole_number_is_the_one_float_to_int_rule_bounded_by_int64(value, whole):
    assert inputs.whole_number(value) == whole


def test_integral_object_converts_whole_numbers_only_recursively():
    wire = {"a": 8.0, "b": [1.0, 2.5, {"c": 2.0**63}], "d": True, "e": {"f": -3.0}}
    assert inputs.integral_object(wire) == {
        "a": 8,
        "b": [1, 2.5, {"c": 2.0**63}],
        "d": True,
        "e": {"f": -3},
    }
    converted = inputs.integral_object(wire)
    assert isinstance(converted["a"], int) and isinstance(converted["b"][2]["c"], float)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.text(max_size=5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(-(2**70), 2**70).map(float)
    | st.sampled_from([2.0**63, -(2.0**63), -(2.0**63) - 2048, 0.5, -0.0]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=4), JSON, max_size=5))
def test_struct_object_reads_a_struct_as_json_format_and_integral_object_do(document):
    struct = resource.dict_to_struct(document)
    expected = inputs.integral_object(resource.struct_to_dict(struct))
    got = inputs.struct_object(struct)
    assert got == expected
    assert repr(got) == repr(expected)  # the same types too: 8 stays an int, 2.5 a float


@pytest.mark.parametrize(
    "number", [pytest.param(math.inf, id="infinity"), pytest.param(math.nan, id="NaN")]
)
def test_struct_object_refuses_what_no_json_carries_as_json_format_does(number):
    struct = struct_pb2.Struct()
    struct.fields["n"].number_value = number
    with pytest.raises(ValueError):
        resource.struct_to_dict(struct)
    with pytest.raises(ValueError):
        inputs.struct_object(struct)


@pytest.mark.parametrize(
    ("conditions", "found"),
    [
        pytest.param(
            [{"type": "Ready", "status": "True"}],
            {"type": "Ready", "status": "True"},
            id="the condition of that type",
        ),
        pytest.param(
            [{"type": "Synced"}, {"type": "Ready", "status": "False"}, {"type": "Ready"}],
            {"type": "Ready", "status": "False"},
            id="the first of that type",
        ),
        pytest.param([{"type": "Synced"}], {}, id="none of that type is an empty condition"),
        pytest.param("Ready", {}, id="conditions that are not a list have none"),
        pytest.param(
            ["Ready", None, {"type": "Ready", "reason": "X"}],
            {"type": "Ready", "reason": "X"},
            id="entries that are not objects are skipped",
        ),
        pytest.param(None, {}, id="absent conditions have none"),
    ],
)
def test_condition_in_finds_a_condition_by_type_in_any_shape_of_list(conditions, found):
    assert inputs.condition_in(conditions, "Ready") == found
    assert inputs.find_condition({"status": {"conditions": conditions}}, "Ready") == found


HOUR = timedelta(hours=1)


@pytest.mark.parametrize(
    ("raw", "read"),
    [
        (None, (timedelta(minutes=5), None)),
        ("30m", (timedelta(minutes=30), None)),
        ("1h", (HOUR, None)),
        ("0s", (timedelta(), None)),
        ("61m", (HOUR, 'grace: longer than the maximum 1h; using 1h (got "61m")')),
        (
            "99999999999h",
            (HOUR, 'grace: longer than the maximum 1h; using 1h (got "99999999999h")'),
        ),
    ],
    ids=[
        "absent is the default",
        "within the maximum it is read as written",
        "the maximum itself is read as written",
        "zero is zero (the caller decides what zero means)",
        "past the maximum it is the maximum, and says so",
        "past what any clock holds it is the maximum, and says so",
    ],
)
def test_a_bounded_duration_is_clamped_to_its_maximum(raw, read):
    assert inputs.bounded_duration(raw, "grace", default=timedelta(minutes=5), longest=HOUR) == read


def test_a_bounded_duration_that_is_no_duration_is_invalid_input():
    with pytest.raises(inputs.InvalidInput) as raised:
        inputs.bounded_duration("soon", "grace", default=HOUR, longest=HOUR)
    assert str(raised.value) == 'grace: not a duration such as 5m, 90s or 1h30m (got "soon")'
