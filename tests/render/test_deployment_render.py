"""The example deployments placed on the example fleet, through the real CLI.

The fleet (examples/fleet/) as the scheduler sees it:
- gpu-east (production, us-east), observed and fresh:
    h100: 8 GPUs/node, histogram {8 free: 10, 4 free: 3, 0 free: 2},
          observedNodes 16, maxNodeCount 20 -> 4 growable empty nodes;
    l40s: 4 GPUs + 2 NICs/node, histogram {4/2: 4, 1/1: 2, 0/0: 2}.
  Other replicas pinned to gpu-east/h100: mistral-7b-0 (2 GPUs, scheduled
  before the observation: already in the histogram, not charged again) and
  mistral-7b-1 (2 GPUs, pending: charged on an 8-free node, leaving 6).
- gpu-west (production, us-west), Declared: a100, 4 nodes of 8 GPUs, whole-node.
- gpu-lab (lab, us-east): h100 report rejected -> whole-node, 4 nodes;
  l4 (1 GPU/node) report stale -> whole-node, 6 nodes.
Each expectation below is derived from those facts and the placement rules.
"""

from __future__ import annotations

import copy

import yaml
from modelplane_devtools import render
from modelplane_testkit.rendered import by_kind, composite, condition, results

FLEET = [render.ROOT / "examples/fleet/clusters.yaml", render.ROOT / "examples/fleet/replicas.yaml"]
COMPOSITION = render.ROOT / "apis/modeldeployment/composition.yaml"


def deployment(name):
    return yaml.safe_load((render.ROOT / "examples/deployments" / name).read_text())


def place(functions, xr):
    rendered = functions.render(xr, COMPOSITION, required=FLEET)
    replicas = {
        r["metadata"]["name"]: (
            r["spec"]["clusterName"],
            {
                e["name"]: sorted({m["nodePoolName"] for m in e["members"]})
                for e in r["spec"]["engines"]
            },
        )
        for r in by_kind(rendered, "ModelReplica")
    }
    return rendered, replicas


def test_single_gpu_replicas_spread_across_clusters_on_the_smallest_fitting_pool(functions):
    rendered, replicas = place(functions, deployment("single-gpu-throughput.yaml"))
    # Spread: fewest replicas first, ties by cluster name. gpu-east's 4-GPU
    # l40s pool fits a 1-GPU pod before its 8-GPU h100 pool; gpu-west has
    # only a100, counted whole-node (3 replicas, 3 of its 4 nodes).
    assert replicas == {
        "llama-8b-0": ("gpu-east", {"vllm": ["l40s"]}),
        "llama-8b-1": ("gpu-west", {"vllm": ["a100"]}),
        "llama-8b-2": ("gpu-east", {"vllm": ["l40s"]}),
        "llama-8b-3": ("gpu-west", {"vllm": ["a100"]}),
        "llama-8b-4": ("gpu-east", {"vllm": ["l40s"]}),
        "llama-8b-5": ("gpu-west", {"vllm": ["a100"]}),
    }
    xr = composite(rendered)
    assert xr["status"]["replicas"] == {"desired": 6, "scheduled": 6, "ready": 0}
    assert condition(xr, "ReplicasScheduled")["status"] == "True"
    replica = by_kind(rendered, "ModelReplica")[0]
    assert (
        replica["metadata"]["labels"].items()
        >= {
            "modelplane.ai/deployment": "llama-8b",
            "modelplane.ai/deployment-namespace": "team-a",
            "modelplane.ai/cluster": "gpu-east",
            "modelplane.ai/replica-index": "0",
            "app.kubernetes.io/name": "llama-8b",
        }.items()
    )
    (member,) = replica["spec"]["engines"][0]["members"]
    assert member["deviceRequests"][0]["deviceClassName"] == "gpu.nvidia.com"
    assert member["deviceRequests"][0]["count"] == 1


