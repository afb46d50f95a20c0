"""The command line every modelplane function serves with.

The SDK's standard options (mTLS by default, --insecure for local
rendering, --address, --debug) with one change: the default gRPC message
size is 64 MB instead of 4 MB, because compose-model-deployment receives
every ModelReplica of the fleet as required resources (about 11 MB for
8,000 replicas). MAX_RECV_MESSAGE_SIZE / --max-recv-message-size still
override it.

It also serves the function's Prometheus metrics (`metrics.py`) at
`/metrics` on `--metrics-address` (METRICS_ADDRESS, `host:port`). The
default is none: deploy/control-plane/functions.yaml sets `:8080`, the
`metrics` port Crossplane's Deployment runtime declares on every package's
container, while processes run side by side on one host (render, the e2e)
listen on nothing they were not given.
"""

from __future__ import annotations

from collections.abc import Callable

import click
from crossplane.function import cli as sdkcli
from crossplane.function import logging
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1

from modelplane_common import metrics

DEFAULT_MAX_MESSAGE_MB = 64


def _checked_address(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    if value:
        try:
            metrics.parse_address(value)
        except ValueError as err:
            raise click.BadParameter(str(err)) from err
    return value


def command(name: str, runner: Callable[[], grpcv1.FunctionRunnerServiceServicer]) -> click.Command:
    """A click command that serves the runner `runner()` builds."""

    @click.command(
        name=name,
        help=f"Serve the {name} composition function (mTLS unless --insecure).",
        context_settings={"default_map": {"max_recv_message_size": DEFAULT_MAX_MESSAGE_MB}},
    )
    @sdkcli.standard_options
    @click.option(
        "--metrics-address",
        default="",
        envvar="METRICS_ADDRESS",
        help="host:port to serve Prometheus metrics on, at /metrics (default: none).",
        callback=_checked_address,
    )
    def serve(metrics_address: str, **kwargs) -> None:
        # Configured as sdkcli.run configures it, so the metrics' one line logs alike.
        logging.configure(level=logging.Level.DEBUG if kwargs["debug"] else logging.Level.INFO)
        metrics.serve(metrics_address, logging.get_logger())
        sdkcli.run(runner(), **kwargs)

    return serve
