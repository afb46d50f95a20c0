"""Label selectors as the API server reads them (apimachinery LabelSelectorAsSelector)."""

from __future__ import annotations

import pytest
from modelplane_common.selectors import EVERYTHING, parse_label_selector, selects

TEAM_A = {"team": "a", "tier": "prod"}


@pytest.mark.parametrize(
    ("selector", "labels", "selected"),
    [
        pytest.param({}, TEAM_A, True, id="an empty selector selects everything"),
        pytest.param({}, {}, True, id="an empty selector selects an unlabelled namespace"),
        pytest.param({"matchLabels": {"team": "a"}}, TEAM_A, True, id="matchLabels equal"),
        pytest.param({"matchLabels": {"team": "b"}}, TEAM_A, False, id="matchLabels differ"),
        pytest.param({"matchLabels": {"team": "a"}}, {}, False, id="matchLabels key absent"),
        pytest.param(
            {"matchLabels": {"team": "a", "tier": "dev"}},
            TEAM_A,
            False,
            id="every matchLabels entry must hold",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]},
            TEAM_A,
            True,
            id="In one of the values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "In", "values": ["b"]}]},
            TEAM_A,
            False,
            id="In none of the values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["b"]}]},
            TEAM_A,
            True,
            id="NotIn another value",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]},
            TEAM_A,
            False,
            id="NotIn its value",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]},
            {},
            True,
            id="NotIn selects a namespace without the key",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "Exists"}]},
            TEAM_A,
            True,
            id="Exists with the key",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
            TEAM_A,
            False,
            id="Exists without the key",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]},
            TEAM_A,
            True,
            id="DoesNotExist without the key",
        ),
        pytest.param(
            {
                "matchLabels": {"team": "a"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["dev"]}],
            },
            TEAM_A,
            False,
            id="matchLabels and matchExpressions are ANDed",
        ),
        pytest.param(
            {"matchLabels": {"team": ""}}, {"team": ""}, True, id="an empty label value matches"
        ),
    ],
)
def test_selects(selector, labels, selected):
    assert parse_label_selector(selector, "s").matches(labels) is selected


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        pytest.param([], "s: must be an object (got [])", id="not an object"),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "Has"}]},
            's.matchExpressions[0].operator: must be In, NotIn, Exists or DoesNotExist (got "Has")',
            id="an unknown operator",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "In", "values": []}]},
            "s.matchExpressions[0].values: must be non-empty for In (got [])",
            id="In without values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["a"]}]},
            's.matchExpressions[0].values: must be empty for Exists (got ["a"])',
            id="Exists with values",
        ),
        pytest.param(
            {"matchExpressions": [{"operator": "Exists"}]},
            "s.matchExpressions[0].key: must be a non-empty string (got null)",
            id="an expression without a key",
        ),
        pytest.param(
            {"matchLabels": {"team": 7}},
            "s.matchLabels.team: must be a string (got 7)",
            id="a label value that is not a string",
        ),
    ],
)
def test_an_invalid_selector_is_named_not_guessed(selector, message):
    with pytest.raises(ValueError) as err:
        parse_label_selector(selector, "s")
    assert str(err.value) == message


def test_everything_has_no_requirement():
    assert EVERYTHING.requirements == ()


@pytest.mark.parametrize(
    ("match_labels", "labels", "selected"),
    [
        pytest.param({}, TEAM_A, True, id="an empty matchLabels selects everything"),
        pytest.param({}, {}, True, id="an empty matchLabels selects the unlabelled"),
        pytest.param({"team": "a"}, TEAM_A, True, id="one label equal selects"),
        pytest.param({"team": "a", "tier": "prod"}, TEAM_A, True, id="every label equal selects"),
        pytest.param({"team": "b"}, TEAM_A, False, id="a label of another value does not"),
        pytest.param({"team": "a", "tier": "dev"}, TEAM_A, False, id="one label off is enough"),
        pytest.param({"zone": "x"}, TEAM_A, False, id="a label the object lacks does not"),
        pytest.param({"team": ""}, {"team": ""}, True, id="an empty value matches an empty value"),
        pytest.param({"team": ""}, {}, False, id="an empty value does not match absence"),
        pytest.param({"Team": "a"}, TEAM_A, False, id="keys are case-sensitive"),
    ],
)
def test_a_bare_match_labels_selects_as_the_parsed_selector_does(match_labels, labels, selected):
    assert selects(match_labels, labels) is selected
    parsed = parse_label_selector({"matchLabels": match_labels}, "s")
    assert parsed.matches(labels) is selected


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(7, id="a number"),
        pytest.param({"a": "b"}, id="an object"),
        pytest.param(["a"], id="a list"),
        pytest.param(None, id="null"),
    ],
)
def test_a_label_value_that_is_not_a_string_selects_nothing(value):
    assert selects({"team": "a"}, {"team": value}) is False
