"""The tenancy rules' limits on the real API server and the real stack (design/tenancy.md).

What the unit and render tests cannot give: the API server's own refusal of
what the XRDs bound, the garbage collector's orphaning, and what provider-
kubernetes leaves on the workload cluster. On the session's control plane,
with the `tenant` identity bound to `modelplane-tenant` in its namespace:

- the XRDs refuse a grace, `avoidFor` or `observation.maxAge` past its
  maximum and the tenancy lists past their `maxItems`, the refusal naming the
  field, and accept each bound itself (server-side dry runs: nothing stored);
- a template the allow-list refuses, and a deployment in a namespace reserved
  on every workload cluster, are `InvalidDeployment` and place nothing.

Then, in order, on one Declared cluster whose two 8-device nodes are counted
by the ledgers alone (so an orphan still charged would show), under a quota of
8 devices of the pool's class:

1. the tenant grows its running replica from 1 copy to 2: the replica is
   refused its growth (`GrowthNotAdmitted`, `QuotaExceeded`) and its workload
   on the workload cluster keeps 1 replica;
2. the platform reserves the namespace on the cluster: the running replica is
   told `NamespaceReserved`, keeps its verdict, and its workload is kept as it
   is (then the reservation is lifted);
3. the tenant deletes the deployment with `--cascade=orphan`: real Crossplane
   annotated the composed replica (`crossplane.io/composition-resource-name`),
   the garbage collector removes the controller reference, the replica says
   it is `Orphaned` and its workload leaves the workload cluster;
4. the orphan holds none of its namespace's quota: under the same quota the
   scheduler places another 8-device replica of the namespace;
5. with the quota lifted, the scheduler places a deployment that needs both
   nodes, the orphan's included, and admission admits it there.

The workloads' pods stay Pending (no DRA driver publishes the pool's class):
these rules judge the objects, which is what the workload cluster shows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from modelplane_common.labels import DEPLOYMENT, REPLICA
from modelplane_common.orphans import COMPOSED_ANNOTATION
from modelplane_e2e import fleet, install, manifests
from modelplane_e2e.kube import Kube, KubectlFailed, condition, eventually
from modelplane_e2e.stack import Stack, user_client

pytestmark = pytest.mark.e2e

CLUSTER = "gpu-limits"
SECRETS = "limits-system"
TEAM = "team-limits"
# A class and product of this module alone: no other suite's request or quota names them.
PRODUCT = {"productName": {"string": "E2E-LIMITS"}}
GPU = fleet.DeviceKind("gpu", "limits.gpu.example.com", 8, PRODUCT, {})
POOL = fleet.Pool("limits", 2, (GPU,))
QUOTA_KEY = f"{GPU.driver}.deviceclass.resource.k8s.io/devices"
ENGINE = {"name": "engine", "image": "example.invalid/e:v1"}
# The longest holds: no replica moves or is released while a step waits.
HEALING = {"unschedulableGracePeriod": "1h", "missingPodsGracePeriod": "1h"}
GRACE_REFUSAL = (
    "must be at most 1h, the platform's maximum for a grace that keeps a replica charged"
)


def deployment(name: str, *, copies: int = 1, namespace: str = TEAM) -> dict:
    engine = manifests.standalone_engine(container=dict(ENGINE), gpus=GPU.count)
    engine["copies"] = copies
    return manifests.model_deployment(
        name,
        namespace=namespace,
        engines=[engine],
        cluster_labels={"modelplane.ai/e2e": "limits"},
        healing=HEALING,
    )


def limits_cluster() -> dict:
    """Declared (the ledger alone counts), open to this module's namespace only."""
    cluster = fleet.inference_cluster(
        CLUSTER, [POOL], labels={"modelplane.ai/e2e": "limits"}, secrets=SECRETS, max_age="2m"
    )
    cluster["spec"]["observation"] = {"mode": "Declared"}
    cluster["spec"]["access"] = {
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [TEAM]}
            ]
        }
    }
    return cluster


def tenant_role_binding() -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "ml-team", "namespace": TEAM},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "modelplane-tenant",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "tenant"}],
    }


def device_quota(count: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "devices", "namespace": TEAM},
        "spec": {"hard": {QUOTA_KEY: str(count)}},
    }


