"""A tenant's hostile CEL selector through the real CLI: refused by the cost limit with one
line naming its field and the limit, quickly, and the deployment keeps its running replicas.

The selector nests comprehensions six deep over ten elements (10^6 iterations): before
the cost limit it held compose-model-deployment past the CLI's one-minute timeout.
"""

from __future__ import annotations

import copy
import time

from modelplane_devtools import render
from modelplane_testkit.rendered import by_kind, composite, condition, results

FLEET = [render.ROOT / "examples/fleet/clusters.yaml", render.ROOT / "examples/fleet/replicas.yaml"]
COMPOSITION = render.ROOT / "apis/modeldeployment/composition.yaml"
DEPLOYMENT = render.ROOT / "examples/deployments/single-gpu-throughput.yaml"
TEN = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"
FIELD = (
    "spec.template.spec.engines[0].members[0].nodeSelector.devices[0].selectors[1].cel.expression"
)


def hostile(levels: int = 6) -> str:
    body = "true"
    for level in range(levels):
        body = f"{TEN}.all(x{level}, {body})"
    return body


def with_selector(xr: dict, expression: str) -> dict:
    changed = copy.deepcopy(xr)
    member = changed["spec"]["template"]["spec"]["engines"][0]["members"][0]
    member["nodeSelector"]["devices"][0]["selectors"].append({"cel": {"expression": expression}})
    return changed


def running(replica: dict) -> dict:
    """A composed replica as Crossplane observes it once it runs."""
    body = copy.deepcopy(replica)
    body["metadata"].pop("ownerReferences", None)
    body["status"] = {"pods": {"expected": 1, "observed": 1, "scheduled": 1}}
    return body


def test_a_selector_over_the_cost_limit_is_refused_and_every_running_replica_kept(functions):
    xr = render.load_all(DEPLOYMENT.read_text())[0]
    placed = by_kind(functions.render(xr, COMPOSITION, required=FLEET), "ModelReplica")
    assert len(placed) == 6

    start = time.monotonic()
    rendered = functions.render(
        with_selector(xr, hostile()),
        COMPOSITION,
        observed=[running(r) for r in placed],
        required=FLEET,
    )
    seconds = time.monotonic() - start

    kept = {r["metadata"]["name"]: r["spec"] for r in by_kind(rendered, "ModelReplica")}
    assert kept == {r["metadata"]["name"]: r["spec"] for r in placed}
    scheduled = condition(composite(rendered), "ReplicasScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "InvalidSelector")
    message = scheduled["message"]
    assert message.startswith(f"engine vllm: {FIELD}: CEL selector "), message
    assert "exceeds the limit of 10000 steps" in message and "\n" not in message
    warnings = [r["message"] for r in results(rendered) if r.get("severity") == "Warning"]
    assert any(FIELD in m for m in warnings), warnings
    assert seconds < 30, seconds  # the CLI's own timeout is one minute
