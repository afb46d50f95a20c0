"""The OCI registry on 127.0.0.1 that the e2e installs from and the release rehearses on.

`start` runs `.tools/bin/registry` (`make e2e-tools`) on a free port under a
`processes.Supervisor`, which stops it by its PID; `mirrored` names a public
reference in it, the registry host replaced, the path kept.
"""

from __future__ import annotations

from modelplane_devtools.paths import binary
from modelplane_devtools.processes import Supervisor, free_port, listening


def start(supervisor: Supervisor) -> str:
    """Start the registry; its address once it listens."""
    port = free_port()
    process = supervisor.start("registry", [binary("registry"), f"--port={port}"])
    supervisor.wait_until(process, lambda: listening(port), "listening")
    return f"127.0.0.1:{port}"


def mirrored(reference: str, registry: str) -> str:
    """The reference with its registry host replaced by the local registry."""
    _, _, path = reference.partition("/")
    return f"{registry}/{path}"