@pytest.fixture(scope="module")
def tenancy(e2e_stack: Stack) -> Iterator[tuple[Kube, Kube, Kube]]:
    """(admin, tenant, workload): the platform's client, the tenant's, the workload cluster's."""
    assert e2e_stack.control_plane and e2e_stack.workload and e2e_stack.provider
    control = e2e_stack.control_plane.kube
    control.apply([manifests.namespace(SECRETS), manifests.namespace(TEAM)])
    control.apply(fleet.kubeconfig_secret(CLUSTER, SECRETS, e2e_stack.provider))
    control.apply([tenant_role_binding(), device_quota(GPU.count)])
    eventually(
        lambda: install.apis_served_by_the_configuration(control), "the Configuration's APIs"
    )
    control.apply(limits_cluster())
    try:
        yield control, user_client(e2e_stack, "tenant", "ml-team"), e2e_stack.workload.kube
    finally:
        # An orphaned replica is the platform's to delete (tenants have no delete on them).
        control.delete("modelreplica", "grow-0", TEAM)
        control.kubectl(
            "delete", "modeldeployments.modelplane.ai", "--all", "-n", "kube-public",
            "--wait=false",
        )  # fmt: skip
        fleet.remove_deployments_then_cluster(control, CLUSTER, TEAM)


def refusal(kube: Kube, manifest: dict) -> str:
    """The API server's refusal of a server-side dry-run create (nothing is stored)."""
    with pytest.raises(KubectlFailed) as refused:
        dry_run(kube, manifest)
    return str(refused.value)


def dry_run(kube: Kube, manifest: dict) -> str:
    return kube.kubectl("create", "--dry-run=server", "-f", "-", stdin=json.dumps(manifest))


# -- the XRDs' bounds, judged by the API server ------------------------------------------------


def _with_healing(**healing: str) -> dict:
    body = deployment("bounds")
    body["spec"]["healing"] = healing
    return body


def _with_observation(max_age: str) -> dict:
    cluster = limits_cluster()
    cluster["metadata"]["name"] = "bounds"
    cluster["spec"]["observation"]["maxAge"] = max_age
    return cluster


def _with_tenancy(**tenancy: list[str]) -> dict:
    cluster = limits_cluster()
    cluster["metadata"]["name"] = "bounds"
    cluster["spec"]["tenancy"] = tenancy
    return cluster


def _names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


@pytest.mark.parametrize(
    ("manifest", "refused"),
    [
        pytest.param(
            _with_healing(unschedulableGracePeriod="100000h"),
            f'spec.healing.unschedulableGracePeriod: Invalid value: "100000h": {GRACE_REFUSAL}',
            id="an unschedulable grace of 100000h is refused, naming the field",
        ),
        pytest.param(
            _with_healing(missingPodsGracePeriod="61m"),
            f'spec.healing.missingPodsGracePeriod: Invalid value: "61m": {GRACE_REFUSAL}',
            id="a missing-pods grace a minute past 1h is refused",
        ),
        pytest.param(
            _with_healing(missingClusterGracePeriod="2h"),
            f'spec.healing.missingClusterGracePeriod: Invalid value: "2h": {GRACE_REFUSAL}',
            id="a missing-cluster grace of 2h is refused",
        ),
        pytest.param(
            _with_healing(avoidFor="24h1s"),
            'spec.healing.avoidFor: Invalid value: "24h1s": must be at most 24h',
            id="avoidFor a second past 24h is refused",
        ),
        pytest.param(
            _with_observation("99999999999h"),
            'spec.observation.maxAge: Invalid value: "string": type conversion error from '
            "'string' to 'google.protobuf.Duration' evaluating rule: must be at most 24h",
            id="an observation maxAge of 99999999999h is refused, naming the field",
        ),
        pytest.param(
            _with_observation("25h"),
            'spec.observation.maxAge: Invalid value: "25h": must be at most 24h',
            id="an observation maxAge of 25h is refused",
        ),
        pytest.param(
            _with_tenancy(reservedNamespaces=_names("reserved", 65)),
            "spec.tenancy.reservedNamespaces: Too many: 65: must have at most 64 items",
            id="65 reserved namespaces are refused",
        ),
        pytest.param(
            _with_tenancy(priorityClassNames=_names("class", 33)),
            "spec.tenancy.priorityClassNames: Too many: 33: must have at most 32 items",
            id="33 approved priority classes are refused",
        ),
    ],
)
def test_the_xrds_refuse_what_they_bound(tenancy, manifest, refused):
    control, tenant, _ = tenancy
    # Tenants write deployments; clusters are the platform's.
    writer = tenant if manifest["kind"] == "ModelDeployment" else control
    message = refusal(writer, manifest)
    assert refused in message, message


