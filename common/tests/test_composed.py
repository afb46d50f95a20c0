"""An observed composed Object, read once: malformed evidence reads as not ready, nothing seen."""

from __future__ import annotations

import pytest
from modelplane_common.composed import ObservedObject, observed_object

BODY = {"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object", "spec": {"x": 1}}


def with_status(status: object) -> dict:
    return {**BODY, "status": status}


CASES = [
    pytest.param(
        with_status(
            {
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "Synced", "status": "True"},
                ],
                "atProvider": {"manifest": {"kind": "Deployment"}},
            }
        ),
        ObservedObject(BODY, True, True, "", {"kind": "Deployment"}),
        id="applied and Ready: its remote object with it",
    ),
    pytest.param(
        with_status(
            {"conditions": [{"type": "Synced", "status": "False", "message": "forbidden"}]}
        ),
        ObservedObject(BODY, False, False, "forbidden"),
        id="Synced False: the provider's message kept",
    ),
    pytest.param(BODY, ObservedObject(BODY, False, None), id="no status yet: no Synced, not ready"),
    pytest.param(
        with_status({"conditions": "Ready", "atProvider": {"manifest": {}}}),
        ObservedObject(BODY, False, None),
        id="unreadable conditions and an empty remote read as nothing seen",
    ),
    pytest.param(
        with_status(["not", "a", "map"]),
        ObservedObject(BODY, False, None),
        id="a status that is not a map reads as none",
    ),
]


@pytest.mark.parametrize(("observed", "expected"), CASES)
def test_observed_object(observed, expected):
    assert observed_object(observed) == expected
