"""The charge label a deployment writes on each replica (capacity/charge_label.py).

`counted` lets readers of the fleet skip a replica, so it is written only
when a fresh observation of every pool the replica uses already contains
it; every other case is `pending`.
"""

from __future__ import annotations

import pytest
from compose_model_deployment import readers, writer
from modelplane_common import labels
from modelplane_testkit import deployment_builders as t

FULL = {"gpu": 8}
# The shape t.running_replica runs: one 8-GPU engine "serve" on pool "p".
ITS_SHAPE = [t.standalone(gpus=8)]


def cluster_b(**pool_fields) -> dict:
    fields = {"histogram": [(FULL, 1)], **pool_fields}
    return t.cluster("b", [t.pool("p", 2, **fields)])


@pytest.mark.parametrize(
    ("clusters", "own", "expected"),
    [
        pytest.param(
            [cluster_b(observed_at=t.ago(1))],
            t.running_replica(0, "b"),
            labels.CHARGE_COUNTED,
            id="kept with pods scheduled before the pool's fresh observation is counted",
        ),
        pytest.param(
            [cluster_b(observed_at=t.ago(40))],
            t.running_replica(0, "b"),
            labels.CHARGE_PENDING,
            id="kept with pods scheduled after the pool's observation is pending",
        ),
        pytest.param(
            [cluster_b(observed_at=t.ago(1))],
            t.running_replica(
                0, "b", pods_scheduled="False", reason="Unschedulable", since=t.ago(seconds=10)
            ),
            labels.CHARGE_PENDING,
            id="kept with pods not all scheduled is pending",
        ),
        pytest.param(
            [t.cluster("b", [t.pool("p", 2, histogram=[(FULL, 1)], observed_at=t.ago(10))])],
            t.running_replica(0, "b"),
            labels.CHARGE_PENDING,
            id="kept on a pool whose observation is older than maxAge is pending",
        ),
        pytest.param(
            [t.cluster("b", [t.pool("p", 2)], mode="Declared")],
            t.running_replica(0, "b"),
            labels.CHARGE_PENDING,
            id="kept on a Declared cluster is pending",
        ),
    ],
)
def test_a_kept_replica_is_counted_only_when_its_fresh_pools_contain_it(clusters, own, expected):
    xr = t.deployment(replicas=1, engines=ITS_SHAPE)
    plan = t.schedule(xr, clusters, {"replica-0": own})
    (replica,) = plan.replicas
    assert replica.change == "Kept"
    composed = writer.model_replica(readers.read_deployment(xr), replica)
    assert composed["metadata"]["labels"][labels.CHARGE] == expected


def test_a_replica_placed_this_pass_is_pending():
    xr = t.deployment(replicas=1)
    plan = t.schedule(xr, [cluster_b(observed_at=t.ago(1))])
    (replica,) = plan.replicas
    composed = writer.model_replica(readers.read_deployment(xr), replica)
    assert composed["metadata"]["labels"][labels.CHARGE] == labels.CHARGE_PENDING
