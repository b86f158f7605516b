"""DevicePluginFace: one endpoint and registrar per offered resource, following the offers; a resource
that disappears has its stream ended and its socket removed, so the kubelet drops its stale IDs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from ascend_plugin.dir_watch import DirectoryChanges
from ascend_plugin.faces.deviceplugin.registrar import KubeletRegistrar, PluginEndpoint
from ascend_plugin.faces.deviceplugin.service import DevicePluginService, ServiceStats
from ascend_plugin.faces.kubelet_counters import KubeletCounters
from ascend_plugin.handover.modes import Handover
from ascend_plugin.holdings.held import DeviceChooser, HeldChips
from ascend_plugin.offers.book import OfferBook
from ascend_plugin.resilience import supervise

log = logging.getLogger(__name__)

STREAM_END_WAIT = 2.0  # seconds to let the kubelet see a stream end before the socket goes


@dataclass(frozen=True)
class FaceSettings:
    directory: Path  # the kubelet's device-plugin directory
    main_resource: str  # the family's resource, whose socket name may be overridden
    socket_name: str | None  # override for the main resource's socket
    watch_interval: float  # seconds between looks at the directory where inotify cannot watch it
    preferred_allocation: bool = True


def socket_name_for(resource: str) -> str:
    """``huawei.com/Ascend310P-2c`` -> ``Ascend310P-2c.sock``."""
    return resource.rsplit("/", 1)[-1] + ".sock"


class ResourceServer:
    def __init__(self, resource: str, service: DevicePluginService, registrar: KubeletRegistrar) -> None:
        self.resource = resource
        self.service = service
        self.registrar = registrar
        self._scope = anyio.CancelScope()

    async def run(self) -> None:
        with self._scope:
            await supervise(f"kubelet registrar of {self.resource}", self.registrar.run)

    async def stop(self) -> None:
        """End the stream, stop registering, close the server and remove the socket."""
        self.service.streams.stop()
        with anyio.move_on_after(STREAM_END_WAIT):
            await self.service.streams.ended()
        self._scope.cancel()
        await self.registrar.endpoint.stop()


class DevicePluginFace:
    """Serves every offered resource to the kubelet."""

    def __init__(
        self,
        book: OfferBook,
        handover: Handover,
        settings: FaceSettings,
        chooser: DeviceChooser | None = None,
        held: HeldChips | None = None,
    ) -> None:
        self.book = book
        self.handover = handover
        self.settings = settings
        self.chooser = chooser  # who decides the devices of the resources it claims (Volcano mode)
        self.held = held  # told of the chips every Allocate hands over (before the kubelet lists them)
        self.stats = ServiceStats()
        self.servers: dict[str, ResourceServer] = {}
        self.registrations = 0
        self.changes = DirectoryChanges([settings.directory], settings.watch_interval)
        self._registered_listeners: list[Callable[[], None]] = []

    @property
    def registered(self) -> bool:
        return bool(self.servers) and all(server.registrar.registered for server in self.servers.values())

    @property
    def last_error(self) -> str:
        return next((s.registrar.last_error for s in self.servers.values() if s.registrar.last_error), "")

    def on_registered(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every successful registration of any resource."""
        self._registered_listeners.append(listener)

    def counters(self) -> KubeletCounters:
        stats = self.stats
        return KubeletCounters(
            stats.allocations, dict(stats.allocation_errors), stats.updates_sent, self.registrations
        )

    async def shown(self, version: int) -> None:
        """Return once every ListAndWatch stream has sent the offers of inventory ``version`` (a hot reset
        waits here, so the kubelet has its chips Unhealthy before the reset starts)."""
        for server in list(self.servers.values()):
            await server.service.streams.shown(version)

    def problems(self) -> list[str]:
        """The resources the kubelet does not have now, and why; empty while it has every one."""
        if not self.servers:
            return ["no resource is served yet"]
        return [
            f"{resource} not registered with the kubelet: {server.registrar.last_error or 'waiting for it'}"
            for resource, server in sorted(self.servers.items())
            if not server.registrar.registered
        ]

    async def run(self) -> None:
        """Follow the offers until the inventory closes, then stop every server."""
        self.changes.start()
        try:
            async with anyio.create_task_group() as group:
                if self.chooser is not None:
                    group.start_soon(self._follow_assignments, self.chooser, name="device plugin assignments")
                version = -1
                while not self.book.inventory.closed:
                    await self._follow(group)
                    version = await self.book.wait_for_change(version)
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self.stop()
            self.changes.close()

    async def _follow(self, group: TaskGroup) -> None:
        resources = self.book.resources()
        for resource in resources.keys() - self.servers.keys():
            server = self._server(resource)
            self.servers[resource] = server
            group.start_soon(server.run, name=f"device plugin {resource}")
            log.info(
                "offering %s (%d devices)", resource, len(resources[resource]), extra={"resource": resource}
            )
        for resource in self.servers.keys() - resources.keys():
            log.info("no device of %s is offered any more: stopping its server", resource)
            await self.servers.pop(resource).stop()
        for server in self.servers.values():
            server.service.streams.changed()

    async def _follow_assignments(self, chooser: DeviceChooser) -> None:
        """Every stream looks again when a kubelet ID comes to stand for another chip."""
        changes = chooser.assignments.changes
        version = changes.version
        while True:
            version = await changes.wait_for_change(version)
            for server in self.servers.values():
                server.service.streams.changed()

    def _server(self, resource: str) -> ResourceServer:
        settings = self.settings
        name = settings.socket_name if resource == settings.main_resource and settings.socket_name else None
        chosen = self.chooser is not None and self.chooser.decides(resource)
        service = DevicePluginService(
            resource,
            self.book,
            self.handover,
            self.stats,
            # The kubelet's pick does not matter when a scheduler chose the chips.
            preferred_allocation=settings.preferred_allocation and not chosen,
            chooser=self.chooser,
            held=self.held,
        )
        endpoint = PluginEndpoint(service, settings.directory, name or socket_name_for(resource))
        registrar = KubeletRegistrar(
            endpoint, service, resource, changes=self.changes, on_registered=self._registered
        )
        return ResourceServer(resource, service, registrar)

    def _registered(self) -> None:
        self.registrations += 1
        for listener in self._registered_listeners:
            listener()

    async def stop(self) -> None:
        """Stop every resource's server: each stream ends first, then the sockets go."""
        for server in self.servers.values():
            server.service.streams.stop()
        while self.servers:
            await self.servers.popitem()[1].stop()
