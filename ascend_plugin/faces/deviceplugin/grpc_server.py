"""The gRPC server of a device-plugin socket: grpclib's, closing what it accepted when it closes.

grpclib's ``Server.close()`` cancels the request handlers but leaves the
HTTP/2 connections open: the kubelet's end of a stream then hangs instead of
ending, and the server's socket objects linger until garbage collection. A
plugin that re-creates its socket after every kubelet restart must not leave a
connection behind each time, so this server remembers the connections it
accepted and closes them with itself.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection

from grpclib._typing import IServable
from grpclib.protocol import H2Protocol
from grpclib.server import Server


class PluginServer(Server):
    """A grpclib Server whose ``close()`` also closes every connection it accepted."""

    def __init__(self, handlers: Collection[IServable]) -> None:
        super().__init__(handlers)
        self._protocols: weakref.WeakSet[H2Protocol] = weakref.WeakSet()

    def _protocol_factory(self) -> H2Protocol:
        protocol = super()._protocol_factory()
        self._protocols.add(protocol)
        return protocol

    def close(self) -> None:
        super().close()
        for protocol in list(self._protocols):
            processor = getattr(protocol, "processor", None)  # absent until the connection was made
            if processor is not None:
                processor.close("the plugin closed its server")
