# The two commands the README promises, and the helpers around them.
.PHONY: setup render test packages schemas schemas-check bench bench-agent agent-live lint fuzz

setup:
	bash scripts/setup.sh

# Set up, then render the example fleet with the real Crossplane CLI.
render: setup
	uv run --frozen modelplane-render

# Build dist/xpkg/<function>.xpkg for the three functions and the agent's image
# dist/images/modelplane-agent.tar, without Docker.
packages: setup
	bash scripts/build-packages.sh

# Set up, build the packages (their tests run what is inside them), then run
# every test (unit, property, simulation, render, validation, packages).
test: setup packages
	uv run --frozen pytest

schemas:
	uv run --frozen python schemas/generate.py

schemas-check:
	uv run --frozen python schemas/generate.py --check

bench:
	uv run --frozen python tests/bench/bench_deployment.py

bench-agent:
	uv run --frozen python tests/bench/bench_agent.py

# The agent against a real kube-apiserver, kube-controller-manager and kube-scheduler
# (binaries in .tools/bin from the e2e tooling).
agent-live:
	uv run --frozen pytest -m e2e agent/tests/live -q

# Lint, format and type checks: what CI runs before the tests.
lint: setup
	uv run --frozen ruff check .
	uv run --frozen ruff format --check .
	uv run --frozen mypy

# The long fuzz profile: thousands of schema-aware mutants per function
# (tests/fuzz; CI runs the short profile as part of `make test`).
fuzz:
	MODELPLANE_FUZZ=long uv run --frozen pytest tests/fuzz -q
