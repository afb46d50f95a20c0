# The two commands the README promises, and the helpers around them.
.PHONY: setup render test packages e2e-tools e2e e2e-floor demo demo-down demo-smoke e2e-scale e2e-settled e2e-admission e2e-admission-baseline bench-admission bench-fleet bench-partitions schemas schemas-check bench bench-agent agent-live agent-oracle agent-oracle-matrix lint fuzz sim sim-trace version release-dry-run

setup:
	bash scripts/setup.sh

# Set up, then render the example fleet with the real Crossplane CLI.
render: setup
	uv run --frozen modelplane-render

# Build dist/xpkg/<function>.xpkg for the three functions, the Configuration
# dist/xpkg/modelplane-fleet.xpkg (apis/) and the agent's image
# dist/images/modelplane-agent.tar, without Docker.
packages: setup
	bash scripts/build-packages.sh

# Set up, build the packages (their tests run what is inside them), then run
# every test (unit, property, simulation, render, validation, packages).
test: setup packages
	uv run --frozen pytest

# The binaries the e2e suite runs (Kubernetes, etcd, the newest Crossplane
# core, provider-kubernetes, an OCI registry, kwok, the LeaderWorkerSet
# controller), built from the pinned modules in tools/ into .tools/bin, and the
# newest supported Kubernetes minor's kube-apiserver, kube-controller-manager and
# kube-scheduler (.tools/kubernetes/<version>/bin).
e2e-tools:
	bash scripts/e2e-tools.sh

# The supported Kubernetes versions, oldest first (design/agent.md, "Version matrix";
# modelplane_e2e.kube_versions); CI runs the agent's live tests on the oldest
# and the newest.
KUBE_MATRIX := v1.35.4 v1.36.3 v1.37.2
KUBE_NEWEST := v1.37.2

# Set up, build the Function packages and the e2e binaries, then run the
# agent against a real API server and kube-scheduler (agent/tests/live, its
# own cluster, torn down before the next starts) and the end-to-end story on
# a real control plane and workload cluster, with Modelplane installed as the
# README installs it (deploy/control-plane: the Configuration, whose
# dependencies bring the functions and provider-kubernetes, from these
# packages) and the real agent (tests/e2e; logs in out/e2e/), on the newest
# Crossplane core the project supports (modelplane_e2e.crossplane_versions:
# MODELPLANE_E2E_VERSIONS=newest). Then the agent's story test and 30 oracle
# states again on the newest supported Kubernetes.
e2e: setup packages e2e-tools
	MODELPLANE_E2E_PACKAGES=dist/xpkg uv run --frozen pytest agent/tests/live tests/e2e -m e2e
	MODELPLANE_KUBE_VERSION=$(KUBE_NEWEST) uv run --frozen pytest -m e2e \
		agent/tests/live/test_agent_live.py agent/tests/live/test_oracle.py

# The same end-to-end story on the oldest releases the Configuration admits
# (Crossplane core v2.3.4, provider-kubernetes v1.2.1): the other end of the
# supported range (agent/tests/live runs no Crossplane, so `make e2e` covers it).
e2e-floor: setup packages e2e-tools
	MODELPLANE_E2E_VERSIONS=floor MODELPLANE_E2E_PACKAGES=dist/xpkg uv run --frozen pytest tests/e2e -m e2e

# The fleet on this machine (e2e/src/modelplane_e2e/demo): a control
# plane with Crossplane and Modelplane installed from these packages by the
# README's install commands, two workload clusters (kube-scheduler, kwok GPU
# nodes with DRA ResourceSlices, LeaderWorkerSet, the agent) playing
# examples/clusters/gpu-east.yaml and gpu-edge.yaml, and every example
# ModelDeployment placed and Ready. Stays up, printing the kubeconfigs and
# what to look at, until Ctrl-C or `make demo-down`; logs in out/demo/<time>/.
demo: setup packages e2e-tools
	MODELPLANE_E2E_PACKAGES=dist/xpkg uv run --frozen python -m modelplane_e2e.demo up

