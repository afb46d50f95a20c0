"""Fixtures for render tests: the real Crossplane CLI, the functions running locally."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from modelplane_devtools import render

ROOT = render.ROOT


@pytest.fixture(scope="session")
def functions() -> Iterator[render.Functions]:
    """The three functions, started once per test session.

    A missing Crossplane CLI is a failure, never a skip: CI must prove the
    rendering, and `make setup` installs the CLI.
    """
    render.crossplane()
    render.crossplane_core()
    with render.running_functions() as running:
        yield running


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this directory runs the real Crossplane CLI: mark them all `render`."""
    here = str(ROOT / "tests" / "render")
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.render)
