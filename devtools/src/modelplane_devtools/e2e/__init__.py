"""A real control plane and workload cluster on 127.0.0.1, for the e2e suite.

The pieces, each in its own module: `pki` makes the certificates (openssl),
`processes` starts binaries with a log each and stops them by PID, `kube`
talks to an API server through kubectl, `stack` assembles the two clusters,
Crossplane and provider-kubernetes, `functions` runs the three composition
functions as Crossplane's External package runtime, `agent` installs and
runs the real agent on the workload cluster, `fleet` plays the workload
cluster's hardware (fake GPU nodes), `kwok` runs kwok in the kubelets' place,
`lws` runs the LeaderWorkerSet controller with its CRDs and webhooks;
`faultproxy` sits between a client and an API server to stall, cut or
throttle its requests (the agent's fault tests).
"""
