"""The README's install section lists the commands the e2e and `make demo` run.

The harness runs the README's install commands from one list,
`modelplane_e2e.install_steps` (each step a line as the README
prints it); these tests hold the README's install section to that list:
every line present in a fenced `sh` block, in the harness's order. Step 2's
mirror (the packages pushed under their public names, an ImageConfig per
prefix) is computed by the harness from the manifests (`install`), so the
README's push targets and ImageConfigs are compared with what it computes.
"""

from __future__ import annotations

import re
import textwrap

import pytest
import yaml
from modelplane_devtools import registry
from modelplane_devtools.paths import ROOT
from modelplane_e2e import install, install_steps

# `$REGISTRY`, as the README names the user's registry.
REGISTRY = "$REGISTRY"
FENCE = re.compile(r"^( *)```sh\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
LOOP = re.compile(r"^for (\w+) in (.+); do$")


def install_section(readme: str) -> str:
    """From the `## Install...` heading to the next `## ` heading."""
    found = re.search(r"^## Install.*?(?=^## |\Z)", readme, re.MULTILINE | re.DOTALL)
    assert found, "README.md has no `## Install...` section"
    return found.group(0)


def blocks(section: str) -> list[str]:
    """Each fenced `sh` block's text, its fence's indentation removed."""
    return [textwrap.dedent(body) for _, body in FENCE.findall(section)]


def commands(block: str) -> list[str]:
    """The block's command lines: continuations joined, `for V in W...; do` loops unrolled."""
    lines = [line.strip() for line in re.sub(r" *\\\n *", " ", block).splitlines()]
    found: list[str] = []
    at = 0
    while at < len(lines):
        loop = LOOP.match(lines[at])
        if not loop:
            found.append(lines[at])
            at += 1
            continue
        end = lines.index("done", at)
        variable, words = loop.group(1), loop.group(2).split()
        for word in words:
            found += [re.sub(rf"\${variable}\b", word, body) for body in lines[at + 1 : end]]
        at = end + 1
    return found


SECTION = install_section((ROOT / "README.md").read_text())
LINES = [line for block in blocks(SECTION) for line in commands(block)]
(MIRROR,) = [b for b in blocks(SECTION) if "kind: ImageConfig" in b]


@pytest.mark.parametrize("step", install_steps.README_ORDER, ids=lambda s: s.line)
def test_each_command_the_harness_runs_is_a_line_of_the_readmes_install_section(step):
    assert step.line in LINES, f"README's install section does not show `{step.line}`"


def test_the_readme_shows_the_harness_commands_in_the_order_the_harness_runs_them():
    positions = [LINES.index(step.line) for step in install_steps.README_ORDER]
    assert positions == sorted(positions), [LINES[p] for p in positions]


def test_the_mirror_step_pushes_every_package_the_e2e_pushes_under_the_same_name():
    pushed = {
        line.split()[-1].removeprefix("docker://")
        for line in commands(MIRROR)
        if line.startswith(("crossplane xpkg push", "skopeo copy"))
    }
    assert pushed == {registry.mirrored(r, REGISTRY) for r in install.public_references()}


def test_the_mirror_steps_image_configs_rewrite_the_prefixes_the_e2e_rewrites():
    heredoc = MIRROR.split("<<EOF\n", 1)[1].split("\nEOF", 1)[0]
    shown = {
        (c["spec"]["matchImages"][0]["prefix"], c["spec"]["rewriteImage"]["prefix"])
        for c in yaml.safe_load_all(heredoc)
    }
    prefixes = {install.owner_prefix(r) for r in install.public_references()}
    harness = {
        (c["spec"]["matchImages"][0]["prefix"], c["spec"]["rewriteImage"]["prefix"])
        for c in install.image_configs(prefixes, REGISTRY)
    }
    assert shown == harness


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ("kubectl apply -k deploy/agent\n", ["kubectl apply -k deploy/agent"]),
        ("skopeo copy a \\\n  b\n", ["skopeo copy a b"]),
        (
            "for fn in a b; do\n  push $fn.xpkg $R/$fn:v1 $fnord\ndone\nnext\n",
            ["push a.xpkg $R/a:v1 $fnord", "push b.xpkg $R/b:v1 $fnord", "next"],
        ),
    ],
    ids=["a line is a command", "a continued line is one command", "a loop is unrolled"],
)
def test_commands_reads_a_block_as_a_shell_would_list_them(block, expected):
    assert commands(block) == expected


def test_a_step_substitutes_its_placeholders_word_by_word():
    argv = install_steps.KUBECONFIG_SECRET.argv(CLUSTER="gpu-east", KUBECONFIG_FILE="/a b/c")
    assert argv[-2:] == ["gpu-east-kubeconfig", "--from-file=kubeconfig=/a b/c"]


def test_a_step_missing_a_placeholders_value_is_an_error_not_a_literal():
    with pytest.raises(KeyError, match="TEAM"):
        install_steps.TEAM_NAMESPACE.argv()
