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
rewrites the source and every copy at once. The Configuration package
(apis/crossplane.yaml) is one: it pins the three functions to this version, and
deploy/control-plane installs it under this tag.

Two components are not ours: the Crossplane core and the provider-kubernetes the
e2e runs, each at both ends of the supported range (`modelplane_e2e.crossplane_versions`), each
release pinned by a Go module in tools/ (`PINS`). The Configuration floors its
Crossplane and provider-kubernetes at the oldest (tools/crossplane-core,
tools/provider-kubernetes) and deploy/control-plane installs that provider
release; the newest core (tools/crossplane-core-v2.4)
names the binary the e2e builds and runs by default. The same test holds every
copy to its pin.
"""

from __future__ import annotations

import argparse
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass

from modelplane_devtools import artifacts
from modelplane_devtools.paths import ROOT

SOURCE = ROOT / "pyproject.toml"
_RELEASE = r"[0-9]+\.[0-9]+\.[0-9]+"
_SEMVER = rf"{_RELEASE}(?:-[0-9A-Za-z.-]+)?"


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
# An image or package reference with our tag; `$fn` is a loop in a shell example.
_PUSHED = rf"(?:modelplane-agent|modelplane-ai/[a-z-]+|\$fn):v({_SEMVER})"
COPIES = (
    *(
        Copy(str(p.relative_to(ROOT)), _PYPROJECT)
        for p in sorted(ROOT.glob("*/pyproject.toml"))
        + sorted(ROOT.glob("functions/*/pyproject.toml"))
    ),
    Copy(
        "deploy/agent/deployment.yaml",
        rf"image: {re.escape(artifacts.repository(artifacts.AGENT))}:v({_SEMVER})",
    ),
    # The agent's chart: its own version and the image tag it defaults to (v<appVersion>).
    Copy("deploy/helm/modelplane-agent/Chart.yaml", rf'^(?:version: |appVersion: ")({_SEMVER})"?$'),
    Copy("examples/functions.yaml", rf"modelplane-ai/compose-[a-z-]+:v({_SEMVER})"),
    # The Configuration's pins on the three functions, and the tag it is installed by.
    Copy(
        "apis/crossplane.yaml",
        rf'package: ghcr\.io/modelplane-ai/compose-[a-z-]+\n +version: "v({_SEMVER})"$',
    ),
    Copy(
        "deploy/control-plane/configuration.yaml", rf"modelplane-ai/modelplane-fleet:v({_SEMVER})"
    ),
    # The functions installed with their runtime configuration, at the Configuration's pins.
    Copy("deploy/control-plane/functions.yaml", rf"modelplane-ai/compose-[a-z-]+:v({_SEMVER})"),
    Copy("README.md", _PUSHED),
    Copy("design/agent.md", _PUSHED),
    # The release's verification examples.
    Copy("docs/operating.md", _PUSHED),
)


@dataclass(frozen=True)
class Pin:
    """A Go module tools/<module> pins, and the files that repeat its version (group 1)."""

    module: str
    tools_module: str
    copies: tuple[Copy, ...]

    def version(self) -> str:
        """The pinned version, without its `v`, from the require line of tools/<module>/go.mod."""
        text = (ROOT / "tools" / self.tools_module / "go.mod").read_text()
        found = re.findall(rf"^\s*(?:require\s+)?{re.escape(self.module)} v({_SEMVER})", text, re.M)
        if len(found) != 1:
            raise ValueError(f"tools/{self.tools_module}/go.mod requires {self.module} {found}")
        return found[0]


PINS = (
    Pin(
        "github.com/crossplane/crossplane/v2",
        "crossplane-core",
        (
            # The floor of the Configuration's spec.crossplane.version; `-0` admits
            # that release's pre-release and vendor builds (`-up.1`), which
            # Masterminds/semver excludes from a constraint without a pre-release.
            Copy("apis/crossplane.yaml", rf'^    version: ">=v({_RELEASE})-0"$'),
            # The version the build stamps on the core (package constraints read it).
            Copy("scripts/setup.sh", rf"pkg/version\.version=v({_SEMVER})"),
            # The supported versions the operators' guide and the design state.
            Copy("docs/operating.md", rf"^\| Crossplane \| v({_RELEASE}) and every later"),
            Copy("docs/operating.md", rf"^\| Crossplane \|.*\| core v({_RELEASE}) \("),
            Copy("design/tooling.md", rf"Crossplane core v({_RELEASE})\n"),
        ),
    ),
    Pin(
        "github.com/crossplane-contrib/provider-kubernetes",
        "provider-kubernetes",
        (
            # The floor of the Configuration's dependency on it.
            Copy(
                "apis/crossplane.yaml",
                rf'provider-kubernetes\n +version: ">=v({_SEMVER}), <v[0-9]+\.0\.0"$',
            ),
            Copy(
                "deploy/control-plane/provider-kubernetes.yaml",
                rf"crossplane-contrib/provider-kubernetes:v({_SEMVER})",
            ),
            Copy("docs/operating.md", rf"^\| provider-kubernetes \| v({_RELEASE}) and every later"),
            Copy("docs/operating.md", rf"^\| provider-kubernetes \|.*\| v({_RELEASE}) \(`tools"),
            Copy("design/tooling.md", rf"provider-kubernetes v({_RELEASE})\n"),
            # The install section's mirror command and the constraint it states.
            Copy(
                "README.md",
                r"(?:crossplane-contrib/provider-kubernetes:v|`>=v(?=[0-9.]+, <v2\.0\.0`))"
                rf"({_SEMVER})",
            ),
        ),
    ),
    # The newest releases, which `make e2e` runs (modelplane_e2e.crossplane_versions.NEWEST).
    Pin(
        "github.com/crossplane/crossplane/v2",
        "crossplane-core-v2.4",
        (
            # The binary's name and the version its build stamps (package constraints read it).
            Copy(
                "e2e/src/modelplane_e2e/crossplane_versions.py",
                rf'"crossplane-core-v({_SEMVER})"',
            ),
            Copy("scripts/e2e-tools.sh", rf"pkg/version\.version=v({_SEMVER})"),
            Copy("scripts/e2e-tools.sh", rf"crossplane-core-v({_SEMVER})="),
            Copy(
                "docs/operating.md",
                rf"core v({_RELEASE}) \(`tools/crossplane-core-v2\.4/go\.mod`\)",
            ),
            Copy("design/tooling.md", rf"newest, Crossplane core v({_RELEASE})\b"),
        ),
    ),
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
