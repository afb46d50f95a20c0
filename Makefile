# The two commands the README promises, and the helpers around them.
.PHONY: setup render test e2e-tools e2e schemas schemas-check bench lint

setup:
	bash scripts/setup.sh

# Set up, then render the example fleet with the real Crossplane CLI.
render: setup
	uv run --frozen modelplane-render

# Set up, then run every test (unit, property, simulation, render, validation).
test: setup
	uv run --frozen pytest

# The binaries the e2e suite runs (Kubernetes, etcd, provider-kubernetes, an
# OCI registry), built from the pinned modules in tools/ into .tools/bin.
e2e-tools:
	bash scripts/e2e-tools.sh

# Set up, build the e2e binaries, then run the end-to-end story on a real
# control plane and workload cluster (tests/e2e; logs in out/e2e/).
e2e: setup e2e-tools
	uv run --frozen pytest tests/e2e -m e2e

schemas:
	uv run --frozen python schemas/generate.py

schemas-check:
	uv run --frozen python schemas/generate.py --check

bench:
	uv run --frozen python tests/bench/bench_deployment.py

lint:
	uv run --frozen ruff check .
