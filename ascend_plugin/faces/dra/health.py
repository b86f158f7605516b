"""The device-health stream, ``/v1alpha1.DRAResourceHealth/NodeWatchResources``: every device, chip health.

With the kubelet's ``ResourceHealthStatus`` feature, the health of the devices
a pod holds shows in its status. The kubelet keeps the last report per device
and counts it as Unknown once it is older than the report's timeout (30 s when
a kubelet before 1.35 ignores ours), so the stream sends the complete device
list at once, again after every change of the inventory, and at least every
:data:`HEARTBEAT` seconds when nothing changes. It ends only when the plugin
stops, like ListAndWatch (see :mod:`ascend_plugin.grpc_sockets` for why).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Final

import anyio

from ascend_plugin.faces.dra.names import device_name
from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.kubelet_api.v1alpha1 import (
    DeviceHealth,
    DeviceIdentifier,
    DraResourceHealthBase,
    HealthStatus,
    NodeWatchResourcesRequest,
    NodeWatchResourcesResponse,
)
from ascend_plugin.streams import OpenStreams

HEARTBEAT: Final = 10.0  # seconds between reports when nothing changes
REPORT_TIMEOUT: Final = 30  # seconds the kubelet may trust a report (three heartbeats)
MAX_MESSAGE: Final = 1024


def _status(state: ChipState) -> HealthStatus:
    if not state.health.known or state.vnpus is None:
        return HealthStatus.UNKNOWN
    return HealthStatus.HEALTHY if state.healthy else HealthStatus.UNHEALTHY


def _whole(state: ChipState) -> list[str]:
    """A chip's device; none while static vNPUs split it (they are no devices of this driver)."""
    return [] if state.split else [device_name(state.phy_id)]


class DeviceHealthService(DraResourceHealthBase):
    """Streams the health of every chip of the pool."""

    def __init__(
        self,
        inventory: Inventory,
        pool: str,
        heartbeat: float = HEARTBEAT,
        clock: Callable[[], float] = time.time,
        devices_of: Callable[[ChipState], list[str]] | None = None,
    ) -> None:
        """``devices_of``: the devices a chip stands behind (default: the chip, unless split statically)."""
        self.inventory = inventory
        self.pool = pool
        self.devices_of = devices_of or _whole
        self.heartbeat = heartbeat
        self.clock = clock
        self.messages_sent = 0
        self.streams = OpenStreams()

    def snapshot(self) -> NodeWatchResourcesResponse:
        """Every chip with its health now."""
        now = int(self.clock())
        return NodeWatchResourcesResponse(
            devices=[
                DeviceHealth(
                    device=DeviceIdentifier(pool_name=self.pool, device_name=name),
                    health=_status(state),
                    last_updated_time=now,
                    health_check_timeout_seconds=REPORT_TIMEOUT,
                    message=state.reason[:MAX_MESSAGE],
                )
                for state in self.inventory.chips()
                for name in self.devices_of(state)
            ]
        )

    @property
    def open_streams(self) -> int:
        """Health streams open now."""
        return self.streams.count

    def notify(self) -> None:
        """The inventory changed: every open stream reports again."""
        self.streams.changed()

    def stop(self) -> None:
        """End every stream (the plugin is stopping)."""
        self.streams.stop()

    async def streams_ended(self) -> None:
        """Return once no stream is open."""
        await self.streams.ended()

    async def node_watch_resources(
        self, message: NodeWatchResourcesRequest
    ) -> AsyncIterator[NodeWatchResourcesResponse]:
        with self.streams.open() as sight:
            while not self.streams.stopping:
                changed = self.streams.next_change()
                version = self.inventory.version
                yield self.snapshot()
                self.messages_sent += 1
                sight.showed(version)
                with anyio.move_on_after(self.heartbeat):
                    await changed.wait()
