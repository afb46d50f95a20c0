"""The project's one version: `[project].version` in the workspace's pyproject.toml.

What ships reads it from there: scripts/build-packages.sh tags every image and
package `v<version>` (and labels the images with it), the e2e installs the packages
under that tag, and `python -m modelplane_devtools.version` prints it for a shell,
the Makefile or a chart build (`helm package --version "$(...)" --app-version
"$(...)"`).

A file that cannot read it repeats it: a member's pyproject.toml (uv_build takes
static metadata only), a manifest's image tag, an install command in a document.
COPIES lists every such place, `tests/validation/test_version.py` fails when one
drifts or stops matching, and `python -m modelplane_devtools.version --set X.Y.Z`
rewrites the source and every copy at once.
"""

from __future__ import annotations

import argparse
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ROOT / "pyproject.toml"
_SEMVER = r"[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?"


def version() -> str:
    """The version, as the workspace's pyproject.toml states it."""
    with SOURCE.open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def tag() -> str:
    """The image and package tag: `v<version>`."""
    return f"v{version()}"


@dataclass(frozen=True)
class Copy:
    """One file that repeats the version: each match of `pattern` holds it in group 1."""

    path: str
    pattern: str

    def found(self) -> list[str]:
        return re.findall(self.pattern, (ROOT / self.path).read_text(), flags=re.MULTILINE)

    def rewrite(self, new: str) -> None:
        file = ROOT / self.path
        text = re.sub(
            self.pattern,
            lambda m: m.group(0).replace(m.group(1), new),
            file.read_text(),
            flags=re.MULTILINE,
        )
        file.write_text(text)


_PYPROJECT = rf'^version = "({_SEMVER})"$'
_PUSHED = rf"(?:modelplane-agent|modelplane/agent|\$fn):v({_SEMVER})"
COPIES = (
    *(
        Copy(str(p.relative_to(ROOT)), _PYPROJECT)
        for p in sorted(ROOT.glob("*/pyproject.toml"))
        + sorted(ROOT.glob("functions/*/pyproject.toml"))
    ),
    Copy("deploy/agent/deployment.yaml", rf"image: modelplane/agent:v({_SEMVER})"),
    # The agent's chart: its own version and the image tag it defaults to (v<appVersion>).
    Copy("deploy/helm/modelplane-agent/Chart.yaml", rf'^(?:version: |appVersion: ")({_SEMVER})"?$'),
    Copy("examples/functions.yaml", rf"modelplane/compose-[a-z-]+:v({_SEMVER})"),
    Copy("README.md", _PUSHED),
    Copy("design/agent.md", _PUSHED),
)


def set_version(new: str) -> None:
    if not re.fullmatch(_SEMVER, new):
        raise SystemExit(f"version: {new!r} is not MAJOR.MINOR.PATCH[-PRERELEASE]")
    Copy("pyproject.toml", _PYPROJECT).rewrite(new)
    for copy in COPIES:
        copy.rewrite(new)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", action="store_true", help="print v<version>")
    parser.add_argument("--set", metavar="VERSION", help="rewrite the source and every copy")
    args = parser.parse_args(argv)
    if args.set:
        set_version(args.set)
    print(tag() if args.tag else version())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