# Stop the running demo (its processes by PID); its logs stay in out/demo/<time>/.
demo-down:
	uv run --frozen python -m modelplane_e2e.demo down

# The demo up, every example placed and counted in the functions' metrics (checked),
# then torn down: tests/demo, as CI runs it.
demo-smoke: setup packages e2e-tools
	MODELPLANE_E2E_PACKAGES=dist/xpkg uv run --frozen pytest tests/demo -m e2e

# The fleet-scale run (e2e/src/modelplane_e2e/scale, outside CI):
# a control plane and two workload clusters (kube-scheduler, kwok, LWS and the
# real agent on each), 500 kwok nodes in all with DRA ResourceSlices and
# fragmenting background load, 100 seeded ModelDeployments per arm over 10
# minutes, Observed and Declared arms side by side; Modelplane from its
# packages, as `make e2e`. Prints the table and writes it, with the logs, to
# out/scale/<time>/. Sizes are options: SCALE_ARGS="--nodes 60 --deployments 40".
e2e-scale: setup packages e2e-tools
	MODELPLANE_E2E_PACKAGES=dist/xpkg uv run --frozen python -m modelplane_e2e.scale $(SCALE_ARGS)

# What a fleet at rest costs the control plane (e2e/src/modelplane_e2e/scale/settled.py,
# outside CI): ModelDeployments of replicas of one 1-GPU pod, created at most one
# replica a second, Ready, then a window in which nothing is listed. Prints a table
# (CPU per process, the control plane API server's writes per replica-minute by
# resource and verb) and ends with one line for comparing runs:
#   settled: replicas=<n> writes-per-replica-minute=<x> control-plane-cpu-s-per-minute=<y>
# Profiles (SETTLED_ARGS="--profile fleet"; every size is an option, see --help):
#   small, the default: 20 x 10 = 200 replicas on one workload cluster of 28 kwok
#     nodes; at least 14 min once the stack is up (200 s creating, 340 s warm, a
#     300 s window), plus what the batches of 5 wait to be Ready.
#   fleet: 200 x 10 = 2,000 replicas over two workload clusters of 138 kwok nodes
#     each, 20 a batch; at least 44 min once the stack is up (2,000 s creating).
# With SETTLED_ARGS="--before <folder of an earlier commit's dist/xpkg>" the same
# fleet then runs on those functions for a second window. Writes out/settled/<time>/.
e2e-settled: setup packages e2e-tools
	MODELPLANE_E2E_PACKAGES=dist/xpkg uv run --frozen python -m modelplane_e2e.scale.settled $(SETTLED_ARGS)

# The admission burst alone (tests/e2e/test_admission_burst.py, 30 deployments
# at once on a fleet at 90% use), functions served from this workspace; prints
# the figure e2e/README.md states and writes it to
# out/e2e/<time>/.
e2e-admission: setup e2e-tools
	uv run --frozen pytest tests/e2e/test_admission_burst.py -m e2e -s

