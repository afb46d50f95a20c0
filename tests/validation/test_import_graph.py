"""The workspace's import graph: no circle between modules, and each member declares
the workspace packages it imports.

Every import counts, wherever it stands: at the top, inside a function (deferred) or
under `if TYPE_CHECKING:`, since each of those bends the code around a circle instead
of breaking it. A circle is broken by moving the shared piece down into a module both
sides import. `from package import name` is an edge to the module `package.name` when
there is one, else to the package itself (a package's own modules importing its
parents' `__init__` implicitly is not counted). The members are those of the root
pyproject's `[tool.uv.workspace]`, each with its packages under `src/`; a member
imports another's package only when its own pyproject declares that distribution, so
each installs alone (the simulator, `modelplane-sim`, among them). A member's tests
(its `tests/`) may also import what its `dev` dependency group declares: the test kit,
`modelplane-testkit`, is never packaged, so a member's tests name it there, where uv
installs it for the workspace and a build of the member leaves it out.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest
from modelplane_devtools.paths import ROOT

Graph = Mapping[str, set[str]]


def module_name(source: Path, src: Path) -> str:
    parts = source.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[str, ...]]:
    """Each import in `tree` as the module names it may reach, the likeliest first:
    `import x.y` is ("x.y",); `from x import y` is ("x.y", "x"): the module x.y when
    there is one, else the name y of x. Relative imports are resolved against `module`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name,) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                anchor = here[: len(here) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield from ((f"{base}.{alias.name}", base) for alias in node.names)


def module_graph(src: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same tree (under src) it imports."""
    sources = {module_name(path, src): path for path in sorted(src.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in sources.items():
        tree = ast.parse(path.read_text(), str(path))
        reached = (
            next((name for name in names if name in sources), None)
            for names in imported(tree, module, path.name == "__init__.py")
        )
        graph[module] = {name for name in reached if name is not None and name != module}
    return graph


def circles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            component.append(node)
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def members() -> list[Path]:
    workspace = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]["workspace"]
    return sorted(path for glob in workspace["members"] for path in ROOT.glob(glob))


def requirement_names(requirements: Iterable[object]) -> list[str]:
    """The distribution each requirement names, without extras, versions or markers
    (a dependency group's `{include-group = ...}` tables name no distribution)."""
    return [re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0] for r in requirements if isinstance(r, str)]


def distribution(member: Path, groups: Iterable[str] = ()) -> tuple[str, list[str]]:
    """The member's distribution name and the distributions it depends on: at run time,
    and in its dependency `groups` (for its tests: `dev`)."""
    pyproject = tomllib.loads((member / "pyproject.toml").read_text())
    project, group = pyproject["project"], pyproject.get("dependency-groups", {})
    needs = [*project["dependencies"], *(r for g in groups for r in group.get(g, []))]
    return project["name"], requirement_names(needs)


def top_level_imports(sources: Iterable[Path]) -> set[str]:
    """The top-level packages the files import by absolute name, wherever the import
    stands (relative imports stay inside their own package)."""
    used = set()
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                used.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                used.update(alias.name.split(".")[0] for alias in node.names)
    return used


def undeclared(
    member: Path, sources: Iterable[Path], provider: Mapping[str, str], groups: Iterable[str]
) -> list[str]:
    """The workspace distributions `sources` import that `member` does not declare, at
    run time or in `groups`. `provider` maps each workspace package to its distribution."""
    name, declared = distribution(member, groups)
    needed = {provider[pkg] for pkg in top_level_imports(sources) if pkg in provider} - {name}
    return sorted(needed - set(declared))


def packages(member: Path) -> list[str]:
    return sorted(p.parent.name for p in (member / "src").glob("*/__init__.py"))


MEMBERS = members()
SRC = {member.relative_to(ROOT).as_posix(): member / "src" for member in MEMBERS}


def test_the_workspace_has_the_members_by_audience():
    assert {"devtools", "testkit", "sim", "e2e"} <= set(SRC)


@pytest.mark.parametrize("member", sorted(SRC))
def test_no_circle_between_the_modules_of_a_member(member):
    assert circles(module_graph(SRC[member])) == []


PROVIDER = {pkg: distribution(m)[0] for m in MEMBERS for pkg in packages(m)}


@pytest.mark.parametrize("member", sorted(SRC))
def test_a_member_declares_every_workspace_package_it_imports(member):
    assert undeclared(ROOT / member, SRC[member].rglob("*.py"), PROVIDER, groups=()) == []


@pytest.mark.parametrize("member", sorted(SRC))
def test_a_members_tests_import_only_what_it_or_its_dev_group_declares(member):
    tests = (ROOT / member / "tests").rglob("*.py")
    assert undeclared(ROOT / member, tests, PROVIDER, groups=("dev",)) == []


def test_no_circle_between_members():
    needs = {distribution(m)[0]: set(distribution(m)[1]) for m in MEMBERS}
    graph = {name: {d for d in deps if d in needs} for name, deps in needs.items()}
    assert circles(graph) == []


def _tree(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


# Each case: a small package and the circles the check must name in it.
CASES = {
    "two modules importing each other are a circle": (
        {"p/__init__.py": "", "p/a.py": "from p import b\n", "p/b.py": "from p.a import x\n"},
        [["p.a", "p.b"]],
    ),
    "a deferred import still closes a circle": (
        {
            "p/__init__.py": "",
            "p/a.py": "import p.b\n",
            "p/b.py": "def f():\n    from p import a\n",
        },
        [["p.a", "p.b"]],
    ),
    "a type-only import still closes a circle": (
        {
            "p/__init__.py": "",
            "p/a.py": "from p.b import B\n",
            "p/b.py": "import typing\nif typing.TYPE_CHECKING:\n    from p.a import A\n",
        },
        [["p.a", "p.b"]],
    ),
    "relative imports resolve, three modules in a ring": (
        {
            "p/__init__.py": "",
            "p/s/__init__.py": "",
            "p/s/a.py": "from . import b\n",
            "p/s/b.py": "from .c import y\n",
            "p/s/c.py": "from ..s import a\n",
        },
        [["p.s.a", "p.s.b", "p.s.c"]],
    ),
    "the shared piece moved down leaves no circle": (
        {
            "p/__init__.py": "",
            "p/base.py": "ROOT = 1\n",
            "p/a.py": "from p.base import ROOT\nfrom p import b\n",
            "p/b.py": "from p.base import ROOT\n",
        },
        [],
    ),
}


@pytest.mark.parametrize("files, expected", CASES.values(), ids=CASES.keys())
def test_the_check_names_each_circle(tmp_path, files, expected):
    assert circles(module_graph(_tree(tmp_path, files))) == expected


# Each case: a member's pyproject, one test file of it, and the distributions the check
# must name as imported but undeclared. The member is modelplane-sim; the workspace also
# provides modelplane_common (modelplane-common) and modelplane_testkit.
DECLARATION_CASES = {
    "a test importing the test kit undeclared is named": (
        "dependencies = []\n",
        "from modelplane_testkit import wire\n",
        ["modelplane-testkit"],
    ),
    "the dev group declares a test-only member": (
        'dependencies = []\n[dependency-groups]\ndev = ["modelplane-testkit"]\n',
        "from modelplane_testkit import wire\n",
        [],
    ),
    "another group does not declare what the tests import": (
        'dependencies = []\n[dependency-groups]\ndocs = ["modelplane-testkit"]\n',
        "import modelplane_testkit.wire\n",
        ["modelplane-testkit"],
    ),
    "a runtime dependency, with its extra, covers the tests too": (
        'dependencies = ["modelplane-common[function]>=0.1"]\n',
        "from modelplane_common.metrics import x\n",
        [],
    ),
    "a deferred import inside a test still counts": (
        "dependencies = []\n",
        "def test_x():\n    from modelplane_testkit import wire\n",
        ["modelplane-testkit"],
    ),
    "the member's own package and third-party packages need no declaration": (
        "dependencies = []\n",
        "import pytest\nfrom modelplane_sim import cli\n",
        [],
    ),
}


@pytest.mark.parametrize(
    "needs, test, expected", DECLARATION_CASES.values(), ids=DECLARATION_CASES.keys()
)
def test_the_check_names_each_undeclared_workspace_import(tmp_path, needs, test, expected):
    pyproject = f'[project]\nname = "modelplane-sim"\n{needs}'
    member = _tree(tmp_path, {"pyproject.toml": pyproject, "tests/test_x.py": test})
    provider = {
        "modelplane_sim": "modelplane-sim",
        "modelplane_common": "modelplane-common",
        "modelplane_testkit": "modelplane-testkit",
    }
    tests = (member / "tests").rglob("*.py")
    assert undeclared(member, tests, provider, groups=("dev",)) == expected
