"""A composed provider-kubernetes Object as the control plane last saw it, read once.

What a core needs of an observed composed resource: its body (to keep it
unchanged), whether its `Ready` and `Synced` conditions hold, the provider's
reason when it could not apply it, and the workload-cluster object the
provider last saw (`status.atProvider.manifest`). Tolerates any shape: an
observed resource is evidence, and malformed evidence reads as "not ready,
nothing seen", never as an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from modelplane_common import inputs
from modelplane_common.outcome import capped


@dataclass(frozen=True, slots=True)
class ObservedObject:
    body: Mapping  # as observed, status removed
    ready: bool
    synced: bool | None  # None: no Synced condition yet
    synced_message: str = ""
    remote: Mapping | None = None  # the workload-cluster object the provider last saw


def observed_object(observed: Mapping) -> ObservedObject:
    body = dict(observed)
    status = body.pop("status", None)
    status = status if isinstance(status, Mapping) else {}
    synced = inputs.find_condition({"status": status}, "Synced")
    at_provider = status.get("atProvider")
    remote = at_provider.get("manifest") if isinstance(at_provider, Mapping) else None
    return ObservedObject(
        body=body,
        ready=inputs.condition_status({"status": status}, "Ready") == "True",
        synced={"True": True, "False": False}.get(str(synced.get("status"))),
        # The provider relays the workload cluster's API errors: capped once, here.
        synced_message=capped(str(synced.get("message") or "")),
        remote=remote if isinstance(remote, Mapping) and remote else None,
    )