def test_eight_gpu_replicas_fill_the_observed_nodes_and_the_growth_and_no_more(functions):
    xr = deployment("eight-gpu-single-node.yaml")
    xr["spec"]["replicas"] = 20
    rendered, replicas = place(functions, xr)
    # Only gpu-east/h100 is Hopper in production. Whole 8-free nodes: 10 in
    # the histogram, minus the one pending mistral-7b-1 is charged to, plus
    # 4 growable = 13. Charging the already-counted mistral-7b-0 again would
    # give 12; ignoring growth would give 9.
    assert len(replicas) == 13
    assert all(v == ("gpu-east", {"vllm": ["h100"]}) for v in replicas.values())
    status = composite(rendered)["status"]
    assert status["replicas"]["desired"] == 20
    assert status["replicas"]["scheduled"] == 13
    placed = condition(composite(rendered), "ReplicasScheduled")
    assert (placed["status"], placed["reason"]) == ("False", "InsufficientCapacity")
    # Two pools are not Hopper; h100 still has free GPUs, but no node with eight.
    assert placed["message"] == (
        "13 of 20 replicas placed: 3 pools checked, 2 selector does not match, "
        "1 too few nodes with room"
    )


def test_the_example_eight_gpu_deployment_is_fully_placed(functions):
    rendered, replicas = place(functions, deployment("eight-gpu-single-node.yaml"))
    assert replicas == {
        "llama-70b-0": ("gpu-east", {"vllm": ["h100"]}),
        "llama-70b-1": ("gpu-east", {"vllm": ["h100"]}),
    }
    assert condition(composite(rendered), "ReplicasScheduled")["status"] == "True"


def test_a_leader_worker_gang_takes_one_pool_with_workers_per_copy(functions):
    rendered, replicas = place(functions, deployment("leader-worker-gang.yaml"))
    # No cluster selector: every cluster is a candidate; the H100 product
    # name matches gpu-east/h100 and gpu-lab/h100; gpu-east wins the tie by name.
    assert replicas == {"deepseek-r1-0": ("gpu-east", {"sglang": ["h100"]})}
    (replica,) = by_kind(rendered, "ModelReplica")
    members = {m["role"]: m for m in replica["spec"]["engines"][0]["members"]}
    assert members["Worker"]["worker"] == {"nodes": 2}
    assert members["Leader"]["deviceRequests"][0]["count"] == 8


def test_a_gang_that_needs_more_distinct_nodes_than_a_fallback_pool_has_is_not_placed(functions):
    # gpu-lab/h100 counts whole nodes (its report was rejected): 4 nodes hold
    # a gang of at most 4 pods. Five pods (leader + 4 workers) must not fit
    # there, however many GPUs the histogram would have claimed were free.
    xr = copy.deepcopy(deployment("leader-worker-gang.yaml"))
    xr["spec"]["template"]["spec"]["clusterSelector"] = {
        "matchLabels": {"modelplane.ai/tier": "lab"}
    }
    xr["spec"]["template"]["spec"]["engines"][0]["members"][1]["worker"]["nodes"] = 4
    rendered, replicas = place(functions, xr)
    assert replicas == {}
    placed = condition(composite(rendered), "ReplicasScheduled")
    assert (placed["status"], placed["reason"]) == ("False", "InsufficientCapacity")

    xr["spec"]["template"]["spec"]["engines"][0]["members"][1]["worker"]["nodes"] = 3
    _, replicas = place(functions, xr)
    assert replicas == {"deepseek-r1-0": ("gpu-lab", {"sglang": ["h100"]})}


def test_prefill_and_decode_engines_each_take_a_pool_on_one_cluster(functions):
    rendered, replicas = place(functions, deployment("prefill-decode.yaml"))
    # us-east: gpu-east and gpu-lab. Replica 0 on gpu-east: a 4-GPU engine
    # fits a whole l40s node before breaking an h100 node. Replica 1 spreads
    # to gpu-lab, where only the 8-GPU h100 pool holds 4 GPUs (l4 has 1).
    assert replicas == {
        "qwen-pd-0": ("gpu-east", {"prefill": ["l40s"], "decode": ["l40s"]}),
        "qwen-pd-1": ("gpu-lab", {"prefill": ["h100"], "decode": ["h100"]}),
    }
    placed_events = [r["message"] for r in results(rendered) if "placed replica" in r["message"]]
    assert len(placed_events) == 2
