"""gRPC servers on the unix sockets the kubelet reaches (the kubelet or an operator may delete them).

A :class:`SocketEndpoint` re-creates its socket when it goes and removes only its own.
"""

from __future__ import annotations

import logging
import os
import socket
import weakref
from asyncio import BaseTransport
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Final, Protocol

import anyio
import anyio.lowlevel
from grpclib.const import Handler as MethodHandler
from grpclib.protocol import H2Protocol
from grpclib.server import Server

from ascend_plugin.files import make_directory
from ascend_plugin.other_plugins import foreign_socket, socket_server
from ascend_plugin.path_facts import PathUnusable, create_failure

log = logging.getLogger(__name__)

FileStamp = tuple[int, int, int]

# sun_path is 108 bytes on Linux, the terminating NUL included.
MAX_SOCKET_PATH: Final = 107
SOCKET_MODE = 0o600  # only our uid, and root (the kubelet), may connect
CLOSE_WAIT = 2.0  # seconds a closing server gets to finish its connections
ACCEPT_TURNS = 3  # loop turns from accepting a connection to setting it up


class Servable(Protocol):
    """A gRPC service as grpclib serves it (what betterproto2 generates): its methods by path."""

    def __mapping__(self) -> Mapping[str, MethodHandler]: ...


def file_stamp(path: Path) -> FileStamp | None:
    """(inode, ctime, mtime) of ``path``, or None when it does not exist (a re-created socket often gets
    the inode number its predecessor just freed)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_ctime_ns, st.st_mtime_ns)


def bound_socket(path: Path) -> socket.socket:
    """A unix stream socket bound at ``path``, mode :data:`SOCKET_MODE` from the bind (Linux gives
    the file the inode's mode at bind time), whatever the umask.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.fchmod(sock.fileno(), SOCKET_MODE)
        sock.bind(os.fsencode(path))
    except OSError:
        sock.close()
        raise
    return sock


class PluginServer(Server):
    """A grpclib Server whose ``close()`` also closes every connection it accepted."""

    def __init__(self, handlers: Collection[Servable]) -> None:
        super().__init__(handlers)
        self._protocols: weakref.WeakSet[H2Protocol] = weakref.WeakSet()
        self._closed = False

    def _set_up(self, protocol: H2Protocol) -> Callable[[BaseTransport], None] | None:
        """Change a new connection's grpclib objects; what to do once it is made. A subclass checks more."""
        return None

    def _protocol_factory(self) -> H2Protocol:
        protocol = super()._protocol_factory()
        connected = self._set_up(protocol)
        set_up = protocol.connection_made

        def connection_made(transport: BaseTransport) -> None:
            set_up(transport)
            if connected is not None:
                connected(transport)
            if self._closed:
                protocol.processor.close("the plugin closed its server")

        protocol.connection_made = connection_made  # type: ignore[method-assign]
        self._protocols.add(protocol)
        return protocol

    def close(self) -> None:
        self._closed = True
        super().close()
        for protocol in list(self._protocols):
            processor = getattr(protocol, "processor", None)  # absent until the connection was made
            if processor is not None:
                processor.close("the plugin closed its server")


class EndpointStopped(PathUnusable):
    """``start`` of an endpoint that was stopped: its owner is shutting it down."""


class SocketEndpoint:
    """Starts, re-creates and stops a gRPC server on the unix socket ``path``; each runs to the end even
    when its caller is cancelled (no server left listening unowned); once stopped, it stays stopped."""

    def __init__(self, handlers: Collection[Servable], path: Path, what: str) -> None:
        self.handlers = tuple(handlers)
        self.path = path
        self.what = what
        self._server: PluginServer | None = None
        self._stamp: FileStamp | None = None
        self._stopped = False
        self._lock = anyio.Lock()

    @property
    def serving(self) -> bool:
        """True while our socket file is in place."""
        return self._server is not None and self._stamp is not None and file_stamp(self.path) == self._stamp

    def _new_server(self) -> PluginServer:
        """The server for a fresh socket; a face that checks requests builds its own."""
        return PluginServer(self.handlers)

    async def start(self) -> None:
        """Serve on a fresh socket, then close the previous server; PathUnusable naming the cause."""
        if len(os.fsencode(self.path)) > MAX_SOCKET_PATH:
            raise PathUnusable(
                f"socket path {self.path} is {len(os.fsencode(self.path))} bytes; a unix socket path may "
                f"have at most {MAX_SOCKET_PATH}: choose a shorter directory"
            )
        with anyio.CancelScope(shield=True):
            async with self._lock:
                if self._stopped:
                    raise EndpointStopped(f"{self.what} on {self.path} was stopped")
                try:
                    make_directory(self.path.parent)
                except OSError as error:
                    failed = Path(error.filename) if error.filename else self.path.parent
                    raise PathUnusable(create_failure(failed, error)) from error
                server = self._new_server()
                try:
                    if self.path.is_socket():
                        # Another process serving our path (not our own socket file, nor one nobody serves)?
                        ours = self._stamp is not None and file_stamp(self.path) == self._stamp
                        if not ours and (other := socket_server(self.path)) is not None and not other.ours:
                            raise PathUnusable(foreign_socket(self.path, other))
                        self.path.unlink()  # stale socket of an earlier run (no live instance serves it)
                    await server.start(sock=bound_socket(self.path))
                except OSError as error:
                    raise PathUnusable(create_failure(self.path, error)) from error
                previous, self._server = self._server, server
                self._stamp = file_stamp(self.path)
                log.info("serving %s", self.what, extra={"socket": str(self.path)})
                if previous is not None:
                    await self._close(previous)

    async def stop(self) -> None:
        """Remove our socket and close the server, for good."""
        with anyio.CancelScope(shield=True):
            async with self._lock:
                self._stopped = True
                if self._stamp is not None and file_stamp(self.path) == self._stamp:
                    self.path.unlink(missing_ok=True)
                self._stamp = None
                server, self._server = self._server, None
                if server is not None:
                    await self._close(server)

    @staticmethod
    async def _close(server: PluginServer) -> None:
        """Close a server nobody can reach by its path any more, after a few loop turns: a connection
        accepted just before would be set up after the close and leak its socket (asyncio 3.11).
        """
        for _ in range(ACCEPT_TURNS):
            await anyio.lowlevel.checkpoint()
        server.close()
        with anyio.move_on_after(CLOSE_WAIT):
            await server.wait_closed()
