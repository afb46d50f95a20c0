"""Deployment -> replicas -> workloads: the scheduler's output is the replica function's input.

Each example deployment is rendered on the example fleet; every ModelReplica
it composes is then rendered through compose-model-replica, as Crossplane
would once the replica exists. The workloads must land on the pool the
scheduler chose, claim what the deployment asked per pod, keep gang pods on
distinct nodes, and validate against every schema.
"""

from __future__ import annotations

import pytest
from modelplane_common import labels
from modelplane_devtools import render
from modelplane_testkit.rendered import by_kind

FLEET = [render.ROOT / "examples/fleet/clusters.yaml", render.ROOT / "examples/fleet/replicas.yaml"]
# Deployments that place something; examples/deployments/unplaceable/ holds those that cannot.
DEPLOYMENTS = sorted((render.ROOT / "examples/deployments").glob("*.yaml"))


def as_new_replica(replica: dict) -> dict:
    """The composed ModelReplica as the replica function sees it once its commit delay is
    over (design/admission.md): placed a minute ago, nothing composed yet."""
    meta = replica["metadata"]
    return {
        "apiVersion": replica["apiVersion"],
        "kind": replica["kind"],
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": meta.get("labels", {}),
            "annotations": {labels.PLACED_AT: "__NOW-1m__"},
            # Crossplane's controller reference: without it the replica reads orphaned.
            "ownerReferences": meta.get("ownerReferences", []),
        },
        "spec": replica["spec"],
    }


def manifests(rendered: list[dict]) -> list[dict]:
    return [o["spec"]["forProvider"]["manifest"] for o in by_kind(rendered, "Object")]


def pod_templates(workload: dict) -> list[dict]:
    if workload["kind"] == "Deployment":
        return [workload["spec"]["template"]]
    lws = workload["spec"]["leaderWorkerTemplate"]
    return [lws["leaderTemplate"], lws["workerTemplate"]]


@pytest.mark.parametrize("path", DEPLOYMENTS, ids=[p.stem for p in DEPLOYMENTS])
def test_scheduled_replicas_render_to_valid_pinned_workloads(functions, api_extensions, path):
    placed = functions.render(
        path, render.ROOT / "apis/modeldeployment/composition.yaml", required=FLEET
    )
    replicas = by_kind(placed, "ModelReplica")
    assert replicas, "the example deployment must place at least one replica"
    for replica in replicas:
        rendered = functions.render(
            as_new_replica(replica),
            render.ROOT / "apis/modelreplica/composition.yaml",
            # The replica names its templates by digest: its ModelDeployment holds them.
            required=[*FLEET, path],
        )
        done = render.validate(api_extensions, rendered)
        assert done.returncode == 0, done.stdout + done.stderr

        pools = {
            engine["name"]: {m["nodePoolName"] for m in engine["members"]}
            for engine in replica["spec"]["engines"]
        }
        workloads = [
            m for m in manifests(rendered) if m["kind"] in {"Deployment", "LeaderWorkerSet"}
        ]
        assert len(workloads) == len(replica["spec"]["engines"])
        for workload in workloads:
            engine = workload["metadata"]["labels"]["modelplane.ai/engine"]
            for template in pod_templates(workload):
                assert {template["spec"]["nodeSelector"]["modelplane.ai/pool"]} == pools[engine]
            if workload["kind"] == "LeaderWorkerSet":
                worker = next(
                    m
                    for e in replica["spec"]["engines"]
                    if e["name"] == engine
                    for m in e["members"]
                    if m["role"] == "Worker"
                )
                assert (
                    workload["spec"]["leaderWorkerTemplate"]["size"]
                    == 1 + worker["worker"]["nodes"]
                )
                for template in pod_templates(workload):
                    (term,) = template["spec"]["affinity"]["podAntiAffinity"][
                        "requiredDuringSchedulingIgnoredDuringExecution"
                    ]
                    assert term["topologyKey"] == "kubernetes.io/hostname"

        asked = sorted(
            r["count"]
            for e in replica["spec"]["engines"]
            for m in e["members"]
            for r in m.get("deviceRequests", [])
        )
        claimed = sorted(
            req["exactly"]["count"]
            for m in manifests(rendered)
            if m["kind"] == "ResourceClaimTemplate"
            for req in m["spec"]["spec"]["devices"]["requests"]
        )
        assert claimed == asked
