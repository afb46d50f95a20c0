"""The documents hold together: every relative link resolves, and design/README.md
indexes each design document exactly once.

Users clone the repository alone, so a link that leaves it or names a file that
moved is a dead end; dated runs moved from design/ to the READMEs of the tools
that produced them, with a pointer left behind, and those pointers are links.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"```.*?```", re.S)
INDEX_ROW = re.compile(r"^\| \[([^\]]+)\]\(([^)]+)\) \|", re.M)


def _markdown_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in listed]


def broken_links(path: Path, text: str) -> list[str]:
    """The relative link targets of one Markdown text that name no file or folder."""
    targets = (m.group(1).split("#")[0] for m in LINK.finditer(FENCE.sub("", text)))
    return [
        t for t in targets if t and not re.match(r"^[a-z]+:", t) and not (path.parent / t).exists()
    ]


def index_counts(text: str) -> Counter[str]:
    """How many rows of the index name each document."""
    return Counter(target for _, target in INDEX_ROW.findall(text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("see [a](README.md) and [b](https://x.test/y)", [], id="a file and a URL"),
        pytest.param("see [a](no-such-file.md#part)", ["no-such-file.md"], id="a missing file"),
        pytest.param("```\n[a](gone.md)\n```", [], id="a link inside a code block is not one"),
        pytest.param("[top](#words)", [], id="an anchor in the same page"),
    ],
)
def test_the_link_check_reads_markdown_as_meant(text, expected):
    assert broken_links(ROOT / "design" / "README.md", text) == expected


def test_every_relative_link_in_the_repositorys_documents_resolves():
    found = {
        str(path.relative_to(ROOT)): broken
        for path in _markdown_files()
        if (broken := broken_links(path, path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_the_design_index_lists_each_design_document_once():
    counts = index_counts((ROOT / "design" / "README.md").read_text(encoding="utf-8"))
    documents = {p.name for p in (ROOT / "design").glob("*.md")} - {"README.md"}
    assert {name: n for name, n in counts.items() if n != 1} == {}
    assert set(counts) == documents
