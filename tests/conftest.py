"""Fixtures every cross-function test shares."""

from __future__ import annotations

from pathlib import Path

import pytest
from modelplane_devtools import render

ROOT = render.ROOT


@pytest.fixture(scope="session")
def api_extensions() -> list[Path]:
    """Every schema a resource may need: our XRDs and CRDs, and the third-party CRDs.

    A missing Crossplane CLI or third-party CRD is a failure, never a skip: `make setup`
    installs both.
    """
    render.crossplane()
    ours = sorted((ROOT / "apis").rglob("definition.yaml")) + sorted(
        (ROOT / "deploy" / "agent" / "crds").glob("*.yaml")
    )
    theirs = render.third_party_crds()
    return ours + theirs
