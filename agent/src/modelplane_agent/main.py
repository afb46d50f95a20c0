"""`modelplane-agent`: run the agent against the cluster it is deployed in."""

from __future__ import annotations

import asyncio
import logging
import signal
from datetime import UTC, datetime

import click
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from modelplane_common.timeutil import parse_duration

from modelplane_agent.controller import Controller, Settings
from modelplane_agent.kube import LightkubeApi
from modelplane_agent.server import loop_alive, serve


class _ResourceDefault(logging.Filter):
    """Lines not about one observation carry resource "-", so the format always resolves."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "resource"):
            record.resource = "-"
        return True


def _now() -> datetime:
    return datetime.now(UTC)


async def _run(controller: Controller, api: LightkubeApi) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, controller.stop)
    try:
        await controller.run()
    finally:
        await api.close()


@click.command()
@click.option("--kubeconfig", default=None, help="Kubeconfig file; in-cluster config if unset.")
@click.option("--listen", default="0.0.0.0:8080", show_default=True, help="host:port for probes.")
@click.option(
    "--heartbeat", default="60s", show_default=True, help="Rewrite observedAt this often."
)
@click.option(
    "--min-interval", default="2s", show_default=True, help="Least time between two writes."
)
@click.option("--log-level", default="INFO", show_default=True)
def cli(kubeconfig: str | None, listen: str, heartbeat: str, min_interval: str, log_level: str):
    """Publish every PoolObservation's histogram and every ReplicaObservation's pod state."""
    handler = logging.StreamHandler()
    handler.addFilter(_ResourceDefault())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(resource)s %(message)s"))
    logging.basicConfig(level=log_level.upper(), handlers=[handler])
    for chatty in ("httpx", "httpx2"):  # one line per request, watches included
        logging.getLogger(chatty).setLevel(max(logging.WARNING, logging.root.level))
    settings = Settings(
        heartbeat=parse_duration(heartbeat), min_interval=parse_duration(min_interval)
    )
    config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
    api = LightkubeApi(AsyncClient(config=config, field_manager="modelplane-agent"))
    controller = Controller(api, _now, settings)
    host, _, port = listen.rpartition(":")
    allowance = 10 * settings.tick + 30
    server = serve(
        host or "0.0.0.0",
        int(port),
        loop_alive(lambda: controller.last_tick, allowance),
        lambda: controller.ready,
    )
    try:
        asyncio.run(_run(controller, api))
    finally:
        server.shutdown()
