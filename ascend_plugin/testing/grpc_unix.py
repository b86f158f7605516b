"""A grpcio server on a unix socket, as the kubelet runs its own: started and stopped the same way.

The stand-ins play the kubelet on a gRPC stack other than ours (grpcio, the C
core), so what the plugin speaks is checked against an implementation it did
not write. Each of them serves one or more services on one socket; this is the
start and the stop they share.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from concurrent import futures
from pathlib import Path

import grpc


def serve_unix(socket: Path, handlers: Sequence[grpc.GenericRpcHandler], workers: int) -> grpc.Server:
    """Serve ``handlers`` on ``socket`` (its directory made if missing) with ``workers`` threads."""
    socket.parent.mkdir(parents=True, exist_ok=True)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    server.add_generic_rpc_handlers(tuple(handlers))
    server.add_insecure_port(f"unix:{socket}")
    server.start()
    return server


def stop_unix(server: grpc.Server | None, socket: Path) -> None:
    """Stop ``server`` at once (calls in flight are cancelled) and remove its socket."""
    if server is not None:
        server.stop(grace=None).wait()
    with contextlib.suppress(FileNotFoundError):
        socket.unlink()