@pytest.mark.parametrize(
    "manifest",
    [
        pytest.param(
            _with_healing(
                unschedulableGracePeriod="1h",
                missingPodsGracePeriod="60m",
                missingClusterGracePeriod="3600s",
                avoidFor="24h",
            ),
            id="every grace at 1h and avoidFor at 24h are accepted",
        ),
        pytest.param(_with_observation("24h"), id="an observation maxAge of 24h is accepted"),
        pytest.param(
            _with_tenancy(
                reservedNamespaces=_names("reserved", 64), priorityClassNames=_names("class", 32)
            ),
            id="64 reserved namespaces and 32 approved classes are accepted",
        ),
    ],
)
def test_the_xrds_accept_each_bound_itself(tenancy, manifest):
    control, tenant, _ = tenancy
    writer = tenant if manifest["kind"] == "ModelDeployment" else control
    dry_run(writer, manifest)


def test_a_model_replicas_own_grace_is_bounded_by_its_xrd(tenancy):
    """The replica's copy of the grace (written by Crossplane only) has the same maximum;
    the schema refuses it before the admission policy would."""
    control, _, _ = tenancy
    replica = {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelReplica",
        "metadata": {"name": "bounds", "namespace": TEAM},
        "spec": {
            "clusterName": CLUSTER,
            "engines": [
                {"name": "serve", "members": [{"role": "Standalone", "nodePoolName": POOL.name}]}
            ],
            "missingPodsGracePeriod": "100000h",
        },
    }
    message = refusal(control, replica)
    assert f'spec.missingPodsGracePeriod: Invalid value: "100000h": {GRACE_REFUSAL}' in message


# -- deployments the function refuses ----------------------------------------------------------


def _invalid(control: Kube, name: str, namespace: str) -> dict:
    scheduled = condition(
        control.get("modeldeployment.modelplane.ai", name, namespace), "ReplicasScheduled"
    )
    assert scheduled is not None, f"{namespace}/{name}: no ReplicasScheduled yet"
    assert (scheduled["status"], scheduled["reason"]) == ("False", "InvalidDeployment"), scheduled
    return scheduled


def _replicas_of(control: Kube, name: str, namespace: str) -> list[dict]:
    return control.list("modelreplicas.modelplane.ai", namespace, selector=f"{DEPLOYMENT}={name}")


def test_a_template_the_allow_list_refuses_is_invalid_and_places_nothing(tenancy):
    control, tenant, _ = tenancy
    body = deployment("extended")
    member = body["spec"]["template"]["spec"]["engines"][0]["members"][0]
    container = member["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/gpu": 8}}
    tenant.kubectl("create", "-f", "-", stdin=json.dumps(body))
    scheduled = eventually(
        lambda: _invalid(control, "extended", TEAM), "extended InvalidDeployment", timeout=60
    )
    assert scheduled["message"] == (
        "spec.template.spec.engines[0].members[0].template.spec.containers[0]"
        '.resources.limits["nvidia.com/gpu"]: is not allowed: only cpu, memory, '
        "ephemeral-storage and hugepages-* may be set; devices come only from the member's "
        'nodeSelector.devices (got "nvidia.com/gpu")'
    )
    assert _replicas_of(control, "extended", TEAM) == []
    tenant.kubectl("delete", "modeldeployment", "extended", "-n", TEAM, "--wait=false")


def test_a_deployment_in_a_namespace_reserved_on_every_cluster_is_invalid(tenancy):
    control, _, _ = tenancy
    control.apply(deployment("system", namespace="kube-public"))
    scheduled = eventually(
        lambda: _invalid(control, "system", "kube-public"), "system InvalidDeployment", timeout=60
    )
    assert scheduled["message"] == (
        "metadata.namespace: is reserved on every workload cluster (default, modelplane-system "
        "and kube-*): a tenant's pods may not run in a system namespace "
        '(got "kube-public")'
    )
    assert _replicas_of(control, "system", "kube-public") == []
    control.delete("modeldeployment", "system", "kube-public")


# -- a running replica: grown, orphaned, reserved against --------------------------------------


def _replica(control: Kube, name: str) -> dict:
    found = control.get("modelreplica", name, TEAM)
    assert found is not None, f"no ModelReplica {name}"
    return found


