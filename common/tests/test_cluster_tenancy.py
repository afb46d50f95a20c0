"""spec.tenancy read once into a typed value, for the scheduler and admission alike."""

from __future__ import annotations

import pytest
from modelplane_common import cluster_tenancy
from modelplane_common.capacity.readers import UnreadableCluster, read_cluster
from modelplane_common.cluster_tenancy import ClusterTenancy
from modelplane_testkit import deployment_builders as t


@pytest.mark.parametrize(
    ("spec", "read"),
    [
        pytest.param({}, ClusterTenancy(), id="absent: no class approved, nothing reserved"),
        pytest.param({"tenancy": {}}, ClusterTenancy(), id="empty: the same"),
        pytest.param(
            {"tenancy": {"priorityClassNames": ["high"], "reservedNamespaces": ["gpu-operator"]}},
            ClusterTenancy(("high",), ("gpu-operator",)),
            id="both lists, in order",
        ),
        pytest.param(
            {"tenancy": {"priorityClassNames": ["high", 7], "reservedNamespaces": "x"}},
            ClusterTenancy(("high",)),
            id="what is not a list of names is skipped, never raised on",
        ),
    ],
)
def test_read(spec, read):
    assert cluster_tenancy.read(spec) == read


def test_the_fleet_reader_carries_the_cluster_tenancy():
    obj = t.cluster(
        "a", [t.pool("p", 1)], priority_class_names=["high"], reserved_namespaces=["lws-system"]
    )
    cluster, _ = read_cluster(obj)
    assert cluster.tenancy == ClusterTenancy(("high",), ("lws-system",))


def test_a_tenancy_list_that_breaks_the_schema_makes_the_cluster_unreadable():
    obj = t.cluster("a", [t.pool("p", 1)], reserved_namespaces=[""])
    with pytest.raises(UnreadableCluster, match="reservedNamespaces"):
        read_cluster(obj)
