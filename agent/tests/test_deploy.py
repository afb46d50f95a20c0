"""The install manifests agree with the design and with what the agent serves."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import yaml
from modelplane_agent.server import serve

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "agent"


def load(name: str) -> dict:
    return yaml.safe_load((DEPLOY / name).read_text())


def test_the_cluster_role_is_the_one_in_the_design():
    design = (ROOT / "design" / "observation.md").read_text()
    block = re.search(r"```yaml\n(apiVersion: rbac.*?)```", design, re.S)
    assert block is not None
    documented = yaml.safe_load(block.group(1))
    deployed = load("clusterrole.yaml")
    assert deployed["rules"] == documented["rules"]
    assert deployed["metadata"]["name"] == documented["metadata"]["name"]


def test_the_binding_grants_the_role_to_the_deployment_service_account():
    binding, deployment = load("clusterrolebinding.yaml"), load("deployment.yaml")
    account = load("serviceaccount.yaml")
    pod = deployment["spec"]["template"]["spec"]
    assert binding["roleRef"]["name"] == load("clusterrole.yaml")["metadata"]["name"]
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": account["metadata"]["name"],
            "namespace": account["metadata"]["namespace"],
        }
    ]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert deployment["metadata"]["namespace"] == load("namespace.yaml")["metadata"]["name"]


def test_the_probes_ask_paths_the_agent_answers():
    container = load("deployment.yaml")["spec"]["template"]["spec"]["containers"][0]
    paths = {
        container[probe]["httpGet"]["path"]
        for probe in ("livenessProbe", "readinessProbe", "startupProbe")
    }
    server = serve("127.0.0.1", 0, lambda: True, lambda: False)
    try:
        port = server.server_address[1]
        answers = {}
        for path in [*sorted(paths), "/metrics"]:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}") as response:
                    answers[path] = response.status
            except urllib.error.HTTPError as error:
                answers[path] = error.code
    finally:
        server.shutdown()
    assert answers == {"/healthz": 200, "/readyz": 503, "/metrics": 200}
