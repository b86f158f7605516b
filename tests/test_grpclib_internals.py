"""The grpclib internals the guarded server changes on each connection are still where it reaches them.

grpclib offers no public hook for a connection's peer, its receive buffer or its codec, so
``grpc_sockets.PluginServer`` and ``grpc_guard/server.py`` change the objects grpclib builds for each
accepted connection. These tests fail the day a grpclib release moves one of them, before the guard
silently stops guarding; pyproject.toml allows only the grpclib releases they passed on.
"""

from __future__ import annotations

import inspect
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from grpclib.protocol import Buffer, Connection, EventsProcessor, H2Protocol, Stream
from grpclib.server import Handler, Server
from packaging.requirements import Requirement

from ascend_plugin.grpc_sockets import PluginServer

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]


def test_the_installed_grpclib_is_a_release_the_pin_allows_and_the_pin_is_tight() -> None:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (pin,) = (Requirement(text) for text in dependencies if text.startswith("grpclib"))
    assert version("grpclib") in pin.specifier
    assert "0.4.10" not in pin.specifier  # a release nobody checked these internals on


def test_each_connection_is_built_by_the_server_s_protocol_factory() -> None:
    assert "self._protocol_factory" in inspect.getsource(Server.start)
    assert parameters(Server._protocol_factory) == ["self"]
    assert "_protocol_factory" in vars(PluginServer)


@pytest.mark.anyio
async def test_a_connection_s_handler_has_the_methods_codec_and_accept_the_guard_replaces() -> None:
    protocol = Server([])._protocol_factory()
    assert isinstance(protocol, H2Protocol)
    handler = protocol.handler
    assert isinstance(handler, Handler)
    assert isinstance(handler.mapping, dict)
    assert handler.codec is not None
    assert parameters(handler.accept) == ["stream", "headers", "release_stream"]
    assert "accept" in vars(Handler)  # a method of the class: the instance attribute set per connection wins


def test_the_events_processor_gives_accept_the_stream_before_any_of_its_data() -> None:
    source = inspect.getsource(EventsProcessor.process_request_received)
    assert re.search(r"create_stream\(.*\)[\s\S]*self\.handler\.accept\(", source)
    assert "processor" in inspect.getsource(H2Protocol.connection_made)
    assert parameters(H2Protocol.connection_made) == ["self", "transport"]


def test_a_stream_reads_its_messages_through_its_buffer_acked_on_its_connection() -> None:
    assert "self.buffer = Buffer(partial(connection.ack, self.id))" in inspect.getsource(Stream.init_stream)
    assert "self.buffer.read(size)" in inspect.getsource(Stream.recv_data)
    assert parameters(Buffer) == ["ack_callback"]
    assert parameters(Buffer.read) == ["self", "size"]
    assert parameters(Connection.ack) == ["self", "stream_id", "size"]
