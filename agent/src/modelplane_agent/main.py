"""`modelplane-agent`: run the agent against the cluster it is deployed in."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypedDict, Unpack

import click
from lightkube import AsyncClient
from lightkube.config.kubeconfig import DEFAULT_KUBECONFIG, SERVICE_ACCOUNT, KubeConfig
from lightkube.core.exceptions import ConfigError
from modelplane_common import logs
from modelplane_common.timeutil import parse_duration

from modelplane_agent.controller import MIN_MAX_AGE, Controller, Settings
from modelplane_agent.debug import node_view
from modelplane_agent.kube import LightkubeApi
from modelplane_agent.server import serve


class _ResourceDefault(logging.Filter):
    """Lines not about one observation carry resource "-", so the format always resolves."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "resource"):
            record.resource = "-"
        return True


def _now() -> datetime:
    return datetime.now(UTC)


class NoConfiguration(Exception):
    """The agent cannot reach any cluster: said in one line, and the process exits 1."""


# What reading the pod's service account can raise: no token (not in a pod), or no
# KUBERNETES_SERVICE_HOST (a pod without the Service's environment).
_NOT_IN_A_POD = (ConfigError, OSError, KeyError)


def kube_config(kubeconfig: str | None) -> KubeConfig:
    """`--kubeconfig`, else the pod's service account, else $KUBECONFIG or ~/.kube/config."""
    if kubeconfig:
        return _from_file(kubeconfig, "--kubeconfig")
    try:
        return KubeConfig.from_service_account(service_account=SERVICE_ACCOUNT)
    except _NOT_IN_A_POD as error:
        in_cluster = _why(error)
    path = os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    if not Path(path).expanduser().is_file():
        raise NoConfiguration(
            f"no Kubernetes configuration: not in a cluster ({in_cluster}) and no kubeconfig "
            f"at {path}; pass --kubeconfig"
        )
    return _from_file(path, "KUBECONFIG" if os.environ.get("KUBECONFIG") else "kubeconfig")


def _from_file(path: str, what: str) -> KubeConfig:
    if not Path(path).expanduser().is_file():
        raise NoConfiguration(f"{what} {path}: no such file")
    try:
        config = KubeConfig.from_file(path)
        config.get()  # its current context resolves (else the client would fail later)
        return config
    except Exception as error:  # unreadable, not YAML, not a kubeconfig: all say the same
        raise NoConfiguration(f"{what} {path}: not a usable kubeconfig: {_why(error)}") from None


def _why(error: BaseException) -> str:
    missing = error.__cause__ if isinstance(error.__cause__, FileNotFoundError) else error
    if isinstance(missing, FileNotFoundError):  # lightkube wraps it in a ConfigError
        return f"no {missing.filename}"
    if isinstance(error, KeyError):
        return f"{error.args[0]} is not set" if error.args else "a key is missing"
    return " ".join(str(error).split()) or type(error).__name__


def settings_from(max_age: str | None, min_interval: str, watch_silence: str = "90s") -> Settings:
    """The publisher's settings from the command line; ValueError says which flag is wrong."""
    age = None
    if max_age is not None:
        age = _duration("--max-age", max_age)
        if age < MIN_MAX_AGE:
            raise ValueError(f"--max-age must be at least 10s (got {max_age})")
    silence = _duration("--watch-silence", watch_silence)
    if silence < timedelta(seconds=1):
        raise ValueError(f"--watch-silence must be at least 1s (got {watch_silence})")
    return Settings(
        max_age=age,
        min_interval=_duration("--min-interval", min_interval),
        silence=silence.total_seconds(),
        # A silent stream is relisted a little before its kind stops being current (75 s
        # of the default 90 s), so a quiet but healthy kind never freezes a report.
        idle=silence.total_seconds() * IDLE_SHARE,
    )


IDLE_SHARE = 75 / 90


def _duration(flag: str, text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as error:
        raise ValueError(f"{flag}: {error} (got {text})") from None


def on_loop(
    loop: asyncio.AbstractEventLoop, call: Callable[[], bytes], timeout: float = 10
) -> Callable[[], bytes]:
    """`call`, run on `loop` from another thread (the HTTP server's): the state it reads
    is only ever touched by the loop."""

    async def run() -> bytes:
        return call()

    return lambda: asyncio.run_coroutine_threadsafe(run(), loop).result(timeout)


async def _run(controller: Controller, api: LightkubeApi) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, controller.stop)
    try:
        await controller.run()
    finally:
        await api.close()


