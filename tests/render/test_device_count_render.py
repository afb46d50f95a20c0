"""Device-count accounting (fallback: DeviceCount) through the real CLI (design/api.md section 6).

Pools without a fresh observation are counted by their fallback. Under
DeviceCount a pool offers nodes x devices per node, per kind, minus what the
replicas pinned to it claim; a pod must fit one node's devices and a gang
copy needs a node per pod. Each expectation is worked out from that rule:

- the example gpu-edge (no agent; l40s 4 x 4 GPUs by devices, h100 2 x 8
  by whole nodes) takes the six 1-GPU llama-8b replicas on l40s alone,
  where whole-node accounting puts four there and two on h100;
- a built pool of 4 x 8 GPUs with 30 claimed takes a 2-GPU replica, not a
  3-GPU one, and whole-node accounting takes neither;
- a gang of 3 does not fit a 2-node pool however many GPUs are free;
- admission (compose-model-replica) counts the same way: of three 4-GPU
  replicas placed at once on one 8-GPU node, the first two are admitted.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from modelplane_common.timeutil import format_time
from modelplane_devtools import render
from modelplane_testkit import deployment_builders as t
from modelplane_testkit.rendered import by_kind, composite, condition, results

DEPLOYMENT = render.ROOT / "apis/modeldeployment/composition.yaml"
REPLICA = render.ROOT / "apis/modelreplica/composition.yaml"
CASES = {c["name"]: c for c in render.example_cases()}


def placements(rendered: list[dict]) -> dict[str, tuple[str, list[str]]]:
    return {
        r["metadata"]["name"]: (
            r["spec"]["clusterName"],
            sorted({m["nodePoolName"] for e in r["spec"]["engines"] for m in e["members"]}),
        )
        for r in by_kind(rendered, "ModelReplica")
    }


def pools_used(rendered: list[dict]) -> dict[str, int]:
    used: dict[str, int] = {}
    for _, pools in placements(rendered).values():
        for pool in pools:
            used[pool] = used.get(pool, 0) + 1
    return used


# --- the example: gpu-edge without the agent ------------------------------------------------


def edge_fleet(cluster_wide: str | None, l40s: str | None = None) -> dict:
    (edge,) = yaml.safe_load_all((render.ROOT / "examples/fleet/edge.yaml").read_text())
    edge = copy.deepcopy(edge)
    edge["spec"]["observation"].pop("fallback", None)
    if cluster_wide is not None:
        edge["spec"]["observation"]["fallback"] = cluster_wide
    if l40s is not None:
        edge["spec"]["nodePools"][0]["fallback"] = l40s
    return edge


def test_the_example_cluster_names_each_pools_fallback(functions):
    rendered = render.render_case(functions, CASES["cluster-device-count"])
    capacity = condition(composite(rendered), "CapacityObserved")
    assert (capacity["status"], capacity["reason"], capacity["message"]) == (
        "False",
        "NoPoolObserved",
        "WholeNode fallback: h100 (the agent is not installed on the cluster); "
        "DeviceCount fallback: l40s (the agent is not installed on the cluster)",
    )


def test_the_example_single_gpu_deployment_fits_the_devices_of_the_unobserved_pool(functions):
    rendered = render.render_case(functions, CASES["deployment-single-gpu-device-count"])
    # Smallest hardware first: l40s (4 per node) before h100 (8 per node); 16 GPUs hold six.
    assert pools_used(rendered) == {"l40s": 6}
    assert condition(composite(rendered), "ReplicasScheduled")["status"] == "True"


@pytest.mark.parametrize(
    ("cluster_wide", "l40s", "used"),
    [
        pytest.param(None, None, {"l40s": 4, "h100": 2}, id="without a fallback: whole nodes"),
        pytest.param(
            "DeviceCount",
            "WholeNode",
            {"l40s": 4, "h100": 2},
            id="a pool's own WholeNode overrides the cluster's DeviceCount",
        ),
        pytest.param(
            "Sometimes",
            None,
            {"l40s": 4, "h100": 2},
            id="an unknown fallback is whole nodes, and the cluster stays usable",
        ),
    ],
)
def test_whole_node_accounting_takes_one_l40s_node_per_replica(functions, cluster_wide, l40s, used):
    xr = render.ROOT / "examples/deployments/single-gpu-throughput.yaml"
    rendered = functions.render(xr, DEPLOYMENT, required=[edge_fleet(cluster_wide, l40s)])
    assert pools_used(rendered) == used


def test_an_unknown_fallback_is_reported_as_an_input_problem(functions):
    xr = render.ROOT / "examples/deployments/single-gpu-throughput.yaml"
    rendered = functions.render(xr, DEPLOYMENT, required=[edge_fleet("Sometimes")])
    messages = [r["message"] for r in results(rendered)]
    assert any(
        "cluster gpu-edge: spec.observation.fallback: must be one of WholeNode, DeviceCount; "
        'using WholeNode (got "Sometimes")' in m
        for m in messages
    ), messages


# --- a built pool of 4 x 8 GPUs, 30 of them claimed ---------------------------------------


def claimed_fleet(fallback: str | None, nodes: int = 4) -> list[dict]:
    """edge/h100 without the agent; other replicas pinned to it claim 8 + 8 + 8 + 6 GPUs."""
    edge = t.cluster("edge", [t.pool("h100", nodes)], fallback=fallback)
    others = [
        t.model_replica(
            f"other-{i}",
            "team-z",
            "edge",
            [t.replica_engine("serve", "h100", gpus=gpus)],
            deployment_name="other",
            index=i,
            placed_at=t.ago(60),
        )
        for i, gpus in enumerate([8, 8, 8, 6] if nodes == 4 else [])
    ]
    return [edge, *others]


@pytest.mark.parametrize(
    ("fallback", "engine", "placed", "message"),
    [
        pytest.param(
            "DeviceCount",
            t.standalone(gpus=2),
            True,
            "1 of 1 replicas placed",
            id="a pool of 4x8 with 30 claimed takes a 2-GPU replica",
        ),
        pytest.param(
            "DeviceCount",
            t.standalone(gpus=3),
            False,
            "0 of 1 replicas placed: 1 pool checked, 1 too few free devices",
            id="a pool of 4x8 with 30 claimed refuses a 3-GPU replica: too few devices",
        ),
        pytest.param(
            None,
            t.standalone(gpus=2),
            False,
            "0 of 1 replicas placed: 1 pool checked, 1 too few free devices",
            id="whole-node accounting refuses the 2-GPU replica: every node is taken",
        ),
    ],
)
def test_device_count_subtracts_what_the_pinned_replicas_claim(
    functions, fallback, engine, placed, message
):
    xr = t.deployment("llm", "team-a", engines=[engine])
    rendered = functions.render(xr, DEPLOYMENT, required=claimed_fleet(fallback))
    assert placements(rendered) == ({"llm-0": ("edge", ["h100"])} if placed else {})
    assert condition(composite(rendered), "ReplicasScheduled")["message"] == message


@pytest.mark.parametrize(
    ("workers", "placed", "message"),
    [
        pytest.param(
            2,
            False,
            "0 of 1 replicas placed: 1 pool checked, 1 too few nodes with room",
            id="a gang of 3 on a 2-node pool does not fit although 16 GPUs are free",
        ),
        pytest.param(1, True, "1 of 1 replicas placed", id="a gang of 2 on a 2-node pool fits"),
    ],
)
def test_a_gang_still_needs_a_node_per_pod(functions, workers, placed, message):
    xr = t.deployment(
        "llm", "team-a", engines=[t.gang(leader_gpus=1, worker_gpus=1, workers=workers)]
    )
    rendered = functions.render(xr, DEPLOYMENT, required=claimed_fleet("DeviceCount", nodes=2))
    assert bool(placements(rendered)) is placed
    assert condition(composite(rendered), "ReplicasScheduled")["message"] == message


# --- admission counts the same way ------------------------------------------------------------


def one_node_by_devices() -> dict:
    """edge/h100: one 8-GPU node, Declared, counted by devices."""
    edge = t.cluster("edge", [t.pool("h100", 1)], mode="Declared", fallback="DeviceCount")
    # What compose-inference-cluster publishes once the cluster is up.
    edge["status"]["providerConfigRef"] = {"name": "edge"}
    edge["status"]["agent"]["present"] = False
    return edge


def as_existing(replica: dict, placed_at: str) -> dict:
    body = copy.deepcopy(replica)
    body["metadata"].setdefault("annotations", {})["modelplane.ai/placed-at"] = placed_at
    return body


def test_admission_admits_what_the_pools_devices_hold_in_queue_order(functions):
    # Placed from the same snapshot, each of three 4-GPU replicas sees 8 free GPUs.
    names = ("alpha", "beta", "gamma")
    placed = []
    for name in names:
        xr = t.deployment(name, f"team-{name}", engines=[t.standalone(gpus=4)])
        (replica,) = by_kind(
            functions.render(xr, DEPLOYMENT, required=[one_node_by_devices()]), "ModelReplica"
        )
        placed.append(replica)
    now = datetime.now(UTC)
    queue = [
        as_existing(r, format_time(now - timedelta(seconds=60 - i))) for i, r in enumerate(placed)
    ]
    verdicts = {}
    for name, replica in zip(names, queue, strict=True):
        rendered = functions.render(replica, REPLICA, required=[one_node_by_devices(), *queue])
        admitted = condition(composite(rendered), "Admitted")
        verdicts[name] = (admitted["status"], admitted["reason"], admitted["message"])
    assert verdicts == {
        "alpha": (
            "True",
            "Admitted",
            "admitted: it fits behind every replica of the cluster placed before it",
        ),
        "beta": (
            "True",
            "Admitted",
            "admitted: it fits behind every replica of the cluster placed before it",
        ),
        "gamma": (
            "False",
            "Overcommitted",
            "engine serve does not fit pool h100 behind the 2 replica(s) of the cluster placed "
            "before it: it claims 4 gpu device(s), 0 free (too few free devices)",
        ),
    }
