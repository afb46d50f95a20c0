"""Every case of examples/renders.yaml renders, and everything it renders is valid."""

from __future__ import annotations

import pytest
from modelplane_devtools import render

CASES = {c["name"]: c for c in render.example_cases()}


@pytest.mark.parametrize("name", sorted(CASES), ids=sorted(CASES))
def test_every_example_renders_to_valid_resources(functions, api_extensions, name):
    rendered = render.render_case(functions, CASES[name])
    done = render.validate(api_extensions, rendered)
    assert done.returncode == 0, done.stdout + done.stderr
