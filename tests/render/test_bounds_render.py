"""Bounds on counts through the real CLI (design/tenancy.md, "Bounds on counts").

A namespace already holding 256 replicas in flight (labelled
`modelplane.ai/charge=pending`, none claiming a device, so no device quota
refuses them) gets no new replica: its deployment places nothing, and says
which label, count and bound held it back. Another namespace is not held
back by them.
"""

from __future__ import annotations

from modelplane_common import labels
from modelplane_devtools import render
from modelplane_testkit import deployment_builders as t
from modelplane_testkit.rendered import by_kind, composite, condition

DEPLOYMENT = render.ROOT / "apis/modeldeployment/composition.yaml"
BOUND = 256


def east() -> dict:
    cluster = t.cluster(
        "east", [t.pool("h100", 4, histogram=[({"gpu": 8}, 4)], observed_at="__NOW-10s__")]
    )
    cluster["status"]["providerConfigRef"] = {"name": "east"}
    return cluster


def in_flight(namespace: str) -> list[dict]:
    """BOUND pending replicas of one zero-device deployment of `namespace`, labelled as
    their deployment labels them (the CLI answers the pending requirement by label)."""
    replicas = [
        t.model_replica(
            f"many-{i}",
            namespace,
            "east",
            [t.replica_engine("serve", "h100", gpus=0)],
            deployment_name="many",
            index=i,
        )
        for i in range(BOUND)
    ]
    for replica in replicas:
        replica["metadata"].setdefault("labels", {})[labels.CHARGE] = labels.CHARGE_PENDING
    return replicas


def test_a_namespace_at_its_in_flight_bound_gets_no_new_replica_and_is_told_why(functions):
    xr = t.deployment("llm", "team-a", replicas=2, engines=[t.standalone(gpus=8)])
    rendered = functions.render(
        xr, DEPLOYMENT, required=[east(), t.namespace("team-a"), *in_flight("team-a")]
    )
    assert by_kind(rendered, "ModelReplica") == []
    inputs = condition(composite(rendered), "InputsValid")
    assert (inputs["status"], inputs["reason"]) == ("False", "DegradedInputs")
    assert (
        "modelplane.ai/charge=pending: namespace team-a holds 256 replicas in flight, "
        "at most 256 may be: no new replica is placed until some are counted"
    ) in inputs["message"]


def test_another_namespaces_replicas_in_flight_do_not_hold_it_back(functions):
    xr = t.deployment("llm", "team-a", replicas=2, engines=[t.standalone(gpus=8)])
    rendered = functions.render(
        xr, DEPLOYMENT, required=[east(), t.namespace("team-a"), *in_flight("team-b")]
    )
    assert len(by_kind(rendered, "ModelReplica")) == 2
