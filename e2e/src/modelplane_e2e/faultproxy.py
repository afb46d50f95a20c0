"""A fault-injecting HTTPS proxy between one client and one API server.

Fault tests put it between the agent and kube-apiserver (the agent's
kubeconfig names the proxy) and switch faults on and off while traffic flows:

- `stall(match)`: the responses of matching requests stop being forwarded,
  mid-stream or from their first byte, and their connections stay open, as
  on a half-open network; `release()` lets the bytes flow again.
- `cut(match)`: the matching connections open now are closed, as a dropped
  connection is.
- `throttle(match, retry_after)`: matching requests are answered 429 Too Many
  Requests with `Retry-After`, as the API server's priority and fairness
  answers, until `unthrottle()`.

The proxy terminates TLS with a certificate the client trusts and opens its
own TLS connection to the API server for each client connection, so it reads
each request's method and target. It carries one request per connection: it
forwards each request with `Connection: close`, so a keep-alive client opens
a new connection for its next request, and every request meets the faults in
force when it is made. Authentication must be a bearer token, which passes
through; a client certificate would end at the proxy.

Every request is recorded in `seen`, with what the proxy did with it and the
status code of the answer it forwarded. The
proxy listens on 127.0.0.1 on a free port and runs its own event loop on a
thread, so a synchronous test drives it; `stop()` closes every connection
and ends the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

# How often a stalled response looks whether it was released.
_STALL_POLL = 0.05


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    target: str  # path and query, as on the request line

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.target).query)


Match = Callable[[Request], bool]


def watch_of(plural: str) -> Match:
    """The watch requests of one resource (`resourceclaims`), in any namespace."""
    return lambda r: (
        r.method == "GET"
        and r.path.endswith(f"/{plural}")
        and r.query.get("watch", [""])[0] in ("true", "1")
    )


def read_of(plural: str) -> Match:
    """The list and watch requests of one resource, in any namespace."""
    return lambda r: r.method == "GET" and r.path.endswith(f"/{plural}")


def status_write_of(plural: str, name: str | None = None) -> Match:
    """Writes of the status subresource of one resource (`poolobservations`), or of one
    object of it."""
    wanted = f"/{plural}/{name}/status" if name else None
    return lambda r: (
        r.method in ("PATCH", "PUT")
        and f"/{plural}/" in r.path
        and r.path.endswith("/status")
        and (wanted is None or r.path.endswith(wanted))
    )


@dataclass(slots=True)
class Seen:
    at: float  # time.time() when the request arrived
    request: Request
    action: str  # forwarded | throttled | unreachable
    status: int | None = None  # the answer's status code, once its first bytes passed


@dataclass(eq=False)
class _Connection:
    request: Request
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter

    def close(self) -> None:
        """After what was written is sent (the response's end)."""
        for writer in (self.client, self.upstream):
            writer.close()

    def abort(self) -> None:
        """At once, dropping what was not sent yet (a cut)."""
        for writer in (self.client, self.upstream):
            writer.transport.abort()


class FaultProxy:
    def __init__(self, upstream_port: int, certificate: Path, key: Path, ca: Path) -> None:
        """`certificate`/`key`: what the proxy serves (the client must trust it);
        `ca`: what the API server's certificate is checked against."""
        self.upstream_port = upstream_port
        self.port = 0
        self.seen: list[Seen] = []
        self._stalled: Match | None = None
        self._throttled: tuple[Match, int] | None = None
        self._open: set[_Connection] = set()
        self._serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._serving.load_cert_chain(str(certificate), str(key))
        self._upstream = ssl.create_default_context(cafile=str(ca))
        for context in (self._serving, self._upstream):
            context.set_alpn_protocols(["http/1.1"])  # one request per connection, readable
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy")
        self._server: asyncio.Server | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FaultProxy:
        self._thread.start()
        self._server = self._call(
            asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._serving)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    # ------------------------------------------------------------------ faults

    def stall(self, match: Match) -> None:
        self._stalled = match

    def release(self) -> None:
        self._stalled = None

    def throttle(self, match: Match, retry_after: int) -> None:
        self._throttled = (match, retry_after)

    def unthrottle(self) -> None:
        self._throttled = None

    def cut(self, match: Match) -> int:
        """Close the matching connections open now; returns how many there were."""

        async def cut() -> int:
            hit = [c for c in self._open if match(c.request)]
            for connection in hit:
                connection.abort()
            return len(hit)

        return self._call(cut())

    def recorded(self, match: Match, action: str, since: float = 0.0) -> list[Seen]:
        """The requests recorded since `since` that match, which the proxy gave `action`."""
        seen = list(self.seen)
        return [s for s in seen if s.at >= since and s.action == action and match(s.request)]

    # ------------------------------------------------------------------ the loop thread

    def _call(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self._open):
            connection.abort()

    async def _serve(self, client_in: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        try:
            request, headers, body = await _read_request(client_in)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            client.transport.abort()
            return
        throttled = self._throttled
        if throttled is not None and throttled[0](request):
            self._record(request, "throttled")
            with contextlib.suppress(OSError):
                await _too_many_requests(client, throttled[1])
            return
        try:
            upstream_in, upstream = await asyncio.open_connection(
                "127.0.0.1", self.upstream_port, ssl=self._upstream, server_hostname="127.0.0.1"
            )
        except OSError:  # the API server is down: the client sees its connection close
            self._record(request, "unreachable")
            client.transport.abort()
            return
        seen = self._record(request, "forwarded")
        connection = _Connection(request, client, upstream)
        self._open.add(connection)
        try:
            upstream.write(_request_head(request, headers) + body)
            # Until the response ends, or the client hangs up (a watch it gave up on).
            await _first_of(self._forward(seen, upstream_in, client), client_in.read())
        finally:
            self._open.discard(connection)
            connection.close()

    async def _forward(
        self, seen: Seen, upstream: asyncio.StreamReader, client: asyncio.StreamWriter
    ) -> None:
        while chunk := await upstream.read(65536):
            while (stalled := self._stalled) is not None and stalled(seen.request):
                await asyncio.sleep(_STALL_POLL)
            if seen.status is None:
                seen.status = _status_code(chunk)
            client.write(chunk)
            await client.drain()
        await client.drain()

    def _record(self, request: Request, action: str) -> Seen:
        seen = Seen(time.time(), request, action)
        self.seen.append(seen)
        return seen


async def _read_request(
    reader: asyncio.StreamReader,
) -> tuple[Request, list[tuple[str, str]], bytes]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    first, *lines = head.split("\r\n")
    method, target, _version = first.split(" ", 2)
    pairs = (line.partition(":") for line in lines if line)
    headers = [(k.strip(), v.strip()) for k, _, v in pairs]
    fields = {k.lower(): v for k, v in headers}
    if "transfer-encoding" in fields:
        raise ValueError("a chunked request body: the proxy reads Content-Length bodies only")
    body = await reader.readexactly(int(fields.get("content-length", "0")))
    return Request(method, target), headers, body


def _status_code(response_start: bytes) -> int:
    """200 of "HTTP/1.1 200 OK ..."; 0 when the bytes do not start a response."""
    parts = response_start.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def _request_head(request: Request, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"{request.method} {request.target} HTTP/1.1"]
    lines += [f"{k}: {v}" for k, v in headers if k.lower() != "connection"]
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _too_many_requests(client: asyncio.StreamWriter, retry_after: int) -> None:
    """What the API server answers a request its priority and fairness rejects."""
    body = json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "too many requests (the fault proxy), please try again later",
            "reason": "TooManyRequests",
            "details": {"retryAfterSeconds": retry_after},
            "code": 429,
        }
    ).encode()
    head = (
        "HTTP/1.1 429 Too Many Requests\r\n"
        "Content-Type: application/json\r\n"
        f"Retry-After: {retry_after}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    client.write(head.encode("latin-1") + body)
    await client.drain()
    client.close()


async def _first_of(*awaitables: Coroutine[Any, Any, object]) -> None:
    """Run them together until one ends (a failure is an end too); cancel the others."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    for task in done:
        task.exception()  # retrieved: a reset connection is how a stream ends here
