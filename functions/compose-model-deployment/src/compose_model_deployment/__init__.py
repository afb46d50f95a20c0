"""compose-model-deployment: places a ModelDeployment's replicas on the fleet.

The entrance. Code outside this package (tests, the test kit, benchmarks, the
simulator) uses only the names below; the modules are internal, and a ruff
banned-api rule (the repository's pyproject.toml) keeps outside code off them.

    decide(req, now, matcher)   the wire: a RunFunctionRequest read once
                                (readers.read_request), then `plan`.
    plan(request, matcher)      typed inputs (`Request`) through the phases
                                of decision.py, in order.
    run_function, FunctionRunner
                                the gRPC shell: `decide`, then the outcome
                                written onto the response.

Both return an `Outcome`: `Planned` (a plan, and everything the shell writes
for it) or `Unplanned`, "nothing planned": every replica kept as it is and
`why.reason` says why (InvalidDeployment, WaitingForInputs, NoClusters,
InvalidReplica, InvalidSelector). Unplanned is an answer, not an error. The
one fatal error is `InvalidInput`: the composite is not an object with
metadata and spec (modelplane_common.guard turns it into a Fatal result).

The rest is the vocabulary of those inputs and outcomes: the requirement
names the shell asks Crossplane for, the bound on new replicas in flight a
pass meets, the deployment's reader, the typed inputs `plan` takes, the plan's
replicas and the device matching it uses.
"""

from modelplane_common.inputs import InvalidInput

from compose_model_deployment.decision import Outcome, Planned, Unplanned, plan
from compose_model_deployment.fleet_reads import (
    CLUSTERS,
    NAMESPACE_REPLICAS,
    PENDING_REPLICAS,
    whole_requirement,
)
from compose_model_deployment.fn import FunctionRunner, decide, default_matcher, run_function
from compose_model_deployment.in_flight import MAX_IN_FLIGHT_PER_NAMESPACE, Room
from compose_model_deployment.model import (
    DeploymentInput,
    DeploymentSpec,
    FailedPlacement,
    OwnReplica,
    ReplicaCondition,
    Reported,
    Tenant,
)
from compose_model_deployment.placement import (
    Change,
    InvalidSelector,
    Matcher,
    Matching,
    OthersOnCluster,
    Plan,
    PlannedReplica,
    wire_form,
)
from compose_model_deployment.readers import read_deployment
from compose_model_deployment.request import Fleet, Own, Request, View
from compose_model_deployment.tenancy import NAMESPACE, QUOTAS
from compose_model_deployment.writer import model_replica, resource_name

__all__ = [
    "CLUSTERS",
    "MAX_IN_FLIGHT_PER_NAMESPACE",
    "NAMESPACE",
    "NAMESPACE_REPLICAS",
    "PENDING_REPLICAS",
    "QUOTAS",
    "Change",
    "DeploymentInput",
    "DeploymentSpec",
    "FailedPlacement",
    "Fleet",
    "FunctionRunner",
    "InvalidInput",
    "InvalidSelector",
    "Matcher",
    "Matching",
    "OthersOnCluster",
    "Outcome",
    "Own",
    "OwnReplica",
    "Plan",
    "Planned",
    "PlannedReplica",
    "ReplicaCondition",
    "Reported",
    "Request",
    "Room",
    "Tenant",
    "Unplanned",
    "View",
    "decide",
    "default_matcher",
    "model_replica",
    "plan",
    "read_deployment",
    "resource_name",
    "run_function",
    "whole_requirement",
    "wire_form",
]
