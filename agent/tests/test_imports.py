"""The agent imports nothing that speaks the Function protocol.

Its image (tests/packages/test_agent_image.py) carries neither the Function
SDK nor grpcio nor protobuf: `modelplane-common` installs them only with its
`function` extra, which the agent does not ask for. (structlog it does carry:
its JSON log lines go through `modelplane_common.logs`, as the functions' do.) The development
environment has them all installed, so this test imports every agent module
in a fresh interpreter and fails when any of them pulls one in, long before
the image would fail to start.
"""

from __future__ import annotations

import json
import subprocess
import sys

# Top-level modules of the distributions the agent's image must not carry.
FUNCTION_ONLY = ("crossplane", "grpc", "google.protobuf")

PROBE = """
import importlib, json, pkgutil, sys
import modelplane_agent
for module in pkgutil.walk_packages(modelplane_agent.__path__, "modelplane_agent."):
    importlib.import_module(module.name)
print(json.dumps(sorted(sys.modules)))
"""


def test_no_agent_module_imports_the_function_sdk_grpc_or_protobuf():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert "modelplane_agent.controller" in loaded  # the probe did import the agent
    offending = [m for m in loaded if any(m == f or m.startswith(f"{f}.") for f in FUNCTION_ONLY)]
    assert offending == []
