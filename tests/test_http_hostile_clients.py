"""The operations endpoint holds its ground: long header lines, connection floods, a crowd of scrapers.

A request head over 64 KiB is answered 431 (or its connection closed), and
all such refusals make at most one log line a minute; at most 256 connections
are open, a newcomer taking the place of the one that has waited longest for
its request; concurrent scrapes of /metrics share one rendering, so a crowd
of scrapers cannot starve /healthz. Timings are measured in
bench/http_scrapers.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from log_records import lines
from plugin_harness import FakeNode
from plugin_process import PluginProcess, plugin_process
from waiting import eventually, until

from ascend_plugin.faces.operations.http_endpoint import HEAD_LIMIT, HttpEndpoint, Probe, RefusalLog, Routes

pytestmark = pytest.mark.anyio

ENDPOINT = "ascend_plugin.faces.operations.http_endpoint"
LONG_HEADER = b"X-Long: " + b"a" * (100 * 1024) + b"\r\n"


def ask(port: int, path: str = "/healthz", extra: bytes = b"") -> bytes:
    """One GET on a fresh connection: the whole answer (empty when the connection was closed unanswered)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        try:
            connection.sendall(f"GET {path} HTTP/1.1\r\nHost: test\r\n".encode() + extra + b"\r\n")
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
        except ConnectionResetError:  # closed with the rest of our request unread
            return b""
        return answer


def healthy(port: int) -> bool:
    try:
        return ask(port).startswith(b"HTTP/1.1 200 ")
    except OSError:  # not listening yet
        return False


@pytest.fixture
def plugin(node: FakeNode, plugin_dir: Path, short_tmp: Path) -> Iterator[PluginProcess]:
    with plugin_process(node, plugin_dir, short_tmp / "plugin.log", http=True) as running:
        assert running.http_port is not None
        eventually(lambda: healthy(running.http_port or 0), "the endpoint answering", unless=running.exited)
        yield running


def test_long_header_lines_are_refused_with_one_log_line(plugin: PluginProcess) -> None:
    port = plugin.http_port
    assert port is not None
    answers = [ask(port, "/readyz", LONG_HEADER) for _ in range(50)]
    assert all(answer.startswith(b"HTTP/1.1 431 ") or answer == b"" for answer in answers), answers[:3]
    assert any(answer.startswith(b"HTTP/1.1 431 ") for answer in answers)
    assert ask(port).startswith(b"HTTP/1.1 200 ")
    said = lines(plugin.lines(), ENDPOINT, level="WARNING")
    assert len(said) == 1, said
    assert "request head(s) over 64 KiB" in said[0]["msg"]
    assert not [line for line in plugin.lines() if "exc" in line or line.get("level") == "ERROR"]


LISTEN = "0A"  # the TCP state of a listening socket in /proc/net/tcp


