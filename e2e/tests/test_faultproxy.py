"""The fault proxy against a small HTTPS server: it forwards, throttles, stalls and cuts.

The live fault tests trust the proxy to do exactly the fault they ask for;
these cases check each fault on its own, so a fault test that passes does
not pass because the proxy did nothing.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from modelplane_devtools.processes import free_port
from modelplane_e2e import pki
from modelplane_e2e.faultproxy import (
    FaultProxy,
    Request,
    read_of,
    status_write_of,
    watch_of,
)


@dataclass
class Upstream:
    """What the server behind the proxy received, and the gate of its streamed answer."""

    port: int = 0
    headers: list[dict[str, str]] = field(default_factory=list)
    second_line: threading.Event = field(default_factory=threading.Event)


def _serve(upstream: Upstream, context: ssl.SSLContext) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_PATCH(self) -> None:
            upstream.headers.append(dict(self.headers))
            body = self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # a watch: one line now, one when the test says
            upstream.headers.append(dict(self.headers))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"first\n")
            self.wfile.flush()
            upstream.second_line.wait(10)
            self.wfile.write(b"second\n")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    upstream.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@dataclass
class Setup:
    proxy: FaultProxy
    upstream: Upstream
    client_tls: ssl.SSLContext

    def watch(self) -> ssl.SSLSocket:
        """A raw connection that asked for the streamed answer (http.client hides its socket)."""
        raw = socket.create_connection(("127.0.0.1", self.proxy.port), timeout=5)
        stream = self.client_tls.wrap_socket(raw, server_hostname="127.0.0.1")
        stream.sendall(f"GET {WATCH} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        return stream

    def connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            "127.0.0.1", self.proxy.port, context=self.client_tls, timeout=5
        )


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    ca = pki.new_ca(tmp_path, "ca")
    served = pki.sign(ca, tmp_path, "server", pki.Subject("server", ips=("127.0.0.1",)))
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(str(served.cert), str(served.key))
    upstream = Upstream()
    server = _serve(upstream, serving)
    proxy = FaultProxy(upstream.port, served.cert, served.key, ca.cert).start()
    try:
        yield Setup(proxy, upstream, ssl.create_default_context(cafile=str(ca.cert)))
    finally:
        upstream.second_line.set()
        proxy.stop()
        server.shutdown()


def _read_until(stream: ssl.SSLSocket, end: bytes) -> bytes:
    data = b""
    while not data.endswith(end):
        chunk = stream.recv(100)
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        data += chunk
    return data


def _rest(stream: ssl.SSLSocket) -> bytes:
    """What arrives until the connection ends (closed or reset)."""
    data = b""
    try:
        while chunk := stream.recv(100):
            data += chunk
    except (ssl.SSLError, ConnectionError):
        pass
    return data


WRITE = "/apis/agent.modelplane.ai/v1alpha1/poolobservations/a/status"
WATCH = "/apis/resource.k8s.io/v1/resourceclaims?watch=true&resourceVersion=7"


def test_a_request_is_forwarded_whole_and_asks_the_server_to_close(setup):
    connection = setup.connect()
    connection.request("PATCH", WRITE, body=b'{"status":{}}', headers={"Authorization": "Bearer t"})
    response = connection.getresponse()
    assert (response.status, response.read()) == (200, b'{"status":{}}')
    assert setup.upstream.headers[0]["Authorization"] == "Bearer t"
    assert setup.upstream.headers[0]["Connection"] == "close"
    assert [(s.request.path, s.action, s.status) for s in setup.proxy.seen] == [
        ("/apis/agent.modelplane.ai/v1alpha1/poolobservations/a/status", "forwarded", 200)
    ]


def test_a_throttled_request_gets_429_with_retry_after_and_never_reaches_the_server(setup):
    setup.proxy.throttle(status_write_of("poolobservations"), retry_after=3)
    connection = setup.connect()
    connection.request("PATCH", WRITE, body=b"{}")
    response = connection.getresponse()
    status = json.loads(response.read())
    assert (response.status, response.getheader("Retry-After")) == (429, "3")
    assert (status["code"], status["details"]["retryAfterSeconds"]) == (429, 3)
    assert setup.upstream.headers == []
    assert len(setup.proxy.recorded(status_write_of("poolobservations"), "throttled")) == 1


def test_a_stalled_response_holds_its_bytes_on_an_open_connection_until_released(setup):
    stream = setup.watch()
    assert _read_until(stream, b"first\n").endswith(b"first\n")
    setup.proxy.stall(watch_of("resourceclaims"))
    setup.upstream.second_line.set()
    stream.settimeout(1)
    with pytest.raises(TimeoutError):
        stream.recv(100)  # nothing comes, and the connection is not closed either
    setup.proxy.release()
    stream.settimeout(5)
    assert _read_until(stream, b"second\n") == b"second\n"


def test_a_cut_closes_the_matching_connections_only(setup):
    stream = setup.watch()
    _read_until(stream, b"first\n")
    assert setup.proxy.cut(watch_of("pods")) == 0
    assert setup.proxy.cut(watch_of("resourceclaims")) == 1
    setup.upstream.second_line.set()
    assert _rest(stream) == b""  # closed: the second line never arrives


def test_a_request_to_a_server_that_is_down_sees_its_connection_close(setup):
    setup.proxy.upstream_port = free_port()
    connection = setup.connect()
    connection.request("PATCH", WRITE, body=b"{}")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError, socket.error)):
        connection.getresponse()
    assert [s.action for s in setup.proxy.seen] == ["unreachable"]


@pytest.mark.parametrize(
    ("request_", "watch", "write"),
    [
        pytest.param(Request("GET", WATCH), True, False, id="a watch of claims"),
        pytest.param(
            Request("GET", "/apis/resource.k8s.io/v1/resourceclaims?limit=500"),
            False,
            False,
            id="a list of claims is not a watch",
        ),
        pytest.param(Request("PATCH", WRITE), False, True, id="a pool status write"),
        pytest.param(
            Request("PATCH", "/apis/agent.modelplane.ai/v1alpha1/poolobservations/a"),
            False,
            False,
            id="a spec write is not a status write",
        ),
    ],
)
def test_matches(request_, watch, write):
    assert watch_of("resourceclaims")(request_) is watch
    assert read_of("resourceclaims")(request_) is (request_.method == "GET")
    assert status_write_of("poolobservations")(request_) is write
    assert status_write_of("poolobservations", "a")(request_) is write
    assert status_write_of("poolobservations", "b")(request_) is False
