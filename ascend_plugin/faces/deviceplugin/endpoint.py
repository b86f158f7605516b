"""Our gRPC server on a unix socket in the kubelet's device-plugin directory.

The kubelet deletes every socket in that directory when it restarts, so the
endpoint can be re-created on a new socket while the process lives on. asyncio
does not remove a unix socket on close; the endpoint removes its own (and only
its own: a socket someone else put at the same path is left alone).

A socket that cannot be created is a :class:`SocketUnavailable` whose message
names the cause (the directory's mode and owner against our uid, a read-only
file system, a file in the way), for the registrar to log and retry.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import anyio
from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.exceptions import ProtocolError, StreamTerminatedError

from ascend_plugin.faces.deviceplugin.grpc_server import PluginServer
from ascend_plugin.faces.deviceplugin.path_facts import create_failure
from ascend_plugin.faces.deviceplugin.refusal_log import RefusalLog
from ascend_plugin.faces.deviceplugin.service import DevicePluginService
from ascend_plugin.kubelet_api.v1beta1 import DevicePluginStub, Empty

log = logging.getLogger(__name__)

FileStamp = tuple[int, int, int]
# Our own server answers a local call in milliseconds; a second means it does not.
ANSWER_TIMEOUT = 1.0


class SocketUnavailable(Exception):
    """Our socket cannot be created; the message names the cause."""


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
        self.refusals = RefusalLog()
        self._server: PluginServer | None = None
        self._stamp: FileStamp | None = None

    @property
    def serving(self) -> bool:
        """True while our socket file is in place."""
        return self._server is not None and self._stamp is not None and file_stamp(self.path) == self._stamp

    async def answers(self) -> bool:
        """True when a gRPC call on our socket gets our options back, as the kubelet's dial-back will."""
        channel = Channel(path=str(self.path))
        try:
            with anyio.fail_after(ANSWER_TIMEOUT):
                await DevicePluginStub(channel).get_device_plugin_options(Empty())
        except (GRPCError, StreamTerminatedError, ProtocolError, OSError, TimeoutError):
            return False
        finally:
            channel.close()
        return True

    async def start(self) -> None:
        """Serve on a fresh socket; the previous server (if any) is closed afterwards.

        Raises SocketUnavailable, naming the cause, when the socket cannot be created.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            failed = Path(error.filename) if error.filename else self.path.parent
            raise SocketUnavailable(create_failure(failed, error)) from error
        server = PluginServer([self.service], self.service.request_limits, self.refusals)
        try:
            if self.path.is_socket():
                self.path.unlink()  # stale socket of an earlier run (the instance lock says it is not live)
            # One loop iteration, shielded: cancelled inside it, asyncio would leave a listening
            # socket that nobody owns or closes.
            with anyio.CancelScope(shield=True):
                await server.start(path=str(self.path))
        except OSError as error:
            raise SocketUnavailable(create_failure(self.path, error)) from error
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
