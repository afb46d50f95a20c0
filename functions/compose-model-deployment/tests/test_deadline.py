"""One slow request holds no other: the function served by a real gRPC server on 127.0.0.1.

A request's work runs in a worker thread with a deadline
(`modelplane_common.guard.served`). The slow request here is a matcher that
spins in pure Python, as a runaway evaluation would, for longer than the
deadline: it is answered Fatal `deadline exceeded` at the deadline, and a
fast request sent at the same moment is answered as usual meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import timedelta

import grpc
import pytest
from compose_model_deployment import fn
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from modelplane_common import guard
from modelplane_common.devices import DeviceKind, DeviceRequest
from modelplane_common.guard import DEADLINE_EXCEEDED
from modelplane_testkit import deployment_builders as t
from modelplane_testkit.wire import desired

DEADLINE = timedelta(seconds=2)
SPIN = 6.0  # seconds a slow request's matcher works: well past the deadline
# How late an answer may be beyond what it waits for (a loaded 2-core machine).
SLACK = 1.5
SLOW_SELECTOR = "device.driver == 'gpu.nvidia.com' // slow"
CLUSTERS = [t.cluster("a", [t.pool("p", 2, histogram=[({"gpu": 8}, 2)])])]


def matcher(requests: Sequence[DeviceRequest], kinds: Sequence[DeviceKind]):
    """The real matcher, after SPIN seconds of pure-Python work for a slow selector."""
    if any(s == SLOW_SELECTOR for r in requests for s in r.selectors):
        end = time.monotonic() + SPIN
        while time.monotonic() < end:
            pass
    return fn.default_matcher()(requests, kinds)


def request(selector: str) -> fnv1.RunFunctionRequest:
    deployment = t.deployment(replicas=1, engines=[t.standalone(gpus=1, selectors=[selector])])
    return t.request(deployment, CLUSTERS, [])


SLOW = request(SLOW_SELECTOR)
FAST = request("device.driver == 'gpu.nvidia.com'")


async def _timed_call(stub: grpcv1.FunctionRunnerServiceStub, req: fnv1.RunFunctionRequest):
    start = time.monotonic()
    rsp = await stub.RunFunction(req, timeout=SPIN * 3)
    return rsp, time.monotonic() - start


async def _send_together(requests: list[fnv1.RunFunctionRequest]):
    """Serve the function on 127.0.0.1 and send every request at once: (response, seconds)."""
    server = grpc.aio.server()
    grpcv1.add_FunctionRunnerServiceServicer_to_server(
        fn.FunctionRunner(matcher=matcher, clock=lambda: t.NOW, deadline=DEADLINE), server
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = grpcv1.FunctionRunnerServiceStub(channel)
            return await asyncio.gather(*(_timed_call(stub, r) for r in requests))
    finally:
        await server.stop(grace=None)


def _answer(rsp: fnv1.RunFunctionResponse) -> str:
    """ "deadline" for a deadline Fatal, "placed" for a replica composed, else the results."""
    fatal = [r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
    if fatal and fatal[0].startswith(DEADLINE_EXCEEDED):
        return "deadline"
    return "placed" if desired(rsp) else f"other: {fatal or list(rsp.results)}"


DEADLINE_S = DEADLINE.total_seconds()
# (requests sent together, what each is answered, the latest each answer may come)
CASES = [
    pytest.param(
        [SLOW, FAST], ["deadline", "placed"], [DEADLINE_S + SLACK, SLACK],
        id="a fast request is answered while a slow one works, the slow one at its deadline",
    ),
    pytest.param(
        [SLOW, SLOW], ["deadline", "deadline"], [DEADLINE_S + SLACK, DEADLINE_S + SLACK],
        id="two slow requests both answer at the deadline, not one after the other",
    ),
    pytest.param([FAST], ["placed"], [SLACK], id="a fast request alone is answered as before"),
]  # fmt: skip


@pytest.mark.parametrize(("requests", "answers", "latest"), CASES)
def test_a_slow_request_holds_no_other(requests, answers, latest):
    try:
        results = asyncio.run(_send_together(requests))
    finally:
        # A slow request answered at its deadline spins on in its worker; left running,
        # it logs its plan and counts its metrics into whichever test runs next.
        guard.wait_idle(timeout=SPIN * 3)
    assert [_answer(rsp) for rsp, _ in results] == answers
    seconds = [round(s, 2) for _, s in results]
    assert all(s <= limit for s, limit in zip(seconds, latest, strict=True)), seconds
