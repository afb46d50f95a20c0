"""The shared wire rules of capacity.readers and capacity.fleet: one reader of a
ModelReplica's engines, and the rule "pods per copy"."""

from __future__ import annotations

import pytest
from google.protobuf import struct_pb2
from modelplane_common.capacity.fleet import (
    PlacedEngine,
    PlacedMember,
    ResolvedRequest,
    Role,
    pods_per_copy,
)
from modelplane_common.capacity.readers import read_charge, read_engines
from modelplane_common.outcome import MAX_MESSAGE, capped


def struct(value: dict) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(value)
    return out


GPU = {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 2}


@pytest.mark.parametrize(
    ("role", "worker_nodes", "pods"),
    [
        pytest.param("Worker", 3, 3, id="a Worker runs worker.nodes pods per copy"),
        pytest.param("Worker", None, 1, id="a Worker without worker.nodes counts one"),
        pytest.param("Leader", 3, 1, id="a Leader runs one pod whatever worker says"),
        pytest.param("Standalone", None, 1, id="a Standalone member runs one pod"),
    ],
)
def test_pods_per_copy(role, worker_nodes, pods):
    assert pods_per_copy(role, worker_nodes) == pods


@pytest.mark.parametrize(
    ("spec", "engines"),
    [
        pytest.param(
            {
                "engines": [
                    {
                        "name": "serve",
                        "copies": 2.0,
                        "members": [
                            {
                                "role": "Standalone",
                                "nodePoolName": "p",
                                "deviceRequests": [
                                    {**GPU, "selectors": [{"cel": {"expression": "true"}}]}
                                ],
                            }
                        ],
                    }
                ]
            },
            (
                PlacedEngine(
                    "serve",
                    2,
                    (
                        PlacedMember(
                            Role.STANDALONE,
                            "p",
                            (ResolvedRequest("gpu", "gpu.nvidia.com", 2, ("true",)),),
                        ),
                    ),
                ),
            ),
            id="copies, requests and their selectors are read",
        ),
        pytest.param(
            {
                "engines": [
                    {
                        "name": "gang",
                        "members": [
                            {"role": "Leader", "nodePoolName": "p"},
                            {"role": "Worker", "nodePoolName": "p", "worker": {"nodes": 3}},
                        ],
                    }
                ]
            },
            (
                PlacedEngine(
                    "gang",
                    1,
                    (
                        PlacedMember(Role.LEADER, "p", ()),
                        PlacedMember(Role.WORKER, "p", (), pods_per_copy=3),
                    ),
                ),
            ),
            id="a gang's Worker runs worker.nodes pods per copy; absent copies read as 1",
        ),
        pytest.param(
            {"engines": [{"name": "odd", "members": [{"role": "Boss", "nodePoolName": "p"}]}]},
            (),
            id="a member of an unknown role is skipped, and an engine left without members",
        ),
        pytest.param({}, (), id="a spec without engines has none"),
    ],
)
def test_read_engines_is_lenient_and_reads_what_placement_compares(spec, engines):
    assert read_engines(struct(spec)) == engines


def test_read_engines_of_no_spec_is_no_engines():
    assert read_engines(None) == ()


@pytest.mark.parametrize(
    ("length", "kept"),
    [
        pytest.param(MAX_MESSAGE, MAX_MESSAGE, id="a message at the cap is whole"),
        pytest.param(MAX_MESSAGE + 1, MAX_MESSAGE, id="a longer one is cut to the cap"),
        pytest.param(3, 3, id="a short one is whole"),
    ],
)
def test_capped_cuts_messages_to_the_one_cap(length, kept):
    assert len(capped("x" * length)) == kept


@pytest.mark.parametrize(
    ("status", "reason", "released"),
    [
        pytest.param("False", "NotCreated", True, id="pods refused past the grace: released"),
        pytest.param("False", "Creating", False, id="within the grace: charged"),
        pytest.param("Unknown", "NotObserved", False, id="nothing counted: charged"),
        pytest.param("True", "Created", False, id="its pods exist: charged"),
    ],
)
def test_a_replica_whose_pods_were_refused_past_the_grace_is_a_released_charge(
    status, reason, released
):
    replica = struct(
        {
            "spec": {"clusterName": "a", "engines": []},
            "status": {"conditions": [{"type": "PodsCreated", "status": status, "reason": reason}]},
        }
    )
    assert read_charge(replica, ("team-a", "r0"), "a").released is released
