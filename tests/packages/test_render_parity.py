"""The packaged functions render every example exactly as the development venv does.

Both sets serve --insecure on loopback (the CLI's Development runtime); the
packaged ones run from their unpacked images under bubblewrap. Times differ
between two renders (each fills the examples' __NOW__ tokens with the clock),
so RFC 3339 timestamps are masked before comparing. The documents are
compared as a sorted list: Crossplane's render reports composed resources
that are not yet ready in map order, which differs between two renders of
the same input by the same functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import yaml
from modelplane_devtools import packages, render

CASES = {c["name"]: c for c in render.example_cases()}
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")


def masked(rendered: list[dict]) -> list[str]:
    """Each rendered document as YAML with its times masked, in sorted order."""
    return sorted(TIMESTAMP.sub("<time>", yaml.safe_dump(doc, sort_keys=True)) for doc in rendered)


@pytest.fixture(scope="module")
def packaged(runtimes) -> Iterator[render.Functions]:
    render.crossplane()
    render.crossplane_core()
    with render.running_functions(packages.packaged_command(runtimes)) as running:
        yield running


@pytest.fixture(scope="module")
def development() -> Iterator[render.Functions]:
    with render.running_functions() as running:
        yield running


@pytest.mark.parametrize("name", sorted(CASES), ids=sorted(CASES))
def test_the_packaged_functions_render_what_the_venv_renders(packaged, development, name):
    from_package = masked(render.render_case(packaged, CASES[name]))
    from_venv = masked(render.render_case(development, CASES[name]))
    assert from_package == from_venv
