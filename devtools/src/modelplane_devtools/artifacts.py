"""What a release publishes, and under which names: the one naming rule.

Every artifact is `<REGISTRY>/<name>:v<version>`, `<name>` being the name the
build gives it (scripts/build-packages.sh: `dist/xpkg/<name>.xpkg`,
`dist/images/<name>.tar`, `dist/oci:<name>`) and the version the workspace's
(`modelplane_devtools.version`):

- the Configuration package `modelplane-fleet`;
- the three Function packages, `compose-inference-cluster`,
  `compose-model-replica` and `compose-model-deployment` (each function's
  runtime image, which its package embeds, is tagged as its package);
- the agent's image `modelplane-agent`, which deploy/agent, the Helm chart
  and the install compose-inference-cluster composes run by default, fully
  qualified so that no container runtime resolves it elsewhere (a short name
  such as `modelplane/agent` is Docker Hub's, which the project does not
  publish to).

The registry is the one of the project's GitHub organisation, which every
package's `meta.crossplane.io/source` names. Files that cannot import this
module repeat the names (manifests, the Configuration's `dependsOn`, the
chart's values, the composed install's default, through agent_manifests.json);
tests/validation/test_artifacts.py holds each to it, and the build script
asks it (`python -m modelplane_devtools.artifacts --repository <name>`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

REGISTRY = "ghcr.io/modelplane-ai"
CONFIGURATION = "modelplane-fleet"
FUNCTIONS = ("compose-inference-cluster", "compose-model-replica", "compose-model-deployment")
AGENT = "modelplane-agent"
NAMES = (CONFIGURATION, *FUNCTIONS, AGENT)


def repository(name: str) -> str:
    """Where an artifact is published, without tag: `<REGISTRY>/<name>`."""
    if name not in NAMES:
        raise ValueError(f"artifacts: {name!r} is none of {', '.join(NAMES)}")
    return f"{REGISTRY}/{name}"


def reference(name: str, tag: str) -> str:
    """An artifact's reference at a tag (`v<version>`)."""
    return f"{repository(name)}:{tag}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repository", metavar="NAME", choices=NAMES, help="print its repository")
    args = parser.parse_args(argv)
    print(repository(args.repository) if args.repository else REGISTRY)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
