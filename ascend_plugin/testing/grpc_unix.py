"""A grpcio server on a unix socket, as the kubelet runs its own: the start and stop the stand-ins share.

A gRPC stack other than ours (grpcio, the C core), so the plugin is checked against code it did not write.
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
