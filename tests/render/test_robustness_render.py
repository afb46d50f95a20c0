"""Bad input through the real CLI: Fatal stops Crossplane before it applies or deletes
anything; an invalid spec is a warning that keeps every composed resource.

`crossplane composition render` runs Crossplane's own composer (the
crossplane-core binary), so what it does with a function's response is what
a control plane does with it.
"""

from __future__ import annotations

import pytest
import yaml
from modelplane_devtools import render
from modelplane_testkit.rendered import by_kind, composite, condition

CLUSTER_XR = render.ROOT / "examples/clusters/gpu-east.yaml"
CLUSTER_COMPOSITION = render.ROOT / "apis/inferencecluster/composition.yaml"
CLUSTER_OBSERVED = render.ROOT / "examples/clusters/gpu-east-observed.yaml"


def test_a_fatal_result_stops_crossplane_before_anything_is_applied_or_deleted(functions):
    xr = yaml.safe_load(CLUSTER_XR.read_text())
    xr["spec"] = "gpu-east"  # not an object: compose-inference-cluster answers Fatal
    with pytest.raises(render.RenderFailed) as failed:
        functions.render(xr, CLUSTER_COMPOSITION, observed=CLUSTER_OBSERVED)
    error = failed.value.stderr
    assert (
        'cannot compose resources: pipeline step "compose" returned a fatal result: '
        'cannot read the composite: spec: must be an object (got "gpu-east")'
    ) in error
    # Crossplane stops the pipeline: no desired state is produced, so no composed
    # resource is applied or garbage-collected. The same observed resources with
    # a readable spec render in full.
    assert not [d for d in render.load_all(failed.value.stdout) if d.get("kind") == "Object"]
    whole = functions.render(CLUSTER_XR, CLUSTER_COMPOSITION, observed=CLUSTER_OBSERVED)
    assert len(by_kind(whole, "Object")) == 3


def test_an_invalid_spec_is_a_warning_and_keeps_every_composed_resource(functions):
    xr = yaml.safe_load(CLUSTER_XR.read_text())
    xr["spec"]["nodePools"][0]["name"] = "H100!"
    rendered = functions.render(xr, CLUSTER_COMPOSITION, observed=CLUSTER_OBSERVED)
    names = sorted(o["metadata"]["name"] for o in by_kind(rendered, "Object"))
    assert names == ["gpu-east-agent-crd", "gpu-east-pool-h100", "gpu-east-pool-l40s"]
    configured = condition(composite(rendered), "Configured")
    assert (configured["status"], configured["reason"]) == ("False", "InvalidSpec")
    assert "spec.nodePools[0].name: String should match pattern" in configured["message"]