class Flags(TypedDict):
    """The command line, one entry per option below (click passes them as keywords)."""

    kubeconfig: str | None
    listen: str
    max_age: str | None
    min_interval: str
    watch_silence: str
    log_level: str
    log_format: str
    debug_nodes: bool


@click.command()
@click.option("--kubeconfig", default=None, help="Kubeconfig file; in-cluster config if unset.")
@click.option("--listen", default="0.0.0.0:8080", show_default=True, help="host:port for probes.")
@click.option(
    "--max-age",
    default=None,
    help="Override the maxAge heartbeats follow. Unset (the default), they follow the "
    "smallest spec.maxAge of the PoolObservations (each its InferenceCluster's "
    "spec.observation.maxAge), 5m while none declares one: a pool's report (and the "
    "replicasCurrentAt that keeps unchanged replica reports fresh) is rewritten every "
    "maxAge/5, less a stable spread of up to 25% per pool; a replica's report only when "
    "it changes.",
)
@click.option(
    "--min-interval", default="2s", show_default=True, help="Least time between two writes."
)
@click.option(
    "--watch-silence",
    default="90s",
    show_default=True,
    help="A kind heard of (event, bookmark, list) less recently is not current: reports "
    "that read it stop advancing observedAt. Its watch is relisted at 5/6 of it. The API "
    "server sends a bookmark about every 60 s; under that, quiet kinds are relisted.",
)
@click.option("--log-level", default="INFO", show_default=True)
@click.option(
    "--log-format",
    type=click.Choice(["json", "text"]),
    default="text",
    show_default=True,
    help="json: one JSON object a line, with the fields the composition functions' lines "
    "carry (level, filename, lineno, ts, msg) and `resource`; text: one readable line. "
    "The Deployment and the chart choose json.",
)
@click.option(
    "--debug-nodes",
    is_flag=True,
    help="Serve /debug/nodes: the free devices counted for every node of every pool (JSON), "
    "for tests; never published.",
)
def cli(**flags: Unpack[Flags]):
    """Publish every PoolObservation's histogram and every ReplicaObservation's pod state."""
    try:
        settings = settings_from(flags["max_age"], flags["min_interval"], flags["watch_silence"])
        config = kube_config(flags["kubeconfig"])
    except (ValueError, NoConfiguration) as error:
        click.echo(f"modelplane-agent: {error}", err=True)
        sys.exit(1)
    _configure_logging(flags["log_level"], flags["log_format"])
    api = LightkubeApi(
        AsyncClient(config=config, field_manager="modelplane-agent"), idle=settings.idle
    )
    _run_serving(Controller(api, _now, settings), api, flags["listen"], flags["debug_nodes"])


def log_handler(log_format: str) -> logging.Handler:
    """The handler every log line goes through: stderr, in the `--log-format` asked."""
    handler = logging.StreamHandler()
    handler.addFilter(_ResourceDefault())
    if log_format == "json":  # the functions' format, from its one home
        handler.setFormatter(logs.json_formatter())
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(resource)s %(message)s")
        )
    return handler


def _configure_logging(level: str, log_format: str) -> None:
    logging.basicConfig(level=level.upper(), handlers=[log_handler(log_format)])
    for chatty in ("httpx", "httpx2"):  # one line per request, watches included
        logging.getLogger(chatty).setLevel(max(logging.WARNING, logging.root.level))


def _run_serving(controller: Controller, api: LightkubeApi, listen: str, debug_nodes: bool) -> None:
    """Run the controller until it stops, serving health (and /debug/nodes) meanwhile."""
    host, _, port = listen.rpartition(":")
    allowance = 10 * controller.settings.tick + 30
    with asyncio.Runner() as runner:
        view = on_loop(runner.get_loop(), lambda: json.dumps(node_view(controller.state)).encode())
        server = serve(
            host or "0.0.0.0",
            int(port),
            lambda: controller.alive(allowance),
            lambda: controller.ready,
            view if debug_nodes else None,
        )
        try:
            runner.run(_run(controller, api))
        finally:
            server.shutdown()
