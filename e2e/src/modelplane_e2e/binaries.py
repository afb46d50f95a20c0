"""The binaries the e2e runs: `.tools/bin`'s, and Kubernetes' own commands of the
version a cluster runs (`kube_versions`); the Go sources of those built from a module.

A missing binary is modelplane_devtools.paths.ToolMissing naming the fix, never a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from modelplane_devtools import paths
from modelplane_devtools.paths import GO_MODULES, ToolMissing

from modelplane_e2e import kube_versions


def binary(name: str, kube: kube_versions.KubeVersion = kube_versions.DEFAULT) -> Path:
    """The executable `name`: Kubernetes version `kube`'s for its own commands, else
    `.tools/bin`'s (modelplane_devtools.paths.binary)."""
    if name not in kube_versions.COMMANDS:
        return paths.binary(name)
    path = kube.bin / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ToolMissing(f"{path} is missing: run `{kube.build}`")
    return path


def module_dir(tools_module: str, module: str) -> Path:
    """Where the Go module cache holds `module`, at the version tools/<tools_module> pins,
    downloading it first when the cache lacks it. `go mod download` does both; `go list
    -m` prints an empty directory for a module not downloaded yet (a fresh machine)."""
    done = subprocess.run(
        ["go", "mod", "download", "-json", module],
        cwd=GO_MODULES / tools_module,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        found = json.loads(done.stdout) if done.stdout.strip() else {}
    except json.JSONDecodeError:
        found = {}
    where = str(found.get("Dir") or "")
    if done.returncode != 0 or not where or not Path(where).is_dir():
        why = found.get("Error") or done.stderr.strip()
        raise ToolMissing(f"cannot download {module} source into the Go module cache: {why}")
    return Path(where)
