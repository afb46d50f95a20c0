"""Build RunFunctionRequests from dicts and read RunFunctionResponses back, for tests."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common.timeutil import format_time

# An XR at rest whose Responsive condition turned False `opened` ago, and whether its
# function must ask for the converging 10 s (modelplane_common.requeue.dropping_events)
# rather than its own at-rest TTL: as pytest's (opened, converging) parameters with ids.
OPEN_CIRCUIT_TTLS = [
    (timedelta(minutes=1), True, "a circuit open a minute: called again in 10s"),
    (timedelta(minutes=6), False, "open past its cooldown, no event since: its at-rest TTL"),
]


def open_circuit(opened_at: datetime) -> dict:
    """An XR status whose `Responsive` condition turned False at `opened_at`."""
    turned = format_time(opened_at)
    return {"conditions": [{"type": "Responsive", "status": "False", "lastTransitionTime": turned}]}


SEVERITY = {
    fnv1.SEVERITY_NORMAL: "Normal",
    fnv1.SEVERITY_WARNING: "Warning",
    fnv1.SEVERITY_FATAL: "Fatal",
}
STATUS = {
    fnv1.STATUS_CONDITION_TRUE: "True",
    fnv1.STATUS_CONDITION_FALSE: "False",
    fnv1.STATUS_CONDITION_UNKNOWN: "Unknown",
}


def request(
    xr: Mapping,
    observed: Mapping[str, Mapping] | None = None,
    required: Mapping[str, Sequence[Mapping]] | None = None,
) -> fnv1.RunFunctionRequest:
    """A request as Crossplane sends it; `required` maps a requirement name to its resources."""
    req = fnv1.RunFunctionRequest()
    req.observed.composite.resource.CopyFrom(resource.dict_to_struct(dict(xr)))
    for name, body in (observed or {}).items():
        req.observed.resources[name].resource.CopyFrom(resource.dict_to_struct(dict(body)))
    for name, bodies in (required or {}).items():
        resources = req.required_resources[name]
        for body in bodies:
            resources.items.add().resource.CopyFrom(resource.dict_to_struct(dict(body)))
    return req


def run(runner, req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
    return asyncio.run(runner.RunFunction(req, None))


def desired(rsp: fnv1.RunFunctionResponse) -> dict[str, dict]:
    return {name: resource.struct_to_dict(r.resource) for name, r in rsp.desired.resources.items()}


def desired_status(rsp: fnv1.RunFunctionResponse) -> dict:
    return resource.struct_to_dict(rsp.desired.composite.resource).get("status", {})


def conditions(rsp: fnv1.RunFunctionResponse) -> dict[str, tuple[str, str, str]]:
    """Condition type -> (status, reason, message)."""
    return {c.type: (STATUS[c.status], c.reason, c.message) for c in rsp.conditions}


def events(rsp: fnv1.RunFunctionResponse) -> list[tuple[str, str]]:
    """(severity, message) of every result, in order."""
    return [(SEVERITY.get(r.severity, "Unspecified"), r.message) for r in rsp.results]


# --- the requirement loop, as Crossplane runs it --------------------------------------------

# Crossplane's FetchingFunctionRunner (internal/xfn/required_resources.go) calls a
# function at most MaxRequirementsIterations + 1 times per reconcile.
MAX_CALLS = 6


class RequirementsDidNotStabilize(AssertionError):
    """The function kept changing what it requires past MAX_CALLS calls."""


def selects(selector: fnv1.ResourceSelector, body: Mapping) -> bool:
    """Whether a requirement selects this object: its kind, then match_name or
    match_labels (equality only), within `namespace` when the selector names one."""
    if body.get("apiVersion") != selector.api_version or body.get("kind") != selector.kind:
        return False
    meta = body.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    if selector.namespace and meta.get("namespace") != selector.namespace:
        return False
    if selector.HasField("match_name"):
        return meta.get("name") == selector.match_name
    found = meta.get("labels")
    found = found if isinstance(found, Mapping) else {}
    return all(found.get(k) == v for k, v in selector.match_labels.labels.items())


def answer(
    requirements: fnv1.Requirements, fetchable: Sequence[Mapping]
) -> dict[str, list[Mapping]]:
    """What Crossplane fetches for each requirement (a name with nothing: no items)."""
    return {
        name: [body for body in fetchable if selects(selector, body)]
        for name, selector in sorted(requirements.resources.items())
    }


def reconcile(
    call,
    xr: Mapping,
    observed: Mapping[str, Mapping] | None,
    fetchable: Sequence[Mapping],
    seeded: fnv1.Requirements | None = None,
) -> list[tuple[fnv1.RunFunctionRequest, fnv1.RunFunctionResponse]]:
    """Every call of one reconcile: the first with nothing required, each next one with
    what the previous response required, until a response requires exactly what the
    previous one did (Crossplane applies only that last response). `call` maps a
    request to its response.

    `seeded`, Crossplane v2.4: the requirements the last reconcile ended on. The
    first call is given them, fetched afresh, every later call keeps them beside
    what the previous response required, and a first response that requires
    exactly what it was given is final (v2.4.0's internal/xfn/required_resources.go)."""
    calls: list[tuple[fnv1.RunFunctionRequest, fnv1.RunFunctionResponse]] = []
    previous: fnv1.Requirements | None = None  # none before the first call
    kept: Mapping[str, Sequence[Mapping]] = answer(seeded, fetchable) if seeded else {}
    required: Mapping[str, Sequence[Mapping]] = kept
    for _ in range(MAX_CALLS):
        req = request(xr, observed, required)
        rsp = call(req)
        calls.append((req, rsp))
        if any(r.severity == fnv1.SEVERITY_FATAL for r in rsp.results):
            return calls  # Crossplane does not iterate past a fatal result
        now = rsp.requirements if rsp.HasField("requirements") else None
        if now == previous:  # proto.Equal: an unset message equals only an unset one
            return calls
        nxt = {**kept, **answer(rsp.requirements, fetchable)}
        if len(calls) == 1 and seeded is not None and nxt == required:
            return calls  # it saw all it requires on the call it was handed
        previous = now
        required = nxt
    raise RequirementsDidNotStabilize(f"requirements changed on each of {MAX_CALLS} calls")