def _reason(replica: dict, kind: str) -> tuple[str, str]:
    found = condition(replica, kind) or {}
    return found.get("status", ""), found.get("reason", "")


def _admitted(control: Kube, name: str) -> dict:
    replica = _replica(control, name)
    assert _reason(replica, "Admitted") == ("True", "Admitted"), condition(replica, "Admitted")
    return replica


def _workload(workload: Kube, replica: str) -> dict:
    """The replica's one engine Deployment on the workload cluster."""
    found = workload.list("deployments.apps", TEAM, selector=f"{REPLICA}={replica}")
    assert len(found) == 1, f"{len(found)} Deployments of {replica} on the workload cluster"
    return found[0]


def _running(control: Kube, workload: Kube, name: str) -> dict:
    """The replica admitted, and its workload applied on the workload cluster."""
    _admitted(control, name)
    return _workload(workload, name)


def _growth_refused(control: Kube) -> dict:
    admitted = condition(_replica(control, "grow-0"), "Admitted") or {}
    assert (admitted.get("status"), admitted.get("reason")) == ("True", "GrowthNotAdmitted"), (
        admitted
    )
    assert "QuotaExceeded" in admitted["message"], admitted
    return admitted


def test_a_replica_grown_past_its_quota_keeps_its_admitted_shape_and_is_refused(tenancy):
    control, tenant, workload = tenancy
    tenant.kubectl("create", "-f", "-", stdin=json.dumps(deployment("grow")))
    before = eventually(
        lambda: _running(control, workload, "grow-0"), "grow-0 admitted and applied", timeout=180
    )
    assert before["spec"]["replicas"] == 1

    copies = [{"op": "add", "path": "/spec/template/spec/engines/0/copies", "value": 2}]
    tenant.kubectl(
        "patch", "modeldeployment", "grow", "-n", TEAM, "--type=json", "-p", json.dumps(copies)
    )
    refused = eventually(lambda: _growth_refused(control), "the growth refused", timeout=120)
    assert refused["message"] == (
        "admitted at the shape its verdict charged; its growth is not admitted: "
        f"QuotaExceeded: namespace {TEAM} quota devices allows 8 {GPU.driver} device(s): "
        "8 used, a replica requests 8"
    )
    replica = _replica(control, "grow-0")
    assert replica["spec"]["engines"][0]["copies"] == 2  # the premise: the spec grew
    charged = replica["status"]["admission"]["charged"]["engines"]
    assert [e["copies"] for e in charged] == [1]
    after = _workload(workload, "grow-0")
    assert (after["metadata"]["uid"], after["spec"]["replicas"]) == (before["metadata"]["uid"], 1)


def _namespace_reserved(control: Kube) -> dict:
    composed = condition(_replica(control, "grow-0"), "WorkloadsComposed") or {}
    assert (composed.get("status"), composed.get("reason")) == ("False", "NamespaceReserved"), (
        composed
    )
    return composed


def test_a_namespace_the_cluster_reserves_keeps_its_running_replica_as_it_is(tenancy):
    """The platform reserves the tenant's namespace on the cluster its grown replica runs
    on: the replica is told, keeps its verdict, and its workload stays as it is."""
    control, _, workload = tenancy
    running = eventually(lambda: _workload(workload, "grow-0"), "grow-0 running (as grown)")
    control.patch(
        "inferencecluster", CLUSTER, {"spec": {"tenancy": {"reservedNamespaces": [TEAM]}}}
    )
    try:
        composed = eventually(
            lambda: _namespace_reserved(control), "grow-0 WorkloadsComposed NamespaceReserved"
        )
        # The message lists every problem, the reservation first; this replica's growth
        # (the previous test's) waits behind it too.
        assert composed["message"].startswith(
            "metadata.namespace: is reserved on this workload cluster "
            f'(spec.tenancy.reservedNamespaces) (got "{TEAM}"); '
        ), composed["message"]
        assert _reason(_replica(control, "grow-0"), "Admitted")[0] == "True"
        kept = _workload(workload, "grow-0")
        assert (kept["metadata"]["uid"], kept["spec"]["replicas"]) == (
            running["metadata"]["uid"],
            running["spec"]["replicas"],
        )
    finally:
        control.patch("inferencecluster", CLUSTER, {"spec": {"tenancy": None}})


