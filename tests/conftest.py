"""Fixtures every cross-function test shares."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from modelplane_devtools import render

ROOT = render.ROOT


@pytest.fixture(scope="session")
def api_extensions() -> list[Path]:
    """Every schema a resource may need: our XRDs and CRDs, and the third-party CRDs.

    A missing Crossplane CLI is a failure, never a skip: `make setup` installs it.
    """
    render.crossplane()
    ours = sorted((ROOT / "apis").rglob("definition.yaml")) + sorted(
        (ROOT / "apis" / "agent").glob("*.yaml")
    )
    shared = Path(os.environ.get("MODELPLANE_SHARED_CRDS", render.SHARED_CRDS))
    theirs = sorted(shared.rglob("*.yaml"))
    assert theirs, f"no third-party CRDs under {shared}"
    return ours + theirs
