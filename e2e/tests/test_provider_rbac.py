"""deploy/workload-cluster: provider-kubernetes' ClusterRole holds the agent's rules verbatim.

RBAC lets the provider create and bind the agent's ClusterRole (which
compose-inference-cluster composes) only while it holds every permission in
it, so the two must not drift.
"""

from __future__ import annotations

import yaml
from modelplane_devtools.paths import ROOT
from modelplane_e2e.stack import PROVIDER_USER

WORKLOAD = ROOT / "deploy" / "workload-cluster"


def _load(path):
    return yaml.safe_load(path.read_text())


def test_the_provider_holds_every_rule_of_the_agents_cluster_role():
    agent = _load(ROOT / "deploy" / "agent" / "clusterrole.yaml")["rules"]
    provider = _load(WORKLOAD / "provider-kubernetes-clusterrole.yaml")["rules"]
    missing = [rule for rule in agent if rule not in provider]
    assert missing == []


def test_the_provider_never_deletes_namespaces_crds_or_rbac():
    rules = _load(WORKLOAD / "provider-kubernetes-clusterrole.yaml")["rules"]
    never = {"namespaces", "customresourcedefinitions", "clusterroles", "clusterrolebindings"}
    deleting = [r for r in rules if "delete" in r["verbs"] and never & set(r["resources"])]
    assert deleting == []
    assert not any("*" in r["verbs"] or "*" in r["resources"] for r in rules)


def test_the_binding_names_the_user_the_e2e_signs():
    binding = _load(WORKLOAD / "clusterrolebinding.yaml")
    assert binding["roleRef"]["name"] == "modelplane-provider-kubernetes"
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": PROVIDER_USER}
    ]