# The same burst on the code from before admission (ADMISSION_BASE, the last
# commit without it): that commit's functions, common and schemas are put
# first on the functions' PYTHONPATH. Measures, asserts nothing about the target.
ADMISSION_BASE ?= 85f21c5
e2e-admission-baseline: setup e2e-tools
	rm -rf out/admission-base && mkdir -p out/admission-base
	git archive $(ADMISSION_BASE) common functions schemas | tar -x -C out/admission-base
	MODELPLANE_E2E_BASELINE=1 PYTHONPATH=$$(ls -d $(CURDIR)/out/admission-base/common/src $(CURDIR)/out/admission-base/schemas/src $(CURDIR)/out/admission-base/functions/*/src | paste -sd:) \
		uv run --frozen pytest tests/e2e/test_admission_burst.py -m e2e -s

# Every step of the release (.github/workflows/release.yaml) but signing and
# the push to the public registry: the packages and the agent's image pushed
# under their public names to an OCI registry on 127.0.0.1, pulled back and
# checked (digests, both platforms), an SBOM per image (syft); the same code
# the workflow runs (modelplane_devtools.release). Writes out/release/<time>/.
release-dry-run: setup packages
	bash scripts/e2e-tools.sh registry syft
	uv run --frozen python -m modelplane_devtools.release dry-run

# The one version (pyproject.toml's), which images, packages and the e2e read;
# `make version SET=X.Y.Z` rewrites it and every file that repeats it.
version:
	uv run --frozen --no-sync python -m modelplane_devtools.version $(if $(SET),--set $(SET))

schemas:
	uv run --frozen python schemas/generate.py

schemas-check:
	uv run --frozen python schemas/generate.py --check

bench:
	uv run --frozen python tests/bench/bench_deployment.py

bench-agent:
	uv run --frozen python tests/bench/bench_agent.py

bench-admission:
	uv run --frozen python tests/bench/bench_admission.py

# kube-scheduler's time to allocate one claim of k MIG partitions, against its filter
# timeout (design/agent.md); starts a workload cluster of MODELPLANE_KUBE_VERSION.
bench-partitions:
	uv run --frozen python tests/bench/bench_partition_search.py --kube "$${MODELPLANE_KUBE_VERSION:-v1.37}"

# The control plane's cost at fleet scale against its targets (design/scheduler.md).
bench-fleet:
	uv run --frozen python tests/bench/bench_fleet.py

# The fleet simulator on the default fleet and arrivals (examples/sim): every
# accounting policy through the real placement core; prints the summary table
# and writes out/sim/<time>/report.html with its plots.
sim:
	uv run --frozen modelplane-sim

# The same table on the Alibaba openb trace (sim/README.md
# says how to fetch it into TRACE; it is not shipped): a tenth of its GPU nodes by default.
TRACE ?= out/openb
TRACE_NODES_EVERY ?= 10
sim-trace:
	uv run --frozen modelplane-sim --trace $(TRACE) --trace-nodes-every $(TRACE_NODES_EVERY)

# The agent against a real kube-apiserver, kube-controller-manager and kube-scheduler
# (binaries in .tools/bin from the e2e tooling) alone; CI runs it in make e2e.
# MODELPLANE_KUBE_VERSION=v1.37.2 (or v1.36.3, after
# `bash scripts/e2e-tools.sh kubernetes-1.36`) runs it on that version.
agent-live: setup e2e-tools
	uv run --frozen pytest -m e2e agent/tests/live -q

# The oracle's long profile: kube-scheduler against the agent's per-node view over
# 300 seeded random states (make e2e runs 30). MODELPLANE_ORACLE_SEEDS=7,12 replays
# those seeds, MODELPLANE_ORACLE_FEATURES=-admin-access leaves a feature out
# (agent/tests/live/test_oracle.py says more).
ORACLE_STATES ?= 300
agent-oracle: setup e2e-tools
	MODELPLANE_ORACLE_STATES=$(ORACLE_STATES) uv run --frozen pytest -m e2e agent/tests/live/test_oracle.py -q -s

# The oracle on every supported Kubernetes version (KUBE_MATRIX), 150 states each,
# one version after another (each is run even when one before disagrees; the target
# fails if any does). Builds the versions' binaries first (once).
ORACLE_MATRIX_STATES ?= 150
agent-oracle-matrix: setup e2e-tools
	bash scripts/e2e-tools.sh kubernetes-1.36 kubernetes-1.37
	status=0; for version in $(KUBE_MATRIX); do \
		echo "agent-oracle-matrix: Kubernetes $$version"; \
		MODELPLANE_KUBE_VERSION=$$version MODELPLANE_ORACLE_STATES=$(ORACLE_MATRIX_STATES) \
			uv run --frozen pytest -m e2e agent/tests/live/test_oracle.py -q -s || status=1; \
	done; exit $$status

# Lint, format and type checks: what CI runs before the tests.
lint: setup
	uv run --frozen ruff check .
	uv run --frozen ruff format --check .
	uv run --frozen mypy

# The long fuzz profile: thousands of schema-aware mutants per function
# (tests/fuzz; CI runs the short profile as part of `make test`).
fuzz:
	MODELPLANE_FUZZ=long uv run --frozen pytest tests/fuzz -q
