"""Which Crossplane core and provider-kubernetes the e2e runs: each end of the supported range.

The Configuration admits Crossplane `>=v2.3.4-0` and provider-kubernetes
`>=v1.2.1, <v2.0.0` (apis/crossplane.yaml). The e2e tests both ends of that
range with the same suite: `NEWEST`, the default (`make e2e`), the newest
release of each that builds from the Go module proxy (for provider-kubernetes
that is the floor: see `PROVIDER_FLOOR`), and `FLOOR`
(`make e2e-floor`), the releases the constraints name. MODELPLANE_E2E_VERSIONS
(`newest` or `floor`) is the one place that chooses; every part of the harness
that runs or installs either component asks `selected()`.

Each release is a Go module in tools/, pinned with its go.sum and registered
in `modelplane_devtools.version.PINS`: the binary is built from it once into
.tools/bin under a name that carries the version (scripts/e2e-tools.sh; the
floor core is setup.sh's `crossplane-core`, which the render tests also run,
and the floor provider e2e-tools' `provider-kubernetes`), and the CRDs
Crossplane installs and the provider's package come from the same module's
source (`binaries.module_dir`), so a run never mixes two releases of one
component.

deploy/control-plane installs the provider release the floor names (the
README's mirror command copies that one). A run on another release (none
today) pushes
that release's package under its own tag and tells the package manager, with
an ImageConfig on the exact reference the manifest names, to pull it instead
(`install.release_image_config`): the install stays `kubectl apply -f
deploy/control-plane` verbatim, and the Provider's `status.resolvedPackage`
shows the release that runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from modelplane_devtools import version

ENVIRONMENT = "MODELPLANE_E2E_VERSIONS"
CORE_MODULE = "github.com/crossplane/crossplane/v2"
PROVIDER_MODULE = "github.com/crossplane-contrib/provider-kubernetes"


class UnknownVersions(ValueError):
    pass


@dataclass(frozen=True)
class Release:
    """One component at one pinned version: the tools/ module and the binary built from it."""

    module: str  # the Go module path of the component
    tools_module: str  # tools/<tools_module> pins it (go.mod, go.sum)
    binary: str  # .tools/bin/<binary>

    def version(self) -> str:
        """The pinned version, without its `v`."""
        return pin(self.tools_module).version()


@dataclass(frozen=True)
class Versions:
    """The Crossplane core and the provider-kubernetes one e2e run uses."""

    name: str
    crossplane: Release
    provider: Release


def pin(tools_module: str) -> version.Pin:
    (found,) = [p for p in version.PINS if p.tools_module == tools_module]
    return found


PROVIDER_FLOOR = Release(PROVIDER_MODULE, "provider-kubernetes", "provider-kubernetes")
# provider-kubernetes' later releases do not build from the Go module proxy: v1.3.1
# needs github.com/nebius/gosdk v0.2.28, and v1.4.x a pseudo-version of
# crossplane-runtime v2.5.0-rc and crossplane/apis v2.4.1, whose zips the proxy refuses
# (403, "This module version is not available"). So both ends run the floor's provider.
NEWEST = Versions(
    "newest",
    Release(CORE_MODULE, "crossplane-core-v2.4", "crossplane-core-v2.4.0"),
    PROVIDER_FLOOR,
)
FLOOR = Versions(
    "floor",
    Release(CORE_MODULE, "crossplane-core", "crossplane-core"),
    PROVIDER_FLOOR,
)
CHOICES = {v.name: v for v in (NEWEST, FLOOR)}


def selected() -> Versions:
    """The versions MODELPLANE_E2E_VERSIONS names (`newest` when unset)."""
    name = os.environ.get(ENVIRONMENT, "").strip() or NEWEST.name
    if name not in CHOICES:
        raise UnknownVersions(
            f"{ENVIRONMENT}={name!r}: expected one of {', '.join(sorted(CHOICES))}"
        )
    return CHOICES[name]
