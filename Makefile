# The two commands the README promises, and the helpers around them.
.PHONY: setup render test packages schemas schemas-check bench lint

setup:
	bash scripts/setup.sh

# Set up, then render the example fleet with the real Crossplane CLI.
render: setup
	uv run --frozen modelplane-render

# Build dist/xpkg/<function>.xpkg for the three functions, without Docker.
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

lint:
	uv run --frozen ruff check .
