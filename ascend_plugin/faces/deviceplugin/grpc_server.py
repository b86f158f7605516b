"""The gRPC server of a device-plugin socket, made to survive what clients send it.

Two things differ from :class:`~ascend_plugin.grpc_sockets.PluginServer` (which
already closes every connection it accepted):

* **A message over 4 MiB is refused from its length prefix** with
  RESOURCE_EXHAUSTED (grpc-go's default limit, so the most a kubelet sends),
  before its body is read: HTTP/2 flow control keeps the rest at the client,
  so the plugin never holds more than one flow-control window of it.
* **Every request is checked before it is decoded** (:mod:`wire_check`):
  bytes that are not a request a kubelet could send get INVALID_ARGUMENT with
  a short reason instead of grpclib's UNKNOWN and a traceback.

A refusal is logged through :class:`RefusalLog`, at most one line per peer per
10 s; the peer is named by the pid and uid the kernel gives for the other end
of the unix socket.

The hooks are grpclib's per-connection objects: its ``Server._protocol_factory``
builds a ``Handler`` (which takes the codec) and an ``H2Protocol`` for every
accepted connection. Our ``_new_protocol`` builds the same with a codec that checks
before it decodes, a handler whose ``accept()`` gives each request stream a
bounded receive buffer, and a protocol that learns its peer when connected.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable, Collection
from typing import Any

from grpclib import GRPCError
from grpclib._typing import IServable
from grpclib.const import Status
from grpclib.encoding.proto import ProtoCodec
from grpclib.protocol import Buffer, H2Protocol, Stream
from grpclib.server import Handler, Server

from ascend_plugin.faces.deviceplugin.refusal_log import RefusalLog
from ascend_plugin.faces.deviceplugin.wire_check import (
    REQUEST_SHAPES,
    RequestLimits,
    RequestRefused,
    check_request,
)
from ascend_plugin.grpc_sockets import PluginServer

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
REASON_LENGTH = 200  # a refusal's reason is a line, whatever the decoder had to say
_PEER_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


class _RequestGuard:
    """The checks of one connection's requests, and the peer a refusal is logged against."""

    def __init__(self, limits: Callable[[], RequestLimits], refusals: RefusalLog) -> None:
        self.limits = limits
        self.refusals = refusals
        self.peer = "a peer not yet connected"

    def refuse(self, status: Status, reason: str) -> GRPCError:
        """Log the refusal (rate-limited) and return the error that answers the call."""
        self.refusals.refused(self.peer, status, reason)
        return GRPCError(status, reason)


class _CheckedCodec(ProtoCodec):
    """grpclib's protobuf codec, refusing what a kubelet never sends before decoding it."""

    def __init__(self, guard: _RequestGuard) -> None:
        self.guard = guard

    def decode(self, data: bytes, message_type: Any) -> Any:
        try:
            check_request(data, REQUEST_SHAPES[message_type], self.guard.limits())
            return super().decode(data, message_type)
        except RequestRefused as refused:
            raise self.guard.refuse(Status.INVALID_ARGUMENT, refused.reason) from None
        except Exception as error:  # whatever the decoder raises on bytes the check let through
            reason = f"{message_type.__name__} does not decode: {type(error).__name__}: {error}"[
                :REASON_LENGTH
            ]
            raise self.guard.refuse(Status.INVALID_ARGUMENT, reason) from None


class _BoundedBuffer(Buffer):
    """A request stream's receive buffer that refuses a read beyond the message limit.

    grpclib reads a message in two reads: its 5-byte prefix, then exactly as
    many bytes as the prefix announces. A longer read than the limit is
    therefore a message over it, refused before any of its body is taken.
    """

    def __init__(self, ack: Callable[[int], None], guard: _RequestGuard) -> None:
        super().__init__(ack)
        self.guard = guard

    async def read(self, size: int) -> bytes:
        if size > MAX_MESSAGE_BYTES:
            raise self.guard.refuse(
                Status.RESOURCE_EXHAUSTED,
                f"a message of {size} bytes is over the limit of {MAX_MESSAGE_BYTES} bytes "
                "(4 MiB, the most a kubelet sends)",
            )
        return await super().read(size)


class _GuardedHandler(Handler):
    """grpclib's handler of one connection, giving each request stream a bounded buffer."""

    def __init__(self, server: Server, guard: _RequestGuard) -> None:
        super().__init__(
            server._mapping, _CheckedCodec(guard), server._status_details_codec, server.__dispatch__
        )
        self.guard = guard

    def accept(self, stream: Stream, headers: Any, release_stream: Callable[[], Any]) -> None:
        # accept() runs when the request's headers arrive, before any of its data: the buffer is empty.
        stream_id = stream.id
        assert stream_id is not None
        stream.buffer = _BoundedBuffer(lambda size: stream.connection.ack(stream_id, size), self.guard)
        super().accept(stream, headers, release_stream)


class _PeerProtocol(H2Protocol):
    """grpclib's HTTP/2 protocol of one connection, telling the guard who is at the other end."""

    def __init__(self, server: Server, guard: _RequestGuard) -> None:
        self.guard = guard
        handler = _GuardedHandler(server, guard)
        server._handlers.add(handler)
        super().__init__(handler, server._config, server._h2_config)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.guard.peer = describe_peer(transport)
        super().connection_made(transport)


def describe_peer(transport: asyncio.BaseTransport) -> str:
    """``pid 4242 (uid 0)`` for a unix socket's peer, else its address."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family == socket.AF_UNIX:
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER_CREDENTIALS.size)
        except OSError:
            return "a peer whose credentials are unknown"
        pid, uid, _ = _PEER_CREDENTIALS.unpack(raw)
        return f"pid {pid} (uid {uid})"
    return f"peer {transport.get_extra_info('peername')!r}"


class GuardedServer(PluginServer):
    """A PluginServer that bounds and checks every request before it is decoded."""

    def __init__(
        self, handlers: Collection[IServable], limits: Callable[[], RequestLimits], refusals: RefusalLog
    ) -> None:
        super().__init__(handlers)
        unchecked = sorted(
            method.request_type.__name__
            for handler in handlers
            for method in handler.__mapping__().values()
            if method.request_type not in REQUEST_SHAPES
        )
        if unchecked:
            raise TypeError(f"no request shape in wire_check.REQUEST_SHAPES for {', '.join(unchecked)}")
        self._limits = limits
        self._refusals = refusals

    def _new_protocol(self) -> H2Protocol:
        # What grpclib's own factory does, with our per-connection objects.
        self.__gc_step__()
        return _PeerProtocol(self, _RequestGuard(self._limits, self._refusals))
