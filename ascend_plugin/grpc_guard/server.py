"""The gRPC server of a kubelet-facing socket, made to survive what clients send it.

What differs from :class:`~ascend_plugin.grpc_sockets.PluginServer` (which
already closes every connection it accepted):

* **A message over 4 MiB is refused from its length prefix** with
  RESOURCE_EXHAUSTED (grpc-go's default limit, so the most a kubelet sends),
  before its body is read: HTTP/2 flow control keeps the rest at the client,
  so the plugin never holds more than one flow-control window of it.
* **Every request is checked before it is decoded** (:mod:`.wire_check`,
  against the shapes and limits the service supplies as :class:`RequestRules`):
  bytes that are not a request a kubelet could send get INVALID_ARGUMENT with a
  short reason instead of grpclib's UNKNOWN and a traceback.
* **A socket that answers only the kubelet** refuses other peers with
  PERMISSION_DENIED before reading their request (``RequestRules.admit``, a
  rule of :mod:`.peers` on the uid the kernel gives for the other end).
* **Every status message fits in 4 KiB** (:mod:`.status`), whatever raised it.
* **A service refuses by raising a** :class:`~.refusals.Refused`: the method
  wrapper turns it into the status its class stands for (:mod:`.refusals`), as
  the guard does with its own refusals.

A refusal is logged through :class:`~.refusal_log.RefusalLog`, at most one line
per peer per 10 s; the peer is named by its pid and uid.

The hooks are grpclib's per-connection objects: its ``Server._protocol_factory``
builds a ``Handler`` (which takes the codec and the method table) and an
``H2Protocol`` for every accepted connection. Our ``_new_protocol`` builds the
same with a codec that checks before it decodes, a method table whose methods
admit the peer first and cap the status they end with, a handler whose
``accept()`` gives each request stream a bounded receive buffer, and a protocol
that learns its peer when connected.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpclib import GRPCError
from grpclib._typing import IServable
from grpclib.const import Handler as MethodHandler
from grpclib.encoding.proto import ProtoCodec
from grpclib.protocol import Buffer, H2Protocol, Stream
from grpclib.server import Handler, Server
from grpclib.server import Stream as ServerStream

from ascend_plugin.grpc_guard.peers import Peer, admit_anyone, peer_of
from ascend_plugin.grpc_guard.refusal_log import RefusalLog
from ascend_plugin.grpc_guard.refusals import BadRequest, PeerNotAdmitted, Refused, TooLarge, grpc_error
from ascend_plugin.grpc_guard.status import capped
from ascend_plugin.grpc_guard.wire_check import MessageShape, RequestLimits, check_request, limit_names
from ascend_plugin.grpc_sockets import PluginServer, SocketEndpoint

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
REASON_LENGTH = 200  # a refusal's reason is a line, whatever the decoder had to say


@dataclass(frozen=True)
class RequestRules:
    """What a service's socket accepts: the data the service supplies to the guard.

    ``shapes`` describe every request type the service receives; ``limits()``
    gives the bounds they name, per request (a resource's device count changes);
    ``admit(peer)`` is the reason to refuse a peer, empty to serve it.
    """

    shapes: Mapping[type, MessageShape]
    limits: Callable[[], RequestLimits]
    admit: Callable[[Peer], str] = field(default=admit_anyone)


class _ConnectionGuard:
    """The checks of one connection's requests, and the peer a refusal is logged against."""

    def __init__(self, rules: RequestRules, refusals: RefusalLog) -> None:
        self.rules = rules
        self.refusals = refusals
        self.peer = Peer(unknown="a peer not yet connected")

    def refuse(self, refused: Refused) -> GRPCError:
        """Log the refusal (rate-limited) and return the error that answers the call."""
        self.refusals.refused(str(self.peer), refused)
        return grpc_error(refused)

    def method(self, func: Callable[[ServerStream[Any, Any]], Any]) -> Callable[[Any], Any]:
        """``func`` behind the peer check, its refusals made statuses, the message capped however it ends."""

        async def guarded(stream: ServerStream[Any, Any]) -> None:
            if reason := self.rules.admit(self.peer):
                raise self.refuse(PeerNotAdmitted("peer", reason))
            try:
                await func(stream)
            except Refused as refused:  # the service logged and counted it: only the answer is left
                raise grpc_error(refused) from None
            except GRPCError as error:
                if error.message is None:
                    raise
                raise GRPCError(error.status, capped(error.message), error.details) from None

        return guarded


class _CheckedCodec(ProtoCodec):
    """grpclib's protobuf codec, refusing what a kubelet never sends before decoding it."""

    def __init__(self, guard: _ConnectionGuard) -> None:
        self.guard = guard

    def decode(self, data: bytes, message_type: Any) -> Any:
        rules = self.guard.rules
        try:
            check_request(data, rules.shapes[message_type], rules.limits())
            return super().decode(data, message_type)
        except Refused as refused:
            raise self.guard.refuse(refused) from None
        except Exception as error:  # whatever the decoder raises on bytes the check let through
            reason = f"{message_type.__name__} does not decode: {type(error).__name__}: {error}"[
                :REASON_LENGTH
            ]
            raise self.guard.refuse(BadRequest("decode", reason)) from None


class _BoundedBuffer(Buffer):
    """A request stream's receive buffer that refuses a read beyond the message limit.

    grpclib reads a message in two reads: its 5-byte prefix, then exactly as
    many bytes as the prefix announces. A longer read than the limit is
    therefore a message over it, refused before any of its body is taken.
    """

    def __init__(self, ack: Callable[[int], None], guard: _ConnectionGuard) -> None:
        super().__init__(ack)
        self.guard = guard

    async def read(self, size: int) -> bytes:
        if size > MAX_MESSAGE_BYTES:
            raise self.guard.refuse(
                TooLarge(
                    "size",
                    f"a message of {size} bytes is over the limit of {MAX_MESSAGE_BYTES} bytes "
                    "(4 MiB, the most a kubelet sends)",
                )
            )
        return await super().read(size)


class _GuardedHandler(Handler):
    """grpclib's handler of one connection: guarded methods, a bounded buffer per request stream."""

    def __init__(self, server: Server, guard: _ConnectionGuard) -> None:
        methods: dict[str, MethodHandler] = {
            path: method._replace(func=guard.method(method.func)) for path, method in server._mapping.items()
        }
        super().__init__(methods, _CheckedCodec(guard), server._status_details_codec, server.__dispatch__)
        self.guard = guard

    def accept(self, stream: Stream, headers: Any, release_stream: Callable[[], Any]) -> None:
        # accept() runs when the request's headers arrive, before any of its data: the buffer is empty.
        stream_id = stream.id
        assert stream_id is not None
        stream.buffer = _BoundedBuffer(lambda size: stream.connection.ack(stream_id, size), self.guard)
        super().accept(stream, headers, release_stream)


class _PeerProtocol(H2Protocol):
    """grpclib's HTTP/2 protocol of one connection, telling the guard who is at the other end."""

    def __init__(self, server: Server, guard: _ConnectionGuard) -> None:
        self.guard = guard
        handler = _GuardedHandler(server, guard)
        server._handlers.add(handler)
        super().__init__(handler, server._config, server._h2_config)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.guard.peer = peer_of(transport)
        super().connection_made(transport)


class GuardedServer(PluginServer):
    """A PluginServer that admits, bounds and checks every request before it is decoded."""

    def __init__(self, handlers: Collection[IServable], rules: RequestRules, refusals: RefusalLog) -> None:
        super().__init__(handlers)
        unchecked = sorted(
            method.request_type.__name__
            for handler in handlers
            for method in handler.__mapping__().values()
            if method.request_type not in rules.shapes
        )
        if unchecked:
            raise TypeError(f"no request shape for {', '.join(unchecked)}")
        unbounded = sorted(limit_names(rules.shapes) - set(rules.limits()))
        if unbounded:
            raise TypeError(f"the request limits name no bound for {', '.join(unbounded)}")
        self._rules = rules
        self._refusals = refusals

    def _new_protocol(self) -> H2Protocol:
        # What grpclib's own factory does, with our per-connection objects.
        self.__gc_step__()
        return _PeerProtocol(self, _ConnectionGuard(self._rules, self._refusals))


class GuardedEndpoint(SocketEndpoint):
    """A SocketEndpoint whose every server is a GuardedServer under ``rules``, with one refusal log."""

    def __init__(self, handlers: Collection[IServable], path: Path, what: str, rules: RequestRules) -> None:
        super().__init__(handlers, path, what)
        self.rules = rules
        self.refusals = RefusalLog(socket=str(path))

    def _new_server(self) -> PluginServer:
        return GuardedServer(self.handlers, self.rules, self.refusals)
