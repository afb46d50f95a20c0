"""Tenants write ModelDeployments; only Crossplane writes ModelReplicas (design/tenancy.md).

On the session's control plane, with deploy/control-plane applied verbatim:
two tenant identities, each a client certificate from the harness CA (a user
and group, as an identity provider would name an ML team's member):

- `tenant`, bound in its namespace to the documented `modelplane-tenant`
  ClusterRole: it creates a ModelDeployment; creating a ModelReplica or
  patching one's status is refused (by RBAC).
- `broad`, bound to what Crossplane's generated edit role grants (`*` on the
  XRs and their status): RBAC lets it through, and the admission policy
  refuses it, naming it.

Crossplane itself (its service account, as the harness runs it) still
composes the deployment's ModelReplica and writes its status.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from modelplane_e2e import fleet, install, manifests
from modelplane_e2e.kube import Kube, KubectlFailed, condition, eventually
from modelplane_e2e.stack import Stack, user_client

pytestmark = pytest.mark.e2e

CLUSTER = "gpu-tenancy"
SECRETS = "tenancy-system"
TEAM = "team-tenancy"
POLICY_REFUSAL = "ModelReplicas are written by Crossplane only"
# A product no other suite's selectors ask for: their deployments, some without a
# clusterSelector, are never placed on this module's cluster.
GPU = fleet.DeviceKind("gpu", "gpu.nvidia.com", 8, {"productName": {"string": "E2E-TENANCY"}}, {})
POOL = fleet.Pool("tenancy", 2, (GPU,))
ENGINE = {"name": "engine", "image": "example.invalid/e:v1"}


def role_binding(name: str, role_kind: str, role: str, user: str) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": TEAM},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }


def crossplane_edit_grant() -> dict:
    """What Crossplane's generated `crossplane:composite:<xrd>:aggregate-to-edit` roles grant
    (every verb on the XR and its status), as a Role in the tenant's namespace."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "as-crossplane-edit", "namespace": TEAM},
        "rules": [
            {
                "apiGroups": ["modelplane.ai"],
                "resources": [
                    "modeldeployments",
                    "modeldeployments/status",
                    "modelreplicas",
                    "modelreplicas/status",
                ],
                "verbs": ["*"],
            }
        ],
    }


def deployment(name: str) -> dict:
    return manifests.model_deployment(
        name,
        namespace=TEAM,
        engines=[manifests.standalone_engine(container=ENGINE, gpus=8)],
        cluster_labels={"modelplane.ai/e2e": "tenancy"},
    )


def forged_replica(name: str, composed: dict) -> dict:
    """A copy of a composed ModelReplica stamped as placed long ago, as a tenant would
    forge one to jump its cluster's queue (schema-valid: only identity decides)."""
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelReplica",
        "metadata": {
            "name": name,
            "namespace": TEAM,
            "labels": {"modelplane.ai/cluster": CLUSTER},
            "annotations": {"modelplane.ai/placed-at": "2000-01-01T00:00:00Z"},
        },
        "spec": composed["spec"],
    }


POLICY = "modelplane-modelreplicas-written-by-crossplane"


def refusal(kube: Kube, *args: str, stdin: str | None = None) -> str:
    """kubectl's error for a request that must be refused."""
    with pytest.raises(KubectlFailed) as refused:
        kube.kubectl(*args, stdin=stdin)
    return str(refused.value)


def policy_status(control: Kube) -> dict:
    """The policy's status: the API server's type-checking warnings, for a failure's record."""
    return (control.get("validatingadmissionpolicy", POLICY) or {}).get("status") or {}


@pytest.fixture(scope="module")
def tenants(e2e_stack: Stack) -> Iterator[tuple[Kube, Kube, Kube]]:
    """(admin, tenant, broad): the platform's client and the two tenant identities."""
    assert e2e_stack.control_plane is not None
    control = e2e_stack.control_plane.kube
    eventually(
        lambda: install.apis_served_by_the_configuration(control), "the Configuration's APIs"
    )
    control.apply([manifests.namespace(SECRETS), manifests.namespace(TEAM)])
    assert e2e_stack.provider is not None
    control.apply(fleet.kubeconfig_secret(CLUSTER, SECRETS, e2e_stack.provider))
    control.apply(
        fleet.inference_cluster(
            CLUSTER, [POOL], labels={"modelplane.ai/e2e": "tenancy"}, secrets=SECRETS, max_age="2m"
        )
    )
    control.apply(
        [
            role_binding("ml-team", "ClusterRole", "modelplane-tenant", "tenant"),
            crossplane_edit_grant(),
            role_binding("ml-team-broad", "Role", "as-crossplane-edit", "broad"),
        ]
    )
    yield (
        control,
        user_client(e2e_stack, "tenant", "ml-team"),
        user_client(e2e_stack, "broad", "ml-team"),
    )
    control.delete("modeldeployment", "chat", TEAM)
    control.delete("inferencecluster", CLUSTER)


