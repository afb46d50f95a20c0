"""kwok plays kubelet for the workload cluster's GPU nodes.

kwok v0.8.0 (`tools/workloads`) runs as a process on 127.0.0.1 against the
workload cluster and manages only the nodes annotated `MANAGED` (the ones
`fleet.add_nodes` creates). It does what a kubelet's API traffic would:

- a new node gets its status (Ready and the other conditions, addresses,
  capacity: 1k CPU, 1Ti memory, 1M pods) and a Lease in
  `kube-node-lease`, renewed every few seconds, so the node lifecycle
  controller sees a live node, lifts the `not-ready` taint the API server
  put on it at creation, and would taint it again if kwok stopped;
- a pod bound to such a node goes to Running with every container (and
  every readiness gate) ready;
- a pod marked for deletion is removed for good, as its kubelet would once
  it stopped the containers.

kwok's controller reads its Stages (the state machine above) only from a
configuration file when it runs outside a cluster; `stages` takes kwok's
own default Stages from its module source (`kustomize/stage`, the files
`kwokctl` embeds), so the behaviour is kwok's, not ours.

A test turns a running pod not-ready by writing its Ready condition False
(`set_pod_ready`): kwok's `pod-ready` Stage only moves Pending pods, so it
leaves that status alone, as a kubelet would report a failing probe.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from modelplane_devtools.processes import Process, Supervisor, free_port, listening

from modelplane_e2e.kube import Kube

# Nodes with this annotation (value `fake`, as kwok's documentation names
# them) are kwok's; any other node is left alone.
MANAGED = "kwok.x-k8s.io/node"
MODULE = "sigs.k8s.io/kwok"
# kwok's default Stages, as `kwokctl` assembles them for a cluster with node
# leases: node status and heartbeats, pods to Ready, deleted pods removed.
STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
)


def stages(source: Path) -> list[dict]:
    """kwok's default Stages, read from its module at `source`."""
    return [yaml.safe_load((source / "kustomize" / "stage" / path).read_text()) for path in STAGES]


def start(
    supervisor: Supervisor,
    kubeconfig: Path,
    workdir: Path,
    *,
    binary: Path,
    source: Path,
    name: str = "kwok",
) -> Process:
    """kwok (`binary`, Stages from its module at `source`) against the cluster at
    `kubeconfig`; returns once its server answers. `name` names its process and its
    folder in `workdir`, one per workload cluster.

    Options go on the command line: a KwokConfiguration in the file would
    replace kwok's defaults (worker counts among them) rather than add to them.
    """
    port = free_port()
    path = workdir / name / "stages.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(stages(source), sort_keys=False))
    process = supervisor.start(
        name,
        [
            binary,
            f"--kubeconfig={kubeconfig}",
            f"--config={path}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={MANAGED}=fake",
            f"--server-address=127.0.0.1:{port}",
            # Off unless set (kwokctl sets 40, a kubelet's default): the Leases are
            # the heartbeats the node lifecycle controller reads; the Stage's own
            # condition heartbeat comes only every 10-20 min.
            "--node-lease-duration-seconds=40",
        ],
    )
    supervisor.wait_until(process, lambda: listening(port), "serving", 120)
    return process


def set_pod_ready(kube: Kube, name: str, namespace: str, ready: bool) -> None:
    """Write the pod's Ready and ContainersReady conditions, as its kubelet reports probes."""
    pod = kube.get("pod", name, namespace)
    assert pod, f"pod {namespace}/{name} missing"
    status = "True" if ready else "False"
    conditions = [
        {**c, "status": status} if c["type"] in ("Ready", "ContainersReady") else c
        for c in pod["status"].get("conditions") or []
    ]
    containers = [{**c, "ready": ready} for c in pod["status"].get("containerStatuses") or []]
    kube.patch(
        "pod",
        name,
        {"status": {"conditions": conditions, "containerStatuses": containers}},
        namespace=namespace,
        kind_of_patch="strategic",
        subresource="status",
    )
