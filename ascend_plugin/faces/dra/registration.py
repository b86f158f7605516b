"""The plugin watcher's registration service, on ``<registry dir>/<driver>-reg.sock``.

The kubelet finds DRA drivers by the sockets in its plugin registry directory
(at start, and whenever one appears), asks each ``GetInfo``, and tells it with
``NotifyRegistrationStatus`` whether it took it. Nothing else is needed from
the driver: the socket stays in place (the face puts it back if it goes), and
a restarted kubelet scans the directory and asks again.

The answer lists the driver's gRPC services in the kubelet's
``<package>.<service>`` form, v1 first: the kubelet takes the first it knows.
A refusal (an old kubelet, a name clash) is logged as an error with the
kubelet's own reason and makes the driver not ready.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from ascend_plugin.changes import Changes
from ascend_plugin.faces.dra.names import PLUGIN_TYPE, SUPPORTED_SERVICES
from ascend_plugin.kubelet_api.pluginregistration import (
    InfoRequest,
    PluginInfo,
    RegistrationBase,
    RegistrationStatus,
    RegistrationStatusResponse,
)

log = logging.getLogger(__name__)


class RegistrationService(RegistrationBase):
    """What the driver tells the plugin watcher, and what the kubelet said back."""

    def __init__(self, driver: str, endpoint: Path) -> None:
        self.driver = driver
        self.endpoint = endpoint
        self.registered = False
        self.registrations = 0
        self.last_error = ""
        self.changes = Changes()
        self._registered_listeners: list[Callable[[], None]] = []

    async def wait_registered(self) -> None:
        """Return once the kubelet has confirmed a registration (at once if it has)."""
        while not self.registered:
            await self.changes.wait_for_change(self.changes.version)

    def on_registered(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every registration the kubelet confirms."""
        self._registered_listeners.append(listener)

    def forget(self) -> None:
        """Our registration socket is gone: the kubelet's plugin watcher dropped the driver with it."""
        self.registered = False

    async def get_info(self, message: InfoRequest) -> PluginInfo:
        return PluginInfo(
            type=PLUGIN_TYPE,
            name=self.driver,
            endpoint=str(self.endpoint.absolute()),
            supported_versions=list(SUPPORTED_SERVICES),
        )

    async def notify_registration_status(self, message: RegistrationStatus) -> RegistrationStatusResponse:
        if message.plugin_registered:
            self.registered = True
            self.registrations += 1
            self.last_error = ""
            log.info(
                "the kubelet registered DRA driver %s", self.driver, extra={"endpoint": str(self.endpoint)}
            )
            self.changes.bump()
            for listener in self._registered_listeners:
                listener()
        else:
            self.registered = False
            self.last_error = message.error or "(the kubelet gave no reason)"
            log.error(
                "the kubelet refused to register DRA driver %s: %s",
                self.driver,
                self.last_error,
                extra={"error": self.last_error},
            )
        return RegistrationStatusResponse()
