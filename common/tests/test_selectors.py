"""Label selectors as the API server reads them (apimachinery LabelSelectorAsSelector)."""

from __future__ import annotations

import pytest
from modelplane_common.selectors import EVERYTHING, parse_label_selector

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
