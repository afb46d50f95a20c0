"""The last line of defence of every function: no request makes RunFunction raise.

A raised exception reaches Crossplane as gRPC UNKNOWN, an opaque error. A
Fatal result instead makes Crossplane stop the reconcile without applying
anything (every composed resource is kept as it is), mark the composite
Synced=False with the message and emit it as an event; tests/render proves
that through `crossplane composition render`.

Two kinds of failure end in Fatal:
    - `InvalidInput` raised on purpose by a function's shell when the
      composite itself cannot be read (its spec is not an object, say):
      the message is the one-line `field.path: reason (got value)`.
    - Any other exception is a bug. It is logged with its traceback and
      reported as `internal error: ...`; the fuzz test (tests/fuzz) fails
      whenever it sees that prefix, so the net never hides a crash from CI.
"""

from __future__ import annotations

from collections.abc import Callable

from crossplane.function import response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from modelplane_common.inputs import InvalidInput
from modelplane_common.outcome import capped

INTERNAL_ERROR = "internal error"


def fatal(req: fnv1.RunFunctionRequest, message: str) -> fnv1.RunFunctionResponse:
    rsp = response.to(req)
    response.fatal(rsp, capped(message))
    return rsp


def guarded(
    req: fnv1.RunFunctionRequest,
    run: Callable[[], fnv1.RunFunctionResponse],
    log: object,
) -> fnv1.RunFunctionResponse:
    """run(), or a Fatal response naming what went wrong; never raises."""
    try:
        return run()
    except InvalidInput as err:
        _log(log, "warning", "cannot read the composite", error=str(err))
        return fatal(req, f"cannot read the composite: {err}")
    except Exception as err:
        _log(log, "exception", "internal error", error=repr(err))
        return fatal(req, f"{INTERNAL_ERROR}: {type(err).__name__}: {err}")


def _log(log: object, level: str, event: str, **fields: object) -> None:
    method = getattr(log, level, None)
    if callable(method):
        method(event, **fields)
