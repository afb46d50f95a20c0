"""A member claiming more than 32 devices in total through the real CLI (design/api.md).

kube-scheduler allocates a ResourceClaim of at most 32 devices
(`modelplane_common.devices.MAX_DEVICES_PER_CLAIM`), and a member's devices are
the requests of its pods' one claim. The XRDs refuse more; a deployment written
before that rule is refused by compose-model-deployment (ReplicasScheduled
False/InvalidDeployment naming the field and the counts): nothing more is
placed or charged, and every replica it already runs is kept. A replica
carrying it composes no workload (WorkloadsComposed False/InvalidSpec).
"""

from __future__ import annotations

import copy

import yaml
from modelplane_devtools import render
from modelplane_testkit.rendered import by_kind, composite, condition, results

ROOT = render.ROOT
FLEET = [ROOT / "examples/fleet/clusters.yaml", ROOT / "examples/fleet/replicas.yaml"]
DEPLOYMENT = ROOT / "apis/modeldeployment/composition.yaml"
REPLICA = ROOT / "apis/modelreplica/composition.yaml"
RULE = (
    "the counts sum to at most 32: a pod's one ResourceClaim allocates at most 32 devices, "
    "and kube-scheduler refuses more (got [16, 17])"
)


def running(replica: dict) -> dict:
    """A composed replica as Crossplane observes it once it runs."""
    body = copy.deepcopy(replica)
    body["metadata"].pop("ownerReferences", None)
    body["status"] = {"pods": {"expected": 1, "observed": 1, "scheduled": 1}}
    return body


def test_a_deployment_claiming_33_devices_places_nothing_and_keeps_every_running_replica(
    functions,
):
    xr = yaml.safe_load((ROOT / "examples/deployments/single-gpu-throughput.yaml").read_text())
    placed = by_kind(functions.render(xr, DEPLOYMENT, required=FLEET), "ModelReplica")
    assert len(placed) == 6

    changed = copy.deepcopy(xr)
    changed["spec"]["replicas"] = 8
    devices = changed["spec"]["template"]["spec"]["engines"][0]["members"][0]["nodeSelector"]
    devices["devices"] = [{**devices["devices"][0], "count": 16}, {"name": "nic", "count": 17}]
    rendered = functions.render(
        changed, DEPLOYMENT, observed=[running(r) for r in placed], required=FLEET
    )

    kept = {r["metadata"]["name"]: r["spec"] for r in by_kind(rendered, "ModelReplica")}
    assert kept == {r["metadata"]["name"]: r["spec"] for r in placed}
    scheduled = condition(composite(rendered), "ReplicasScheduled")
    assert (scheduled["status"], scheduled["reason"], scheduled["message"]) == (
        "False",
        "InvalidDeployment",
        f"spec.template.spec.engines[0].members[0].nodeSelector.devices: {RULE}",
    )
    assert any(RULE in r.get("message", "") for r in results(rendered))


def test_a_replica_claiming_33_devices_composes_no_workload(functions):
    xr = yaml.safe_load((ROOT / "examples/replicas/single-gpu.yaml").read_text())
    member = xr["spec"]["engines"][0]["members"][0]
    # Inline (not by digest), so that nothing but the claim limit keeps its workload.
    del member["templateDigest"]
    member["template"] = {"spec": {"containers": [{"name": "vllm", "image": "vllm"}]}}
    gpu = member["deviceRequests"][0]
    member["deviceRequests"] = [{**gpu, "count": 16}, {**gpu, "name": "nic", "count": 17}]
    rendered = functions.render(xr, REPLICA, required=[ROOT / "examples/fleet/clusters.yaml"])
    composed = condition(composite(rendered), "WorkloadsComposed")
    assert (composed["status"], composed["reason"]) == ("False", "InvalidSpec")
    assert f"members[0] (Standalone).deviceRequests: {RULE}" in composed["message"]
    manifests = [o["spec"]["forProvider"]["manifest"]["kind"] for o in by_kind(rendered, "Object")]
    assert "Deployment" not in manifests
