"""`make demo`: the fleet on this machine, from the packages this checkout builds.

The e2e harness (`modelplane_e2e`) brings up a control plane
(Crossplane core, the registry, Modelplane installed as the README's install
section says, from MODELPLANE_E2E_PACKAGES) and two workload clusters, each
with kube-scheduler, kwok, LeaderWorkerSet and the real agent
(`modelplane_e2e.scale.bring_up`, the fleet-scale run's bring-up).
On that stack the demo plays the platform team and the ML teams with the
README's own commands (`modelplane_e2e.install_steps`, install
step 4) and the repository's examples, unedited:

- each workload cluster is one example InferenceCluster (`example`:
  gpu-east and gpu-edge, both Observed by their agent): its
  GPU nodes are kwok nodes built from the cluster's declared pools (node
  count, devices, attributes and capacity as the DRA driver would publish
  them, the pool label), tainted as the cluster declares;
- each cluster's kubeconfig Secret holds provider-kubernetes'
  least-privilege identity (deploy/workload-cluster), under the name the
  example's `credentials.secretRef` gives;
- every example ModelDeployment of examples/deployments/ (not the
  unplaceable one) is applied in its own namespace, bound to
  `modelplane-tenant`.

`placed` then holds what the demo promises: every cluster Ready, every
deployment Ready with all its replicas, each replica on a cluster with its
pods scheduled, and on the workload clusters exactly the pods the
deployments ask for, each bound to a node by kube-scheduler.

`make demo` stays up until Ctrl-C or `make demo-down` (`down`); `make
demo-smoke` (tests/demo) brings it up, checks `placed`, and tears it down.
Everything listens on 127.0.0.1 and is stopped by its PID; the logs stay in
out/demo/<time>/.
"""