def _orphaned(control: Kube) -> dict:
    replica = _replica(control, "grow-0")
    assert _reason(replica, "PodsCreated") == ("False", "Orphaned"), condition(
        replica, "PodsCreated"
    )
    return replica


def _no_workload(workload: Kube, replica: str) -> bool:
    found = workload.list("deployments.apps", TEAM, selector=f"{REPLICA}={replica}")
    assert found == [], [d["metadata"]["name"] for d in found]
    return True


def test_an_orphaned_replica_runs_nothing(tenancy):
    control, tenant, workload = tenancy
    # The previous test's replica, running at its admitted shape.
    eventually(lambda: _workload(workload, "grow-0"), "grow-0's workload applied")
    composed = _replica(control, "grow-0")
    assert _reason(composed, "Admitted")[0] == "True", condition(composed, "Admitted")
    # What the rule reads, as real Crossplane writes it on a composed XR: the annotation
    # naming the resource in its deployment's pipeline, beside the controller reference.
    annotations = composed["metadata"].get("annotations") or {}
    assert annotations.get(COMPOSED_ANNOTATION) == "replica-0", annotations
    references = composed["metadata"].get("ownerReferences") or []
    owners = [(o["kind"], o["name"], o.get("controller")) for o in references]
    assert owners == [("ModelDeployment", "grow", True)], owners

    tenant.kubectl(
        "delete", "modeldeployment", "grow", "-n", TEAM, "--cascade=orphan", "--wait=false"
    )
    orphan = eventually(lambda: _orphaned(control), "grow-0 PodsCreated False/Orphaned")
    assert not orphan["metadata"].get("ownerReferences"), orphan["metadata"]
    assert orphan["metadata"]["annotations"][COMPOSED_ANNOTATION] == "replica-0"
    assert _reason(orphan, "Admitted") == ("False", "Orphaned")
    eventually(lambda: _no_workload(workload, "grow-0"), "grow-0's workload removed", timeout=120)
    eventually(lambda: control.get("modeldeployment", "grow", TEAM) is None, "grow deleted")


def _scheduling_decided(control: Kube, name: str) -> dict:
    scheduled = condition(control.get("modeldeployment", name, TEAM), "ReplicasScheduled") or {}
    assert scheduled.get("reason") in ("AllReplicasScheduled", "QuotaExceeded"), scheduled
    return scheduled


def test_an_orphaned_replica_holds_none_of_its_namespaces_quota(tenancy):
    control, tenant, _ = tenancy
    assert _reason(_replica(control, "grow-0"), "PodsCreated") == ("False", "Orphaned")
    tenant.kubectl("create", "-f", "-", stdin=json.dumps(deployment("quota")))
    try:
        scheduled = eventually(
            lambda: _scheduling_decided(control, "quota"), "quota's scheduling decided"
        )
        assert scheduled["reason"] == "AllReplicasScheduled", scheduled
    finally:
        tenant.kubectl("delete", "modeldeployment", "quota", "-n", TEAM, "--wait=false")
        eventually(lambda: not _replicas_of(control, "quota", TEAM), "quota's replicas gone")


def test_the_scheduler_places_into_the_capacity_an_orphan_held(tenancy):
    """With the quota lifted, capacity alone decides: a deployment that needs both nodes,
    one of which the orphan was admitted on (at 2 copies it would need both), is placed."""
    control, tenant, _ = tenancy
    assert _reason(_replica(control, "grow-0"), "PodsCreated") == ("False", "Orphaned")
    control.delete("resourcequota", "devices", TEAM)
    tenant.kubectl("create", "-f", "-", stdin=json.dumps(deployment("after", copies=2)))
    placed = eventually(lambda: _replica(control, "after-0"), "after-0 placed", timeout=120)
    assert placed["spec"]["clusterName"] == CLUSTER


def _admission_decided(control: Kube, name: str) -> dict:
    admitted = condition(_replica(control, name), "Admitted") or {}
    assert admitted.get("reason") in ("Admitted", "Overcommitted"), admitted
    return admitted


def test_admission_admits_into_the_capacity_an_orphan_held(tenancy):
    control, _, workload = tenancy
    admitted = eventually(
        lambda: _admission_decided(control, "after-0"), "after-0 judged", timeout=150
    )
    assert admitted["reason"] == "Admitted", admitted
    eventually(lambda: _workload(workload, "after-0"), "after-0's workload applied")
