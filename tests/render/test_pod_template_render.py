"""Pod templates that cannot run, or would leave the cluster's scheduler, through the real CLI.

A ModelDeployment whose template sets `nodeName` or a `schedulerName`
other than default-scheduler, or that is no pod template, is refused with
ReplicasScheduled False/InvalidDeployment naming the field and the value,
and no ModelReplica is placed (so nothing is charged). A ModelReplica
written with such a template some other way composes no workload.
The rule is `modelplane_common.pod_template` (design/tenancy.md).
"""

from __future__ import annotations

import copy

import pytest
import yaml
from modelplane_devtools import render
from modelplane_devtools.rendered import by_kind, composite, condition, results

ROOT = render.ROOT
FLEET = [ROOT / "examples/fleet/clusters.yaml", ROOT / "examples/fleet/replicas.yaml"]
DEPLOYMENT = ROOT / "apis/modeldeployment/composition.yaml"
REPLICA = ROOT / "apis/modelreplica/composition.yaml"
MEMBER = "spec.template.spec.engines[0].members[0].template"


def _deployment() -> dict:
    return yaml.safe_load((ROOT / "examples/deployments/single-gpu-throughput.yaml").read_text())


def _with_pod_spec(xr: dict, change: dict) -> dict:
    xr = copy.deepcopy(xr)
    member = xr["spec"]["template"]["spec"]["engines"][0]["members"][0]
    member["template"]["spec"].update(change)
    return xr


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(
            {"nodeName": "gpu-east-h100-0"},
            f"{MEMBER}.spec.nodeName: is not allowed: it binds pods without the cluster's "
            "scheduler, outside the pool they were placed and charged on "
            '(got "gpu-east-h100-0")',
            id="nodeName is refused, naming the node",
        ),
        pytest.param(
            {"schedulerName": "my-scheduler"},
            f"{MEMBER}.spec.schedulerName: must be default-scheduler or unset: another "
            'scheduler would place pods the fleet scheduler did not charge (got "my-scheduler")',
            id="another schedulerName is refused, naming it",
        ),
        pytest.param(
            {"containers": []},
            f"{MEMBER} has no containers",
            id="a template without containers is refused",
        ),
        pytest.param(
            {"containers": [{"name": "a", "image": "x"}, {"name": "a", "image": "y"}]},
            f'{MEMBER}.spec.containers[1].name: repeats another container\'s name (got "a")',
            id="two containers with one name are refused",
        ),
    ],
)
def test_a_template_that_bypasses_scheduling_or_cannot_run_places_nothing(
    functions, change, message
):
    rendered = functions.render(_with_pod_spec(_deployment(), change), DEPLOYMENT, required=FLEET)
    scheduled = condition(composite(rendered), "ReplicasScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "InvalidDeployment")
    assert scheduled["message"] == message
    assert by_kind(rendered, "ModelReplica") == []
    assert any(message in r.get("message", "") for r in results(rendered))


def test_the_default_scheduler_named_explicitly_is_placed(functions):
    xr = _with_pod_spec(_deployment(), {"schedulerName": "default-scheduler"})
    rendered = functions.render(xr, DEPLOYMENT, required=FLEET)
    assert condition(composite(rendered), "ReplicasScheduled")["status"] == "True"
    assert len(by_kind(rendered, "ModelReplica")) == 6


def test_a_replica_written_with_a_node_name_composes_no_workload(functions):
    xr = yaml.safe_load((ROOT / "examples/replicas/single-gpu.yaml").read_text())
    # Written by hand (inline, not by digest): the replica's own check refuses it.
    member = xr["spec"]["engines"][0]["members"][0]
    del member["templateDigest"]
    member["template"] = {
        "spec": {"nodeName": "gpu-east-l40s-0", "containers": [{"name": "vllm", "image": "vllm"}]}
    }
    rendered = functions.render(xr, REPLICA, required=[ROOT / "examples/fleet/clusters.yaml"])
    composed = condition(composite(rendered), "WorkloadsComposed")
    assert (composed["status"], composed["reason"]) == ("False", "InvalidSpec")
    assert "template.spec.nodeName: is not allowed" in composed["message"]
    assert '(got "gpu-east-l40s-0")' in composed["message"]
    manifests = [o["spec"]["forProvider"]["manifest"]["kind"] for o in by_kind(rendered, "Object")]
    assert "Deployment" not in manifests
