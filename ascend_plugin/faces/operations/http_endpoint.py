"""The operations endpoint: /healthz, /readyz and /metrics over plain HTTP.

A few lines of asyncio instead of a web framework: the plugin answers three
GETs from the kubelet's probes and Prometheus, and a 4 GB edge board should
not pay for more. Each connection carries one request and is closed.

* ``/healthz``: the process is alive, its event loop answers (this handler
  runs on it), and nothing is wrong that only a restart could fix;
* ``/readyz``: the node is served, or every cause why not;
* ``/metrics``: Prometheus text format.

What the two probes answer is decided in :mod:`.probes`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ascend_plugin.faces.operations.metrics import CONTENT_TYPE

log = logging.getLogger(__name__)

_REQUEST_TIMEOUT = 5.0
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class Probe:
    """An answer to a probe: OK or not, and why."""

    ok: bool
    detail: str


@dataclass(frozen=True)
class Routes:
    """What the endpoint asks the app."""

    liveness: Callable[[], Probe]
    readiness: Callable[[], Probe]
    metrics: Callable[[], bytes]


def parse_address(address: str) -> tuple[str, int]:
    """``host:port`` (IPv6 in brackets) -> (host, port)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


class HttpEndpoint:
    """Serves the three routes on ``address`` until closed."""

    def __init__(self, address: str, routes: Routes) -> None:
        self.host, self.port = parse_address(address)
        self.routes = routes
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Listen; the bound port is in ``self.port`` (useful when 0 was asked for)."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("operations endpoint listening", extra={"address": f"{self.host}:{self.port}"})

    async def serve_forever(self) -> None:
        """Start and serve until cancelled."""
        await self.start()
        assert self._server is not None
        try:
            await self._server.serve_forever()
        finally:
            self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_REQUEST_TIMEOUT):
                request_line = (await reader.readline()).decode("latin-1").split()
                while (await reader.readline()).strip():
                    pass  # headers: nothing here needs them
            status, content_type, body = self._route(request_line)
            head = (
                f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode("latin-1") + body)
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    def _route(self, request_line: list[str]) -> tuple[int, str, bytes]:
        if len(request_line) != 3:
            return 400, "text/plain", b"bad request\n"
        method, target, _ = request_line
        path = target.split("?", 1)[0]
        if path not in ("/healthz", "/readyz", "/metrics"):
            return 404, "text/plain", b"not found: try /healthz, /readyz or /metrics\n"
        if method != "GET":
            return 405, "text/plain", b"only GET\n"
        if path == "/metrics":
            return 200, CONTENT_TYPE, self.routes.metrics()
        probe = self.routes.liveness() if path == "/healthz" else self.routes.readiness()
        return (200 if probe.ok else 503), "text/plain", (probe.detail + "\n").encode()
