"""compose-model-deployment has one entrance: outside code imports the names its
package exports (`compose_model_deployment/__init__.py`), never its modules, so
tests, the test kit, the benchmarks and the simulator go through the same phases as
production (design/scheduler.md, "One entrance, read once, decided in phases").

`make lint` enforces it with ruff's banned-api rule (TID251), whose list of banned
modules lives in the root pyproject. A list is only as good as its coverage: a module
added to the package and not to the list would be reachable from outside unnoticed.
This check keeps the list equal to the package's modules.
"""

from __future__ import annotations

import tomllib

from modelplane_devtools.paths import ROOT

PACKAGE = "compose_model_deployment"
SOURCES = ROOT / "functions" / "compose-model-deployment" / "src" / PACKAGE


def internal_modules() -> set[str]:
    """Every module of the package but its `__init__`, the entrance."""
    return {f"{PACKAGE}.{path.stem}" for path in SOURCES.glob("*.py") if path.stem != "__init__"}


def banned_modules() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    banned = config["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"]
    return {name for name in banned if name.startswith(f"{PACKAGE}.")}


def test_every_internal_module_of_the_scheduler_is_banned_outside_it():
    assert internal_modules() - banned_modules() == set()


def test_the_banned_list_names_only_modules_that_exist():
    assert banned_modules() - internal_modules() == set()


def test_the_package_is_banned_from_outside_code_but_linted_inside():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    ignores = config["tool"]["ruff"]["lint"]["per-file-ignores"]
    exempt = {pattern for pattern, rules in ignores.items() if "TID251" in rules}
    assert exempt == {"functions/compose-model-deployment/**"}
