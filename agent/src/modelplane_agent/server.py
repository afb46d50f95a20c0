"""Health, readiness and metrics over HTTP, on a thread beside the event loop.

/healthz: 200 while the publisher makes progress (`Controller.alive`: a pass,
          or one observation of a pass, finished recently); a wedged loop, a
          hung write or a dead publisher fails the liveness probe and gets the
          pod restarted;
/readyz:  200 once every kind has been listed (the agent can publish);
/metrics: Prometheus text format;
/debug/nodes: with --debug-nodes only, the agent's per-node view as JSON
          (`modelplane_agent.debug`), for the live oracle test.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from modelplane_agent.metrics import REGISTRY


def serve(
    host: str,
    port: int,
    alive: Callable[[], bool],
    ready: Callable[[], bool],
    debug_nodes: Callable[[], bytes] | None = None,
) -> ThreadingHTTPServer:
    """Start serving on a daemon thread; the caller shuts the server down.

    /debug/nodes is served only when `debug_nodes` is given (404 otherwise).
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._send(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
            elif self.path == "/healthz":
                ok = alive()
                self._send(200 if ok else 503, b"ok\n" if ok else b"loop stalled\n")
            elif self.path == "/readyz":
                ok = ready()
                self._send(200 if ok else 503, b"ok\n" if ok else b"not synced\n")
            elif self.path == "/debug/nodes" and debug_nodes is not None:
                self._debug_nodes(debug_nodes)
            else:
                self._send(404, b"not found\n")

        def _debug_nodes(self, view: Callable[[], bytes]) -> None:
            try:
                body = view()
            except Exception as error:  # the loop is stopping or too busy to answer
                self._send(503, f"{type(error).__name__}: {error}\n".encode())
                return
            self._send(200, body, "application/json")

        def _send(self, code: int, body: bytes, content_type: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # probes every few seconds would drown the agent's own log

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
