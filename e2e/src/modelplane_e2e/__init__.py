"""A real control plane and workload cluster on 127.0.0.1, for the e2e suite.

The pieces, each in its own module: `pki` makes the certificates (openssl),
`processes` starts binaries with a log each and stops them by PID, `kube`
talks to an API server through kubectl, `stack` assembles the two clusters,
Crossplane and a registry, `install` installs Modelplane as the README does
(the Configuration and its dependencies, from `deploy/control-plane`),
`runtime` does for each package revision what Crossplane's Deployment
runtime would, `functions` (our packages and the functions' runtimes) and
`provider` (provider-kubernetes' package and runtime) run what the package
manager installed, under the External package runtime, `agent` installs and
runs the real agent on the workload cluster, `fleet` plays the workload
cluster's hardware (fake GPU nodes), `kwok` runs kwok in the kubelets' place,
`lws` runs the LeaderWorkerSet controller with its CRDs and webhooks;
`faultproxy` sits between a client and an API server to stall, cut or
throttle its requests (the agent's fault tests); `scale` is the fleet-scale
run (`make e2e-scale`, and its reduced profile in tests/e2e/test_scale.py).
"""