def connections_to(pid: int, port: int) -> set[int]:
    """The TCP connections process ``pid`` has accepted on ``port`` and not closed, by their peer's port.

    Its sockets (``/proc/<pid>/fd``) matched by inode to the kernel's table, the listening one left out:
    no other file descriptor the process opens meanwhile counts.
    """
    fd_dir = Path(f"/proc/{pid}/fd")
    inodes = set()
    for fd in os.listdir(fd_dir):
        with contextlib.suppress(OSError):  # closed meanwhile
            target = os.readlink(fd_dir / fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    peers = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/net/{table}") as rows:
            for row in list(rows)[1:]:
                local, remote, state, inode = (row.split()[i] for i in (1, 2, 3, 9))
                if int(local.rsplit(":", 1)[1], 16) == port and state != LISTEN and inode in inodes:
                    peers.add(int(remote.rsplit(":", 1)[1], 16))
    return peers


def closed_by_the_peer(connection: socket.socket) -> bool:
    return bool(select.select([connection], [], [], 0)[0])


def test_idle_connections_past_the_cap_make_way_for_requests(plugin: PluginProcess) -> None:
    port = plugin.http_port
    assert port is not None
    before = len(connections_to(plugin.pid, port))
    with contextlib.ExitStack() as stack:
        idle: list[socket.socket] = []
        for _ in range(8):  # in batches the listen backlog holds, each taken in (or closed) before the next
            batch = [stack.enter_context(socket.create_connection(("127.0.0.1", port))) for _ in range(50)]
            idle += batch

            def taken_in(batch: list[socket.socket] = batch) -> bool:
                accepted = connections_to(plugin.pid, port)
                return all(c.getsockname()[1] in accepted or closed_by_the_peer(c) for c in batch)

            eventually(taken_in, "the connections taken in by the plugin")
        assert len(idle) == 400
        # The plugin has taken every one in: the last is open, or closed by a later one's arrival. Each
        # was handled before this request, and what they made way with closed before its answer ended.
        assert ask(port).startswith(b"HTTP/1.1 200 ")
        open_now = len(connections_to(plugin.pid, port))
    assert open_now <= before + 256 + 1, f"{open_now - before} connections open"


async def test_a_crowd_of_scrapers_shares_renderings_of_the_metrics() -> None:
    renderings = []

    def metrics() -> bytes:
        renderings.append(1)
        return b"# metrics\n"

    ok = Probe(True, "ok")
    endpoint = HttpEndpoint("127.0.0.1:0", Routes(lambda: ok, lambda: ok, metrics))
    async with serving(endpoint):
        answers = await asyncio.gather(*(fetch(endpoint.port, "/metrics") for _ in range(200)))
    assert all(answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"# metrics\n") for answer in answers)
    assert len(renderings) < 50, f"{len(renderings)} renderings for 200 scrapes"


async def test_a_rendering_is_never_older_than_the_request() -> None:
    value = [b"1\n"]
    ok = Probe(True, "ok")
    endpoint = HttpEndpoint("127.0.0.1:0", Routes(lambda: ok, lambda: ok, lambda: value[0]))
    async with serving(endpoint):
        assert (await fetch(endpoint.port, "/metrics")).endswith(b"1\n")
        value[0] = b"2\n"
        assert (await fetch(endpoint.port, "/metrics")).endswith(b"2\n")


async def test_a_head_over_the_limit_in_many_short_lines_is_refused_too() -> None:
    ok = Probe(True, "ok")
    endpoint = HttpEndpoint("127.0.0.1:0", Routes(lambda: ok, lambda: ok, lambda: b""))
    many = b"".join(b"X-Many-%d: %s\r\n" % (n, b"b" * 1000) for n in range(HEAD_LIMIT // 1000 + 1))
    async with serving(endpoint):
        answer = await fetch(endpoint.port, "/healthz", many)
    assert answer.startswith(b"HTTP/1.1 431 ") or answer == b""
    assert endpoint.refusals.total == 1


def test_refusals_are_logged_once_a_minute_with_their_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    refusals = RefusalLog(clock=lambda: now[0])
    for _ in range(100):
        refusals.refused("request head(s) over 64 KiB", "peer")
    now[0] += 59.0
    refusals.refused("connection(s) over the cap of 256", "peer")
    assert len(caplog.records) == 1
    now[0] += 1.0
    refusals.refused("request head(s) over 64 KiB", "peer")
    assert len(caplog.records) == 2
    assert caplog.records[1].__dict__["refused"] == {
        "connection(s) over the cap of 256": 1,
        "request head(s) over 64 KiB": 100,
    }
    assert refusals.total == 102


@contextlib.asynccontextmanager
async def serving(endpoint: HttpEndpoint) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(endpoint.serve_forever)
        await until(lambda: endpoint.port != 0, "listening")
        yield
        tasks.cancel_scope.cancel()


async def fetch(port: int, path: str, extra: bytes = b"") -> bytes:
    """One GET on a fresh connection from this event loop: the whole answer (empty: closed unanswered)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: test\r\n".encode() + extra + b"\r\n")
        await writer.drain()
        return await reader.read()
    except ConnectionResetError:
        return b""
    finally:
        writer.close()
