"""Our gRPC server on a unix socket in the kubelet's device-plugin directory.

The kubelet deletes every socket in that directory when it restarts, so the
endpoint can be re-created on a new socket while the process lives on
(:class:`~ascend_plugin.grpc_sockets.SocketEndpoint` does the serving and the
clean-up; this names the socket for the registrar).
"""

from __future__ import annotations

from pathlib import Path

from ascend_plugin.faces.deviceplugin.service import DevicePluginService
from ascend_plugin.grpc_sockets import SocketEndpoint


class PluginEndpoint(SocketEndpoint):
    """Serves one resource's DevicePlugin service on ``<directory>/<socket_name>``."""

    def __init__(self, service: DevicePluginService, directory: Path, socket_name: str) -> None:
        super().__init__([service], directory / socket_name, "the device plugin API")
        self.service = service
        self.socket_name = socket_name