def _composed_replica(control: Kube) -> dict:
    """The ModelReplica Crossplane composed for the tenant's deployment, once its status
    carries the Admitted condition compose-model-replica sets."""
    found = control.list("modelreplicas.modelplane.ai", TEAM)
    assert len(found) == 1, f"{len(found)} ModelReplicas in {TEAM}"
    (replica,) = found
    assert condition(replica, "Admitted"), f"no Admitted condition yet: {replica.get('status')}"
    return replica


def test_a_tenant_creates_a_model_deployment_and_crossplane_composes_its_replica(tenants):
    control, tenant, _ = tenants
    tenant.kubectl("create", "-f", "-", stdin=json.dumps(deployment("chat")))
    replica = eventually(
        lambda: _composed_replica(control),
        "the deployment's ModelReplica, with status written by Crossplane",
        timeout=120,
    )
    assert replica["spec"]["clusterName"] == CLUSTER


@pytest.mark.parametrize(
    ("who", "refused_by"),
    [
        pytest.param(1, "forbidden", id="the-documented-tenant-role-grants-no-write-on-replicas"),
        pytest.param(2, POLICY_REFUSAL, id="crossplanes-edit-grant-is-overruled-by-the-policy"),
    ],
)
def test_a_tenant_cannot_create_a_model_replica(tenants, who, refused_by):
    kube: Kube = tenants[who]
    composed = eventually(lambda: _composed_replica(tenants[0]), "a composed ModelReplica")
    forged = forged_replica(f"forged-{who}", composed)
    message = refusal(kube, "create", "-f", "-", stdin=json.dumps(forged))
    assert refused_by in message, (message, policy_status(tenants[0]))
    assert tenants[0].get("modelreplica", f"forged-{who}", TEAM) is None


@pytest.mark.parametrize(
    ("who", "refused_by"),
    [
        pytest.param(1, "forbidden", id="the-documented-tenant-role-grants-no-status-write"),
        pytest.param(2, POLICY_REFUSAL, id="crossplanes-edit-grant-is-overruled-for-status-too"),
    ],
)
def test_a_tenant_cannot_patch_a_model_replica_status(tenants, who, refused_by):
    control: Kube = tenants[0]
    replica = eventually(
        lambda: _composed_replica(control), "the composed ModelReplica", timeout=120
    )
    name = replica["metadata"]["name"]
    forged = {"status": {"admission": {"placedAt": "forged", "verdict": "Admitted"}}}
    message = refusal(
        tenants[who], "patch", "modelreplica", name, "-n", TEAM, "--subresource=status",
        "--type=merge", "-p", json.dumps(forged),
    )  # fmt: skip
    assert refused_by in message, (message, policy_status(control))
    after = control.get("modelreplica", name, TEAM) or {}
    assert (after.get("status") or {}).get("admission", {}).get("placedAt") != "forged"


def test_the_policy_names_the_identity_it_refuses(tenants):
    control, _, broad = tenants
    composed = eventually(lambda: _composed_replica(control), "a composed ModelReplica")
    forged = forged_replica("named", composed)
    message = refusal(broad, "create", "-f", "-", stdin=json.dumps(forged))
    assert f"{POLICY_REFUSAL} (from ModelDeployments): broad may not CREATE a ModelReplica" in (
        message
    ), (message, policy_status(control))


def test_kubernetes_bookkeeping_of_a_model_replica_passes_and_a_label_change_does_not(tenants):
    """The garbage collector's finalizer and owner-reference updates come from another
    identity than Crossplane's (here the harness's admin, in system:masters): they change
    nothing admission reads, so they pass; a label change by the same identity does not."""
    control = tenants[0]
    replica = eventually(lambda: _composed_replica(control), "a composed ModelReplica", timeout=120)
    name, kept = replica["metadata"]["name"], replica["metadata"].get("finalizers") or []
    probe = "e2e.modelplane.ai/probe"
    control.patch(
        "modelreplica", name, {"metadata": {"finalizers": [*kept, probe]}}, namespace=TEAM
    )
    found = control.get("modelreplica", name, TEAM) or {}
    assert probe in found["metadata"].get("finalizers", []), found["metadata"]
    control.patch("modelreplica", name, {"metadata": {"finalizers": kept or None}}, namespace=TEAM)
    found = control.get("modelreplica", name, TEAM) or {}
    assert probe not in (found["metadata"].get("finalizers") or []), found["metadata"]
    relabel = {"metadata": {"labels": {"modelplane.ai/cluster": "elsewhere"}}}
    message = refusal(
        control, "patch", "modelreplica", name, "-n", TEAM, "--type=merge", "-p",
        json.dumps(relabel),
    )  # fmt: skip
    assert f"{POLICY_REFUSAL} (from ModelDeployments): admin may not UPDATE a ModelReplica" in (
        message
    ), (message, policy_status(control))
