"""The manifests a ModelReplica runs on its workload cluster, and their names.

Mapping (one replica, in the workload cluster namespace named like the
replica's own namespace)
    - Standalone engine -> one apps/v1 Deployment, `replicas = copies`. Its
      pods may share nodes: copies are independent.
    - Leader + Worker engine -> one leaderworkerset.x-k8s.io/v1
      LeaderWorkerSet, `replicas = copies`, `size = 1 + worker.nodes`. The
      pods of one gang copy land on DISTINCT nodes through a required pod
      anti-affinity on kubernetes.io/hostname whose `matchLabelKeys` is the
      LWS group key: the LWS webhook labels the leader with a key unique to
      its group and the workers inherit it, and the API server merges the
      pod's own value into the selector, so the term repels exactly the
      pods of the same copy. Should a cluster ignore matchLabelKeys, the
      term selects every pod of the engine and copies spread too: stricter,
      never looser.
    - Every member that claims devices -> one resource.k8s.io/v1
      ResourceClaimTemplate; each pod gets its own claim from it, named
      POD_CLAIM in the pod and referenced by every container.
    - The replica -> one agent ReplicaObservation selecting its pods.
    - The namespace they all live in is not the replica's: its
      ModelDeployment composes it, one Namespace Object per (deployment,
      cluster) (modelplane_common.workload_namespace). A replica composed
      by an earlier release still observes its own Namespace Object
      (`namespace_resource`): it is a leftover like any other, dropped by
      the next clean pass, and its management policies (no Delete) keep
      the remote namespace. design/tenancy.md.

Every pod carries `modelplane.ai/pool` as nodeSelector, the replica's
tolerations, and the labels REPLICA, REPLICA_NAMESPACE, ENGINE and ROLE.
Selecting on REPLICA and REPLICA_NAMESPACE together is namespace-safe: two
replicas with one name in two namespaces never select each other's pods.

Names
    Names on the workload cluster carry a short digest of the parts they
    are made of (modelplane_common.remote_object.bounded_name), so that
    `a-b`/`c` and `a`/`b-c` never collide, and are bounded: 40 characters
    for workloads (a LeaderWorkerSet's name grows into StatefulSet, pod and
    revision-label names limited to 63), 63 for everything else. Label
    values longer than 63 are bounded the same way. Object names have three
    parts (replica, cluster, engine or `pods`) or five (a claim template's).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from modelplane_common import labels, pod_template, remote_object
from modelplane_common.labels import label_value
from modelplane_common.remote_object import bounded_name

from compose_model_replica.spec import LEADER, WORKER, Engine, Member

POD_CLAIM = pod_template.DEVICE_CLAIM
WORKLOAD_NAME_MAX = 40

# A workload is ready when every pod it should run is available, not just
# when the controller's Available condition says "minimum availability".
DEPLOYMENT_READY = (
    "has(object.status) && has(object.status.conditions) && "
    "object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True') && "
    "has(object.status.availableReplicas) && "
    "object.status.availableReplicas >= object.spec.replicas"
)
LEADER_WORKER_SET_READY = (
    "has(object.status) && has(object.status.conditions) && "
    "object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True') && "
    "has(object.status.readyReplicas) && "
    "object.status.readyReplicas >= object.spec.replicas"
)


# Composition resource names. The cluster is part of each, so a replica
# moved to another cluster replaces its Objects instead of retargeting them.
def workload_resource(cluster: str, engine: str) -> str:
    return f"{cluster}/{engine}/workload"


def claims_resource(cluster: str, engine: str, role: str) -> str:
    return f"{cluster}/{engine}/claims-{role.lower()}"


def observation_resource(cluster: str) -> str:
    return f"{cluster}/observation"


def namespace_resource(cluster: str) -> str:
    """The workload Namespace's Object an earlier release composed per replica; observed
    until a clean pass drops it (its policies keep the remote namespace)."""
    return f"{cluster}/namespace"


def is_engine_resource(cluster: str, name: str) -> bool:
    """Whether a composition resource name is one of an engine's Objects on `cluster`
    (`<cluster>/<engine>/...`): the ReplicaObservation and an earlier release's workload
    Namespace are composed before admission and run nothing, so they are not."""
    return name.startswith(f"{cluster}/") and name not in (
        observation_resource(cluster),
        namespace_resource(cluster),
    )


def engine_prefix(cluster: str, engine: str) -> str:
    return f"{cluster}/{engine}/"


class ReplicaManifests:
    """Builds one replica's manifests: its engines' workloads and claim templates and its
    ReplicaObservation, each wrapped in the Object that applies it on the workload
    cluster, named and labelled as above."""

    def __init__(self, name: str, namespace: str, cluster: str, provider_config: str) -> None:
        self.name = name
        self.namespace = namespace
        self.cluster = cluster
        self.provider_config = provider_config

    @property
    def selector(self) -> dict[str, str]:
        """Labels that select exactly this replica's pods, in any namespace."""
        return {
            labels.REPLICA: label_value(self.name),
            labels.REPLICA_NAMESPACE: self.namespace,
        }

    def engine_labels(self, engine: str) -> dict[str, str]:
        return {**self.selector, labels.ENGINE: engine}

    def workload_name(self, engine: str) -> str:
        return bounded_name(self.name, engine, limit=WORKLOAD_NAME_MAX)

    def claim_template_name(self, engine: str, role: str) -> str:
        return bounded_name(self.name, engine, role.lower())

    def object_name(self, *parts: str) -> str:
        return bounded_name(self.name, self.cluster, *parts)

    def wrap(
        self,
        object_name: str,
        manifest: dict,
        *,
        ready_when: str | None = None,
    ) -> dict:
        """A provider-kubernetes Object applying `manifest` on the workload cluster."""
        return remote_object.wrap(
            name=object_name,
            namespace=self.namespace,
            cluster=self.cluster,
            provider_config=self.provider_config,
            manifest=manifest,
            ready_when=ready_when,
        )

    def _metadata(self, name: str, extra_labels: Mapping[str, str]) -> dict:
        return {"name": name, "namespace": self.namespace, "labels": dict(extra_labels)}

    def pod_template(
        self,
        engine: Engine,
        member: Member,
        tolerations: tuple[Mapping, ...],
    ) -> dict:
        """The member's pod template, pinned, labelled, claiming and (in a gang) spread."""
        metadata = copy.deepcopy(dict(member.pod_metadata))
        own_labels = {**self.engine_labels(engine.name), labels.ROLE: member.role}
        metadata["labels"] = {**(metadata.get("labels") or {}), **own_labels}
        spec = copy.deepcopy(dict(member.pod_spec))
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), labels.POOL: member.pool}
        merged = list(spec.get("tolerations") or [])
        merged += [dict(t) for t in tolerations if dict(t) not in merged]
        if merged:
            spec["tolerations"] = merged
        if member.claims_devices:
            self._claim_devices(spec, self.claim_template_name(engine.name, member.role))
        if engine.is_gang:
            self._spread_gang(spec, engine.name)
        return {"metadata": metadata, "spec": spec}

    @staticmethod
    def _claim_devices(spec: dict, template_name: str) -> None:
        claims = [c for c in spec.get("resourceClaims") or [] if c.get("name") != POD_CLAIM]
        claims.append({"name": POD_CLAIM, "resourceClaimTemplateName": template_name})
        spec["resourceClaims"] = claims
        containers = spec["containers"]
        # A template that already routes the claim to chosen containers keeps
        # its choice; otherwise every container sees the devices.
        routed = any(
            c.get("name") == POD_CLAIM
            for container in containers
            for c in ((container.get("resources") or {}).get("claims") or [])
        )
        if routed:
            return
        for container in containers:
            resources = container.setdefault("resources", {})
            resources["claims"] = [*(resources.get("claims") or []), {"name": POD_CLAIM}]

    def _spread_gang(self, spec: dict, engine: str) -> None:
        affinity = spec.setdefault("affinity", {})
        anti = affinity.setdefault("podAntiAffinity", {})
        terms = anti.setdefault("requiredDuringSchedulingIgnoredDuringExecution", [])
        terms.append(
            {
                "labelSelector": {"matchLabels": self.engine_labels(engine)},
                "matchLabelKeys": [labels.LWS_GROUP_KEY],
                "topologyKey": labels.HOSTNAME,
            }
        )

    def deployment(self, engine: Engine, tolerations: tuple[Mapping, ...]) -> dict:
        member = engine.members[0]
        selector = self.engine_labels(engine.name)
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": self._metadata(self.workload_name(engine.name), selector),
            "spec": {
                "replicas": engine.copies,
                "selector": {"matchLabels": selector},
                # Never surge: the fleet scheduler charged exactly `copies`
                # pods to the pool, and a surge pod would need devices it
                # did not reserve.
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
                },
                "template": self.pod_template(engine, member, tolerations),
            },
        }

    def leader_worker_set(self, engine: Engine, tolerations: tuple[Mapping, ...]) -> dict:
        leader, worker = engine.member(LEADER), engine.member(WORKER)
        assert worker.worker_nodes is not None
        return {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": self._metadata(
                self.workload_name(engine.name), self.engine_labels(engine.name)
            ),
            "spec": {
                "replicas": engine.copies,
                "startupPolicy": "LeaderCreated",
                "leaderWorkerTemplate": {
                    "size": 1 + worker.worker_nodes,
                    "restartPolicy": "RecreateGroupOnPodRestart",
                    "leaderTemplate": self.pod_template(engine, leader, tolerations),
                    "workerTemplate": self.pod_template(engine, worker, tolerations),
                },
            },
        }

    def resource_claim_template(self, engine: Engine, member: Member) -> dict:
        requests = []
        for request in member.requests:
            exactly: dict = {
                "deviceClassName": request.device_class,
                "allocationMode": "ExactCount",
                "count": request.count,
            }
            if request.selectors:
                exactly["selectors"] = [{"cel": {"expression": e}} for e in request.selectors]
            requests.append({"name": request.name, "exactly": exactly})
        own_labels = {**self.engine_labels(engine.name), labels.ROLE: member.role}
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": self._metadata(
                self.claim_template_name(engine.name, member.role), own_labels
            ),
            "spec": {
                # Copied onto every claim, so claims are traceable to the replica.
                "metadata": {"labels": own_labels},
                "spec": {"devices": {"requests": requests}},
            },
        }

    def replica_observation(self) -> dict:
        return {
            "apiVersion": labels.AGENT_API_VERSION,
            "kind": "ReplicaObservation",
            # One per replica, and a replica's name is unique in its namespace.
            "metadata": self._metadata(self.name, self.selector),
            "spec": {"selector": {"matchLabels": self.selector}},
        }

    def engine_objects(self, engine: Engine, tolerations: tuple[Mapping, ...]) -> dict[str, dict]:
        """Composition resource name -> Object, for every resource of one engine."""
        objects = {}
        for member in engine.members:
            if member.claims_devices:
                objects[claims_resource(self.cluster, engine.name, member.role)] = self.wrap(
                    self.object_name(engine.name, member.role.lower(), "claims"),
                    self.resource_claim_template(engine, member),
                )
        if engine.is_gang:
            manifest, ready_when = (
                self.leader_worker_set(engine, tolerations),
                LEADER_WORKER_SET_READY,
            )
        else:
            manifest, ready_when = self.deployment(engine, tolerations), DEPLOYMENT_READY
        objects[workload_resource(self.cluster, engine.name)] = self.wrap(
            self.object_name(engine.name), manifest, ready_when=ready_when
        )
        return objects

    def observation_object(self) -> dict:
        return self.wrap(self.object_name("pods"), self.replica_observation())
