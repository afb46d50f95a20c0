"""A member's device counts sum to at most 32, refused where they are written.

kube-scheduler allocates a pod's ResourceClaim only when its requests hold at
most 32 devices in total (k8s.io/api resource/v1 `AllocationResultsMaxSize`);
both XRDs say so (`modelplane_common.devices.MAX_DEVICES_PER_CLAIM`). The judge
is the real Crossplane CLI's validation of the XRDs' schema and CEL rules.
"""

from __future__ import annotations

import pytest
from modelplane_devtools import render

LIMIT_MESSAGE = "a pod's one ResourceClaim allocates at most 32 devices"


def deployment(counts: list[int]) -> dict:
    devices = [{"name": f"d{i}", "count": c} for i, c in enumerate(counts)]
    member = {
        "role": "Standalone",
        "nodeSelector": {"devices": devices},
        "template": {"spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai"}]}},
    }
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "many-devices", "namespace": "team-a"},
        "spec": {"template": {"spec": {"engines": [{"name": "engine", "members": [member]}]}}},
    }


def replica(counts: list[int]) -> dict:
    requests = [
        {"name": f"d{i}", "deviceClassName": "mig.nvidia.com", "count": c}
        for i, c in enumerate(counts)
    ]
    member = {"role": "Standalone", "nodePoolName": "a100", "deviceRequests": requests}
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelReplica",
        "metadata": {"name": "many-devices-0", "namespace": "team-a"},
        "spec": {
            "clusterName": "gpu-east",
            "engines": [{"name": "engine", "members": [member]}],
        },
    }


@pytest.mark.parametrize("build", [deployment, replica], ids=["ModelDeployment", "ModelReplica"])
@pytest.mark.parametrize(
    ("counts", "refused_for"),
    [
        pytest.param([32], None, id="one entry of 32 is accepted"),
        pytest.param([16, 8, 8], None, id="32 in total across three entries is accepted"),
        pytest.param([16, 17], LIMIT_MESSAGE, id="33 across two entries is refused"),
        pytest.param([4] * 8, None, id="eight entries of 4 are accepted"),
        pytest.param([33], "should be less than or equal to 32", id="one entry of 33 is refused"),
    ],
)
def test_a_members_device_counts_sum_to_at_most_32(api_extensions, build, counts, refused_for):
    done = render.validate(api_extensions, [build(counts)])
    output = done.stdout + done.stderr
    if refused_for is None:
        assert done.returncode == 0, output
    else:
        assert done.returncode != 0, output
        assert refused_for in output, output
