"""The agent's memory is bounded by what it keeps, not by what tenants put on their pods.

A tenant writes its pods' labels (a member template's `metadata.labels`) without
bound. 1,000 pods carrying 600 KB of labels each are folded into `ClusterState`
the way the shell folds a list (one wire object alive at a time), and the
process's resident memory is read before and after (Linux `/proc/self/statm`;
tracemalloc would make the test take minutes): its growth must stay under
`BUDGET`, a sixty-fourth of the Deployment's memory limit
(deploy/agent/deployment.yaml). Measured: 1.2 MiB for the 1,000 pods, 0.7 MiB
of it the allocator keeping room for one wire pod. Before the agent trimmed pods
to the labels it reads, each such pod kept about 1.1 MB, so the first hundred
already exceed the budget (checked every hundred, to fail long before the
machine runs short).
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import yaml
from modelplane_agent.state import PODS, REPLICAS, ClusterState
from modelplane_testkit import agent_builders as t

ROOT = Path(__file__).resolve().parents[2]
PODS_COUNT = 1_000
LABEL_BYTES = 600_000
BUDGET = 16 * 2**20  # what folding the 1,000 pods may add to the resident memory


def memory_limit() -> int:
    """The agent container's memory limit in bytes, as deploy/agent says."""
    docs = yaml.safe_load_all((ROOT / "deploy/agent/deployment.yaml").read_text())
    deployment = next(d for d in docs if d and d.get("kind") == "Deployment")
    limit = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    units = {"Mi": 2**20, "Gi": 2**30}
    number, unit = limit["memory"][:-2], limit["memory"][-2:]
    return int(number) * units[unit]


def resident() -> int:
    pages = int((Path("/proc/self/statm").read_text()).split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def labelled_pod(i: int) -> dict:
    """An engine pod of replica r<i % 10> with about LABEL_BYTES of labels of its own: keys
    and values as long as Kubernetes allows (317 and 63 characters), distinct per pod, as
    decoding each pod's JSON makes them."""
    pod = t.pod(f"p{i}", replica=f"r{i % 10}", node_name="n1", requests={"cpu": "1"})
    pod_labels = pod["metadata"]["labels"]
    prefix = "tenant.example.com/" + "x" * 230
    for j in range(LABEL_BYTES // (317 + 63)):
        pod_labels[f"{prefix}{i:06d}-{j:05d}-" + "k" * 50] = f"{i:06d}{j:05d}" + "v" * 52
    return pod


def test_a_thousand_pods_with_600_kb_of_labels_each_stay_far_under_the_memory_limit():
    state = ClusterState()
    for r in range(10):
        state.apply(REPLICAS, "ADDED", t.replica_observation(f"r{r}"))
    gc.collect()
    before = resident()
    for i in range(PODS_COUNT):
        state.apply(PODS, "ADDED", labelled_pod(i))
        if (i + 1) % 100 == 0:
            gc.collect()
            grown = resident() - before
            assert grown <= BUDGET, f"{grown / 2**20:.0f} MiB more resident after {i + 1} pods"
    assert memory_limit() // 64 >= BUDGET
    # The pods are all there, and each replica selects its hundred.
    assert sum(len(pods) for pods in state.replica_view.pods.values()) == PODS_COUNT
    assert {len(state.replica_view.selected[("team", f"r{r}")]) for r in range(10)} == {100}
