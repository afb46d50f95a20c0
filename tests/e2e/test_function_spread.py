"""Crossplane spreads a function's calls over its pods (deploy/control-plane/functions.yaml).

The runtime configuration asks two pods of each function. The session runs
one process per pod, each on its own loopback address, behind a DNS name
that answers with both (`modelplane_e2e.functions`, `dns`), as a
headless Service does; the FunctionRevision's `status.endpoint` names it.
These tests hold, from each side's own record, that Crossplane's function
runner resolved that name and sent calls to BOTH compose-model-deployment
processes: each process's log has a line per RunFunction it served (debug
level, the composite's name in it), and the DNS server's log has Crossplane's
queries. Nothing here decides where a call goes: Crossplane's gRPC client
does (round_robin, its default service config).
"""

from __future__ import annotations

import functools
import re
import time

import pytest
from modelplane_devtools.processes import Process
from modelplane_e2e import functions, manifests, runtime
from modelplane_e2e.kube import Kube, condition, eventually

pytestmark = pytest.mark.e2e

FUNCTION = "modelplane-ai-compose-model-deployment"
NAMESPACE = "spread"
DEPLOYMENT = "spread-probe"
# One line per RunFunction: run_function logs "planned" or "nothing planned ..." at debug.
CALL = re.compile(
    rf"\[debug\s*\] (?:planned|nothing planned)\b.*xr_kind=ModelDeployment"
    rf".*xr_name={DEPLOYMENT}\b"
)
# Selects no cluster: every reconcile still runs the whole pipeline.
PROBE = manifests.model_deployment(
    DEPLOYMENT,
    namespace=NAMESPACE,
    engines=[manifests.standalone_engine(container={"name": "serve"})],
    cluster_labels={"modelplane.ai/none": "spread-probe"},
)


def _processes(e2e_stack) -> list[Process]:
    names = {functions.pod_name(FUNCTION, i) for i in range(2)}
    return [p for p in e2e_stack.supervisor.processes if p.name in names]


# The SDK's debug renderer colours its output, in a file too.
COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def _calls(process: Process) -> int:
    text = process.log.read_text(errors="replace") if process.log.exists() else ""
    return sum(1 for line in COLOUR.sub("", text).splitlines() if CALL.search(line))


def _both_served(control: Kube, pods: list[Process], round_: list[int]) -> dict[str, int]:
    """Each process's call count once both served one; else a new reconcile, and why not."""
    counts = {p.name: _calls(p) for p in pods}
    if all(counts.values()):
        return counts
    # A changed annotation is a new reconcile: more calls for round_robin to spread.
    round_[0] += 1
    control.patch(
        "modeldeployment",
        DEPLOYMENT,
        {"metadata": {"annotations": {"e2e.modelplane.ai/round": str(round_[0])}}},
        namespace=NAMESPACE,
    )
    raise AssertionError(f"calls per process so far: {counts}")


def test_the_runtime_config_runs_two_processes_behind_one_dns_endpoint(planes, e2e_stack):
    control, _ = planes
    function = control.get("functions.pkg.crossplane.io", FUNCTION)
    assert function, f"Function {FUNCTION} not installed"
    assert runtime.pods(runtime.runtime_config(control, function)) == 2
    pods = _processes(e2e_stack)
    assert len(pods) == 2, [p.name for p in e2e_stack.supervisor.processes]
    revision = runtime.active_revision(control, "functionrevisions", FUNCTION)
    assert revision, f"no active FunctionRevision of {FUNCTION}"
    endpoint = revision["status"]["endpoint"]
    assert endpoint == e2e_stack.installed.functions[FUNCTION]
    assert re.fullmatch(
        rf"dns://127\.0\.0\.1:\d+/{FUNCTION}\.crossplane-system\.svc:\d+", endpoint
    ), endpoint


def test_crossplane_sends_calls_to_both_compose_model_deployment_processes(planes, e2e_stack):
    control, _ = planes
    pods = _processes(e2e_stack)
    assert len(pods) == 2
    before = {p.name: _calls(p) for p in pods}
    assert before == {p.name: 0 for p in pods}, f"{DEPLOYMENT} served before it exists: {before}"
    control.kubectl("create", "namespace", NAMESPACE)
    control.apply(PROBE)
    started = time.monotonic()
    counts = eventually(
        functools.partial(_both_served, control, pods, [0]),
        f"both {FUNCTION} processes serving RunFunction for {DEPLOYMENT}",
        timeout=180,
        every=3,
    )
    assert all(n >= 1 for n in counts.values()), counts
    # The calls were Crossplane's and they succeeded: the composite is Synced.
    synced = eventually(
        lambda: condition(control.get("modeldeployment", DEPLOYMENT, NAMESPACE), "Synced"),
        f"{DEPLOYMENT} Synced",
        timeout=60,
    )
    assert synced["status"] == "True", synced
    # Crossplane found both through the name: its resolver asked the endpoint's DNS server.
    (resolver,) = [p for p in e2e_stack.supervisor.processes if p.name == f"{FUNCTION}-dns"]
    queries = resolver.log.read_text()
    assert re.search(rf" A {FUNCTION}\.crossplane-system\.svc\.", queries), queries[-2000:]
    print(f"calls per process after {time.monotonic() - started:.0f}s: {counts}")
