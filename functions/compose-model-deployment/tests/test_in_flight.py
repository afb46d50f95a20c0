"""Bounds on new replicas: a namespace's in-flight replicas, and the fleet's pending set
that every placing pass reads (in_flight.py, design/tenancy.md "Bounds on counts")."""

from __future__ import annotations

import pytest
from compose_model_deployment import fn
from compose_model_deployment.in_flight import MAX_IN_FLIGHT_PER_NAMESPACE, MAX_PENDING_READ
from modelplane_testkit import deployment_builders as t
from modelplane_testkit import wire


def cluster():
    return t.cluster("a", [t.pool("p", 8)])


def in_flight(count, namespace="team-a"):
    """`count` pending replicas of one deployment, none claiming a device (zero-device
    members are never refused by a device quota)."""
    return [
        t.model_replica(
            f"many-{i}",
            namespace,
            "a",
            [t.replica_engine("serve", "p", gpus=0)],
            deployment_name="many",
            index=i,
        )
        for i in range(count)
    ]


def run(others, own=None, replicas=3):
    xr = t.deployment(replicas=replicas, engines=[t.standalone(gpus=8)])
    return wire.run(
        fn.FunctionRunner(matcher=t.stand_in_matcher), t.request(xr, [cluster()], others, own)
    )


def placed(rsp):
    return sorted(n for n in wire.desired(rsp) if n.startswith("replica-"))


@pytest.mark.parametrize(
    ("others", "expected"),
    [
        pytest.param(
            in_flight(MAX_IN_FLIGHT_PER_NAMESPACE - 1),
            ["replica-0"],
            id="one below the namespace's bound: one new replica",
        ),
        pytest.param(
            in_flight(MAX_IN_FLIGHT_PER_NAMESPACE),
            [],
            id="at the namespace's bound: no new replica",
        ),
        pytest.param(
            in_flight(MAX_IN_FLIGHT_PER_NAMESPACE, namespace="team-b"),
            ["replica-0", "replica-1", "replica-2"],
            id="another namespace's in-flight replicas do not count",
        ),
    ],
)
def test_a_namespace_holds_a_bounded_number_of_replicas_in_flight(others, expected):
    assert placed(run(others)) == expected


def test_the_bound_is_said_naming_the_label_the_count_and_the_bound():
    status, reason, message = wire.conditions(run(in_flight(MAX_IN_FLIGHT_PER_NAMESPACE)))[
        "InputsValid"
    ]
    assert (status, reason) == ("False", "DegradedInputs")
    assert (
        "modelplane.ai/charge=pending: namespace team-a holds 256 replicas in flight, "
        "at most 256 may be: no new replica is placed until some are counted"
    ) in message


def test_at_the_bound_the_deployments_running_replicas_are_kept():
    own = {
        f"replica-{i}": t.model_replica(
            f"llm-{i}", "team-a", "a", [t.replica_engine("serve", "p", gpus=8)], index=i
        )
        for i in range(2)
    }
    assert placed(run(in_flight(MAX_IN_FLIGHT_PER_NAMESPACE), own)) == ["replica-0", "replica-1"]


def test_a_fleet_at_its_pending_bound_places_no_new_replica_anywhere():
    per_namespace = MAX_IN_FLIGHT_PER_NAMESPACE - 1
    fleet = [
        r
        for n in range(-(-MAX_PENDING_READ // per_namespace))
        for r in in_flight(per_namespace, namespace=f"team-{n}")
    ][:MAX_PENDING_READ]
    rsp = run(fleet)
    assert placed(rsp) == []
    assert "replicas fleet-wide, at most 10000 may be" in wire.conditions(rsp)["InputsValid"][2]
