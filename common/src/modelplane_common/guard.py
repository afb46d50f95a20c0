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

`served` is how every servicer's `RunFunction` runs its work: in a worker
thread, never on the gRPC server's one event loop, with a deadline
(`DEADLINE`). A request still working at its deadline is answered Fatal
`deadline exceeded: ...` (so Crossplane keeps every composed resource and
says why) while the server goes on serving other requests. Python cannot
stop a thread, so the work itself must be bounded: the deadline bounds the
answer, not the CPU a runaway spends (the CEL cost limit does that,
design/cel-matching.md); a thread past its deadline finishes and its
answer is dropped. design/robustness.md ("Deadline") says why 20 s.

`served` also counts every call it answers (`metrics.observe_call`): its
result (`ok`, `invalid_input`, `internal_error`, `deadline_exceeded`), the
time to its answer and the bytes in and out.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from crossplane.function import response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from modelplane_common import metrics
from modelplane_common.inputs import InvalidInput
from modelplane_common.outcome import capped

INTERNAL_ERROR = "internal error"
DEADLINE_EXCEEDED = "deadline exceeded"
# A call's result, as the metrics count it.
OK = "ok"
INVALID_INPUT = "invalid_input"
INTERNAL = "internal_error"
TIMED_OUT = "deadline_exceeded"
# Shorter than what Crossplane v2.3.4 allows a call: a whole reconcile of a composite
# (up to 5 calls of a function, one per round of required resources) has 2 minutes, and
# `crossplane render` 1 minute (design/robustness.md, "Deadline").
DEADLINE = timedelta(seconds=20)
# Requests worked on at once; more wait for a thread (within their deadline).
WORKERS = 16
_WORKERS = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="run-function")


def wait_idle(timeout: float) -> None:
    """Return once every worker is free: a request answered at its deadline goes on
    working in its thread (Python cannot stop it) and finishes later, logging and
    counting what it decided. All WORKERS threads meeting at one barrier means none is
    still busy. Raises threading.BrokenBarrierError past `timeout` seconds."""
    barrier = threading.Barrier(WORKERS, timeout=timeout)
    for met in [_WORKERS.submit(barrier.wait) for _ in range(WORKERS)]:
        met.result()


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
    return attempted(req, run, log)[0]


def attempted(
    req: fnv1.RunFunctionRequest,
    run: Callable[[], fnv1.RunFunctionResponse],
    log: object,
) -> tuple[fnv1.RunFunctionResponse, str]:
    """`guarded`'s answer and its result: OK, INVALID_INPUT or INTERNAL."""
    try:
        return run(), OK
    except InvalidInput as err:
        _log(log, "warning", "cannot read the composite", error=str(err))
        return fatal(req, f"cannot read the composite: {err}"), INVALID_INPUT
    except Exception as err:
        _log(log, "exception", "internal error", error=repr(err))
        return fatal(req, f"{INTERNAL_ERROR}: {type(err).__name__}: {err}"), INTERNAL


def _log(log: object, level: str, event: str, **fields: object) -> None:
    method = getattr(log, level, None)
    if callable(method):
        method(event, **fields)


async def served(
    req: fnv1.RunFunctionRequest,
    run: Callable[[], fnv1.RunFunctionResponse],
    log: object,
    deadline: timedelta = DEADLINE,
    *,
    function: str,
) -> fnv1.RunFunctionResponse:
    """`guarded(req, run, log)` in a worker thread, or a Fatal response at the deadline;
    the call counted under `function`'s name (`metrics.observe_call`)."""
    started = time.perf_counter()
    rsp, result = await _answered(req, run, log, deadline)
    metrics.observe_call(
        metrics.Call(
            function=function,
            result=result,
            seconds=time.perf_counter() - started,
            request_bytes=req.ByteSize(),
            response_bytes=rsp.ByteSize(),
        )
    )
    return rsp


async def _answered(
    req: fnv1.RunFunctionRequest,
    run: Callable[[], fnv1.RunFunctionResponse],
    log: object,
    deadline: timedelta,
) -> tuple[fnv1.RunFunctionResponse, str]:
    work = asyncio.get_running_loop().run_in_executor(_WORKERS, attempted, req, run, log)
    try:
        return await asyncio.wait_for(work, deadline.total_seconds())
    except TimeoutError:
        seconds = f"{deadline.total_seconds():g}"
        _log(log, "warning", "deadline exceeded", seconds=seconds)
        return fatal(
            req,
            f"{DEADLINE_EXCEEDED}: the function did not finish this request within "
            f"{seconds}s; nothing was changed, Crossplane will call again",
        ), TIMED_OUT
