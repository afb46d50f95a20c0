"""Label keys and names every modelplane function and the agent agree on."""

import hashlib

# A label value, like a DNS label, has at most 63 characters; object names
# (an InferenceCluster's, a replica's) may have 253.
VALUE_MAX = 63


def label_value(text: str) -> str:
    """A label value standing for `text`: itself when it fits, else cut with a digest of
    the whole (`<prefix>-<6 hex>`, 63 characters). Every writer and every selector of a
    label that carries a name uses it, so they agree on long names too."""
    if len(text) <= VALUE_MAX:
        return text
    suffix = "-" + hashlib.sha256(text.encode()).hexdigest()[:6]
    return text[: VALUE_MAX - len(suffix)].rstrip("-.") + suffix


GROUP = "modelplane.ai"
API_VERSION = "modelplane.ai/v1alpha1"
AGENT_API_VERSION = "agent.modelplane.ai/v1alpha1"
OBJECT_API_VERSION = "kubernetes.m.crossplane.io/v1alpha1"

# On the nodes of a pool, and on every engine pod as its nodeSelector.
POOL = "modelplane.ai/pool"

# On every ModelReplica a deployment composes. The deployment's identity is
# its namespace AND its name: two deployments with one name in two namespaces
# are different deployments.
DEPLOYMENT = "modelplane.ai/deployment"
DEPLOYMENT_NAMESPACE = "modelplane.ai/deployment-namespace"
# The cluster's name through `label_value`: InferenceCluster names may be longer than a
# label value.
CLUSTER = "modelplane.ai/cluster"
REPLICA_INDEX = "modelplane.ai/replica-index"
# On every ModelReplica a deployment composes: whether a reader of the fleet must
# still charge it (capacity/charge_label.py). Readers select the pending ones, so
# what they read is the replicas in flight, not every replica.
CHARGE = "modelplane.ai/charge"
CHARGE_PENDING = "pending"
CHARGE_COUNTED = "counted"

# On every engine pod, so a ReplicaObservation selects exactly one replica.
REPLICA = "modelplane.ai/replica"
REPLICA_NAMESPACE = "modelplane.ai/replica-namespace"
ENGINE = "modelplane.ai/engine"
ROLE = "modelplane.ai/role"

# An annotation, not a label, on every ModelReplica a deployment composes: when its
# current cluster and pools were chosen (control-plane clock, RFC 3339), so a
# PodsScheduled condition older than the placement is not taken for a failure of it.
PLACED_AT = "modelplane.ai/placed-at"

# The kind compose-model-replica requires by name.
INFERENCE_CLUSTER_KIND = "InferenceCluster"
# The kind compose-model-replica requires by the cluster label, for admission.
MODEL_REPLICA_KIND = "ModelReplica"
# The kind compose-model-replica requires by name (its deployment label), in its own
# namespace, for the templates it names by digest.
MODEL_DEPLOYMENT_KIND = "ModelDeployment"

# Set by LeaderWorkerSet's pod webhook on a group's leader and inherited by its
# workers: one value per gang copy.
LWS_GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
HOSTNAME = "kubernetes.io/hostname"
