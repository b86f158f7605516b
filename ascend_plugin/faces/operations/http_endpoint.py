"""The operations endpoint: /healthz, /readyz and /metrics over plain HTTP, one request per connection.

It listens on every address by default, so its requests and connections are bounded and refusals logged
once a minute (docs/operations.md, "The HTTP endpoint").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # of /metrics
REQUEST_TIMEOUT = 5.0  # seconds a client has to send its request's head
HEAD_LIMIT = 64 * 1024  # bytes of a request's head: its request line and header lines together
MAX_CONNECTIONS = 256
REFUSALS_LOGGED_EVERY = 60.0  # seconds: one line for every refusal meanwhile
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class Probe:
    ok: bool
    detail: str


@dataclass(frozen=True)
class Routes:
    liveness: Callable[[], Probe]
    readiness: Callable[[], Probe]
    metrics: Callable[[], bytes]


def parse_address(address: str) -> tuple[str, int]:
    """``host:port`` (IPv6 in brackets) -> (host, port)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


class RefusalLog:
    """Refused requests and connections, counted by reason; logged at most once per REFUSALS_LOGGED_EVERY."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.counts: Counter[str] = Counter()  # since the last line
        self.total = 0
        self._last: float | None = None

    def refused(self, reason: str, peer: object) -> None:
        self.counts[reason] += 1
        self.total += 1
        now = self.clock()
        if self._last is not None and now - self._last < REFUSALS_LOGGED_EVERY:
            return
        self._last = now
        said = ", ".join(f"{count} {why}" for why, count in sorted(self.counts.items()))
        log.warning(
            "operations endpoint refused %s (the last from %s); the next such line comes at most %g s later",
            said,
            peer,
            REFUSALS_LOGGED_EVERY,
            extra={"refused": dict(self.counts)},
        )
        self.counts.clear()


class SharedRendering:
    """A rendering done once for every request that asks while it is pending, and never before they asked."""

    def __init__(self, render: Callable[[], bytes]) -> None:
        self.render = render
        self._pending: asyncio.Future[bytes] | None = None

    async def get(self) -> bytes:
        if self._pending is None:
            loop = asyncio.get_running_loop()
            self._pending = loop.create_future()
            loop.call_soon(self._run, self._pending)  # after the requests ready now have joined it
        return await asyncio.shield(self._pending)

    def _run(self, pending: asyncio.Future[bytes]) -> None:
        self._pending = None
        try:
            pending.set_result(self.render())
        except Exception as error:  # the requests that shared it answer it alike
            pending.set_exception(error)


class HttpEndpoint:
    """Serves the three routes on ``address`` until closed."""

    def __init__(self, address: str, routes: Routes) -> None:
        self.host, self.port = parse_address(address)
        self.routes = routes
        self.refusals = RefusalLog()
        self.metrics = SharedRendering(routes.metrics)
        self._server: asyncio.Server | None = None
        # The open connections, the oldest first: True while still sending their request's head.
        self._connections: dict[asyncio.StreamWriter, bool] = {}

    async def start(self) -> None:
        """Listen; the bound port is in ``self.port`` (useful when 0 was asked for)."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("operations endpoint listening", extra={"address": f"{self.host}:{self.port}"})

    async def serve_forever(self) -> None:
        await self.start()
        assert self._server is not None
        try:
            await self._server.serve_forever()
        finally:
            self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        if len(self._connections) >= MAX_CONNECTIONS and not self._make_room():
            self.refusals.refused(f"connection(s) over the cap of {MAX_CONNECTIONS}", peer)
            writer.transport.abort()
            return
        self._connections[writer] = True
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                request_line = await self._head(reader)
            if request_line is None:
                self.refusals.refused(f"request head(s) over {HEAD_LIMIT // 1024} KiB", peer)
                status, content_type, body = 431, "text/plain", b"request head too large\n"
            else:
                if writer in self._connections:
                    self._connections[writer] = False
                status, content_type, body = await self._route(request_line)
        except (TimeoutError, ConnectionError):
            status = 0
        try:
            if status and not writer.is_closing():
                head = (
                    f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                )
                writer.write(head.encode("latin-1") + body)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            self._connections.pop(writer, None)
            writer.close()

    @staticmethod
    async def _head(reader: asyncio.StreamReader) -> list[str] | None:
        """The request line's words, once the whole head is read; None for a head over HEAD_LIMIT."""
        budget = HEAD_LIMIT
        lines: list[bytes] = []
        while not lines or lines[-1].strip():
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError:  # the stream's own limit, 64 KiB by default
                return None
            except asyncio.IncompleteReadError as error:  # the client stopped sending: what came is all
                lines.append(error.partial)
                break
            budget -= len(line)
            if budget < 0:
                return None
            lines.append(line)
        return lines[0].decode("latin-1").split()

    def _make_room(self) -> bool:
        """Close the connection that has waited longest for its request head; False when none waits."""
        for connection, reading in self._connections.items():
            if reading:
                del self._connections[connection]
                connection.transport.abort()
                return True
        return False

    async def _route(self, request_line: list[str]) -> tuple[int, str, bytes]:
        if len(request_line) != 3:
            return 400, "text/plain", b"bad request\n"
        method, target, _ = request_line
        path = target.split("?", 1)[0]
        if path not in ("/healthz", "/readyz", "/metrics"):
            return 404, "text/plain", b"not found: try /healthz, /readyz or /metrics\n"
        if method != "GET":
            return 405, "text/plain", b"only GET\n"
        if path == "/metrics":
            return 200, CONTENT_TYPE, await self.metrics.get()
        probe = self.routes.liveness() if path == "/healthz" else self.routes.readiness()
        return (200 if probe.ok else 503), "text/plain", (probe.detail + "\n").encode()
