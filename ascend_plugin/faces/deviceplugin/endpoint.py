"""Our gRPC server on a unix socket in the kubelet's device-plugin directory.

The kubelet deletes every socket in that directory when it restarts, so the
endpoint can be re-created on a new socket while the process lives on. asyncio
does not remove a unix socket on close; the endpoint removes its own (and only
its own: a socket someone else put at the same path is left alone).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import anyio

from ascend_plugin.faces.deviceplugin.grpc_server import PluginServer
from ascend_plugin.faces.deviceplugin.service import DevicePluginService

log = logging.getLogger(__name__)

FileStamp = tuple[int, int, int]


def file_stamp(path: Path) -> FileStamp | None:
    """(inode, ctime, mtime) of ``path``, or None when it does not exist.

    The inode alone is not enough: a re-created socket often gets the inode
    number its predecessor just freed.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_ctime_ns, st.st_mtime_ns)


class PluginEndpoint:
    """Starts, re-creates and stops the DevicePlugin server on ``<directory>/<socket_name>``."""

    def __init__(self, service: DevicePluginService, directory: Path, socket_name: str) -> None:
        self.service = service
        self.path = directory / socket_name
        self.socket_name = socket_name
        self._server: PluginServer | None = None
        self._stamp: FileStamp | None = None

    @property
    def serving(self) -> bool:
        """True while our socket file is in place."""
        return self._server is not None and self._stamp is not None and file_stamp(self.path) == self._stamp

    async def start(self) -> None:
        """Serve on a fresh socket; the previous server (if any) is closed afterwards."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_socket():
            self.path.unlink()  # stale socket of an earlier run
        server = PluginServer([self.service])
        await server.start(path=str(self.path))
        previous, self._server = self._server, server
        self._stamp = file_stamp(self.path)
        log.info("serving the device plugin API", extra={"socket": str(self.path)})
        if previous is not None:
            await self._close(previous)

    async def stop(self) -> None:
        """Close the server and remove our socket."""
        if self._server is not None:
            await self._close(self._server)
            self._server = None
        if self._stamp is not None and file_stamp(self.path) == self._stamp:
            self.path.unlink(missing_ok=True)
        self._stamp = None

    @staticmethod
    async def _close(server: PluginServer) -> None:
        server.close()
        with anyio.move_on_after(2):
            await server.wait_closed()
