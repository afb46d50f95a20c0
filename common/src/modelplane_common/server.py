"""The command line every modelplane function serves with.

The SDK's standard options (mTLS by default, --insecure for local
rendering, --address, --debug) with one change: the default gRPC message
size is 64 MB instead of 4 MB, because compose-model-deployment receives
every ModelReplica of the fleet as required resources (about 11 MB for
8,000 replicas). MAX_RECV_MESSAGE_SIZE / --max-recv-message-size still
override it.
"""

from __future__ import annotations

from collections.abc import Callable

import click
from crossplane.function import cli as sdkcli
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1

DEFAULT_MAX_MESSAGE_MB = 64


def command(name: str, runner: Callable[[], grpcv1.FunctionRunnerServiceServicer]) -> click.Command:
    """A click command that serves the runner `runner()` builds."""

    @click.command(
        name=name,
        help=f"Serve the {name} composition function (mTLS unless --insecure).",
        context_settings={"default_map": {"max_recv_message_size": DEFAULT_MAX_MESSAGE_MB}},
    )
    @sdkcli.standard_options
    def serve(**kwargs) -> None:
        sdkcli.run(runner(), **kwargs)

    return serve
