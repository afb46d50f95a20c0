"""Build RunFunctionRequests from dicts and read RunFunctionResponses back, for tests."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

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
