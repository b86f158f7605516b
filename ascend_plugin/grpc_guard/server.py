"""The gRPC server of a kubelet-facing socket, made to survive what clients send it.

Each accepted connection's grpclib objects are changed before any byte arrives: a message over 4 MiB is
refused from its length prefix (flow control keeps the rest at the client), every request is checked
before it is decoded (:mod:`.wire_check`), a peer the socket does not answer is refused before its request
is read (:mod:`.peers`), and every status message is cut to 4 KiB (:mod:`.status`). A service refuses by
raising a :class:`~.refusals.Refused`. grpclib has no public hook for any of this: the attributes used are
checked by tests/test_grpclib_internals.py, and pyproject.toml allows only the grpclib releases it passed on.
"""

from __future__ import annotations

from asyncio import BaseTransport
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpclib import GRPCError
from grpclib.encoding.proto import ProtoCodec
from grpclib.protocol import Buffer, H2Protocol, Stream
from grpclib.server import Handler
from grpclib.server import Stream as ServerStream

from ascend_plugin.grpc_guard.peers import Peer, admit_anyone, peer_of
from ascend_plugin.grpc_guard.refusal_log import RefusalLog
from ascend_plugin.grpc_guard.refusals import BadRequest, PeerNotAdmitted, Refused, TooLarge, grpc_error
from ascend_plugin.grpc_guard.status import capped
from ascend_plugin.grpc_guard.wire_check import MessageShape, RequestLimits, check_request, limit_names
from ascend_plugin.grpc_sockets import PluginServer, Servable, SocketEndpoint

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
REASON_LENGTH = 200  # a refusal's reason is a line, whatever the decoder had to say


@dataclass(frozen=True)
class RequestRules:
    """What a service's socket accepts: the shape of each request type, their bounds now, which peers."""

    shapes: Mapping[type, MessageShape]
    limits: Callable[[], RequestLimits]  # per request: a resource's device count changes
    admit: Callable[[Peer], str] = field(default=admit_anyone)  # the reason to refuse a peer, "" to serve it


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

    def accept(self, accept: Callable[[Stream, Any, Callable[[], Any]], None]) -> Callable[..., None]:
        """grpclib's ``accept`` of a request stream, a bounded buffer put in first (still empty then)."""

        def bounded(stream: Stream, headers: Any, release_stream: Callable[[], Any]) -> None:
            stream_id = stream.id
            assert stream_id is not None
            stream.buffer = _BoundedBuffer(lambda size: stream.connection.ack(stream_id, size), self)
            accept(stream, headers, release_stream)

        return bounded


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
            reason = f"{message_type.__name__} does not decode: {type(error).__name__}: {error}"
            raise self.guard.refuse(BadRequest("decode", reason[:REASON_LENGTH])) from None


class _BoundedBuffer(Buffer):
    """A request stream's receive buffer that refuses a read beyond the message limit.

    grpclib reads a message's 5-byte prefix, then exactly as many bytes as it announces: a read over the
    limit is a message over it, refused before any of its body is taken.
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


class GuardedServer(PluginServer):
    """A PluginServer that admits, bounds and checks every request before it is decoded."""

    def __init__(self, handlers: Collection[Servable], rules: RequestRules, refusals: RefusalLog) -> None:
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

    def _set_up(self, protocol: H2Protocol) -> Callable[[BaseTransport], None]:
        guard = _ConnectionGuard(self._rules, self._refusals)
        handler = protocol.handler
        assert isinstance(handler, Handler)
        handler.mapping = {path: m._replace(func=guard.method(m.func)) for path, m in handler.mapping.items()}
        handler.codec = _CheckedCodec(guard)
        handler.accept = guard.accept(handler.accept)  # type: ignore[method-assign]

        def connected(transport: BaseTransport) -> None:
            guard.peer = peer_of(transport)

        return connected


class GuardedEndpoint(SocketEndpoint):
    """A SocketEndpoint whose every server is a GuardedServer under ``rules``, with one refusal log."""

    def __init__(self, handlers: Collection[Servable], path: Path, what: str, rules: RequestRules) -> None:
        super().__init__(handlers, path, what)
        self.rules = rules
        self.refusals = RefusalLog(socket=str(path))

    def _new_server(self) -> PluginServer:
        return GuardedServer(self.handlers, self.rules, self.refusals)
