"""The repository and the binaries its tools run: one home for each.

`ROOT` is the checkout (every member of the workspace is installed editable
from it, so `__file__` finds it). The binaries live in `.tools/bin`: the
Crossplane CLI and core, kubectl, helm and cel-oracle come from `make setup`,
the rest of the e2e's (etcd, kube-apiserver, the registry, syft, ...) from
`make e2e-tools`. A missing binary is `ToolMissing`, whose message names the
fix, never a skip. The e2e harness adds the Kubernetes commands of other
versions (modelplane_e2e.binaries) on top of `binary`.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TOOLS = ROOT / ".tools" / "bin"
# The Go modules pinning the tools built from source (tools/<name>/go.mod).
GO_MODULES = ROOT / "tools"
# Third-party CRDs copied out of the Go modules pinned in tools/third-party-crds.
THIRD_PARTY_CRDS = ROOT / ".tools" / "crds"
# What `make setup` builds (the render tests run them); `make e2e-tools` builds the rest.
SETUP_TOOLS = ("crossplane", "crossplane-core", "kubectl", "helm", "cel-oracle")


class ToolMissing(RuntimeError):
    """A binary the repository builds is not there; the message names the fix."""


def missing(path: Path, name: str, env: str = "") -> ToolMissing:
    """The error for `name` missing at `path`: the make target that builds it, and the
    environment variable that may name it instead."""
    fix = "make setup" if name in SETUP_TOOLS else "make e2e-tools"
    instead = f" (or set {env})" if env else ""
    return ToolMissing(f"{path} is missing: run `{fix}`{instead}")


def binary(name: str, env: str = "") -> Path:
    """The executable `name` in .tools/bin, or wherever the environment variable `env`
    (when given and set) points."""
    path = Path(os.environ.get(env) or TOOLS / name) if env else TOOLS / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise missing(path, name, env)
    return path
