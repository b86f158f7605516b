"""Our gRPC server on a unix socket in the kubelet's device-plugin directory, answering only the kubelet.

The kubelet deletes every socket there when it restarts: the endpoint is served
again on a new socket (:class:`~ascend_plugin.grpc_sockets.SocketEndpoint`),
guarded by the service's request rules (:mod:`ascend_plugin.grpc_guard`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import anyio
from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.exceptions import ProtocolError, StreamTerminatedError

from ascend_plugin.faces.deviceplugin.service import DevicePluginService
from ascend_plugin.grpc_guard.peers import OwnerOf
from ascend_plugin.grpc_guard.server import GuardedEndpoint
from ascend_plugin.kubelet_api.v1beta1 import DevicePluginStub, Empty

# Our own server answers a local call in milliseconds; a second means it does not.
ANSWER_TIMEOUT = 1.0


class PluginEndpoint(GuardedEndpoint):
    """Serves one resource's DevicePlugin service on ``<directory>/<socket_name>``."""

    def __init__(self, service: DevicePluginService, directory: Path, socket_name: str) -> None:
        # Only the kubelet (the owner of its device-plugin directory) calls it, and the plugin itself.
        kubelet = OwnerOf(directory, "the kubelet", admits_itself=True)
        rules = dataclasses.replace(service.request_rules(), admit=kubelet)
        super().__init__([service], directory / socket_name, "the device plugin API", rules)
        self.service = service
        self.socket_name = socket_name

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
