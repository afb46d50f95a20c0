"""The README's install commands, as the e2e and `make demo` run them: one list, one home.

README.md's "Installing on a control plane" prints each `Step.line` below,
character for character, on a line of its own in a fenced `sh` block, in
the order of `README_ORDER`; tests/validation/test_readme_install.py holds it to
that. The harness runs a step only through `run`, which splits that same
line and runs it with the repository as its working directory ("from this
repository", as the README says), so what the README tells a user to type
and what the e2e (`install`, `agent`, `stack.provider_identity`) and the
demo (`modelplane_e2e.demo`) execute cannot drift apart.

A line may name placeholders (`$CLUSTER`, `$TEAM`, ...): the README shows
them as the user's values, `run` substitutes the harness's. Each step says
where it runs: on the control plane or on a workload cluster.

What the harness does in place of a README step, and why, is said where it
does it: Crossplane runs from its binary rather than its Helm chart
(`stack.start_crossplane`), the packages are pushed to a registry on
127.0.0.1 behind ImageConfigs (`install`, README step 2, checked by the same
test against the README's `ImageConfig`s and push targets).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from string import Template

from modelplane_devtools.paths import ROOT

from modelplane_e2e.kube import Kube

CONTROL_PLANE = "control plane"
WORKLOAD_CLUSTER = "workload cluster"


@dataclass(frozen=True)
class Step:
    """One command of the README's install section."""

    where: str  # CONTROL_PLANE or WORKLOAD_CLUSTER
    line: str  # as the README prints it, placeholders included

    def argv(self, **values: str) -> list[str]:
        """The command's words with the placeholders substituted (a missing one is an error)."""
        return [Template(word).substitute(values) for word in shlex.split(self.line)]


# Step 1: the Configuration, its dependencies and provider-kubernetes.
CONTROL_PLANE_MANIFESTS = Step(CONTROL_PLANE, "kubectl apply -f deploy/control-plane")
CONFIGURATION_HEALTHY = Step(
    CONTROL_PLANE,
    "kubectl wait configuration.pkg.crossplane.io/modelplane-fleet"
    " --for=condition=Healthy --timeout=10m",
)
# Step 3: on each workload cluster, provider-kubernetes' role, then the agent.
PROVIDER_ROLE = Step(WORKLOAD_CLUSTER, "kubectl apply -k deploy/workload-cluster")
AGENT = Step(WORKLOAD_CLUSTER, "kubectl apply -k deploy/agent")
# Step 4: each cluster's kubeconfig Secret and InferenceCluster, each team's
# namespace and binding, then ModelDeployments.
SECRETS_NAMESPACE = Step(CONTROL_PLANE, "kubectl create namespace modelplane-system")
KUBECONFIG_SECRET = Step(
    CONTROL_PLANE,
    "kubectl -n modelplane-system create secret generic $CLUSTER-kubeconfig"
    " --from-file=kubeconfig=$KUBECONFIG_FILE",
)
INFERENCE_CLUSTER = Step(CONTROL_PLANE, "kubectl apply -f examples/clusters/$CLUSTER.yaml")
TEAM_NAMESPACE = Step(CONTROL_PLANE, "kubectl create namespace $TEAM")
TEAM_BINDING = Step(
    CONTROL_PLANE,
    "kubectl -n $TEAM create rolebinding modelplane-tenant"
    " --clusterrole=modelplane-tenant --group=$TEAM",
)
MODEL_DEPLOYMENT = Step(CONTROL_PLANE, "kubectl apply -f examples/deployments/$DEPLOYMENT.yaml")

README_ORDER = (
    CONTROL_PLANE_MANIFESTS,
    CONFIGURATION_HEALTHY,
    PROVIDER_ROLE,
    AGENT,
    SECRETS_NAMESPACE,
    KUBECONFIG_SECRET,
    INFERENCE_CLUSTER,
    TEAM_NAMESPACE,
    TEAM_BINDING,
    MODEL_DEPLOYMENT,
)


def run(kube: Kube, step: Step, **values: str) -> str:
    """Run the step's command on `kube`'s cluster, from the repository's root."""
    program, *args = step.argv(**values)
    assert program == "kubectl", f"only kubectl steps run here: {step.line}"
    return kube.kubectl(*args, cwd=ROOT)
