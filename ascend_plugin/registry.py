"""DeviceRegistry: the one source of truth about the node's devices.

Health monitoring writes here; ListAndWatch streams, Allocate, the Kubernetes
publishers and the metrics read from here. Every change bumps a version
number and wakes whoever waits for one, and only a real change does: writing
the same state again is a no-op, so no stream sends a duplicate update.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import anyio

from ascend_plugin.faults import Fault, FaultLevel, format_code
from backends.base import Chip

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeviceState:
    """One device as the plugin currently sees it."""

    id: str  # the kubelet's device ID, e.g. Ascend310-0
    chip: Chip
    healthy: bool = True
    reason: str = ""  # why it is unhealthy; empty when healthy
    faults: tuple[Fault, ...] = ()  # current faults, most severe first
    numa_node: int | None = None

    @property
    def worst_level(self) -> FaultLevel:
        """The most severe current fault level (NormalNPU without faults)."""
        return self.faults[0].level if self.faults else FaultLevel.NormalNPU

    @property
    def codes(self) -> list[str]:
        """Current fault codes as hex strings."""
        return [format_code(fault.code) for fault in self.faults]


Transition = Callable[[DeviceState, DeviceState], None]


class DeviceRegistry:
    """Devices by ID, with a version number and change notification."""

    def __init__(self, resource_name: str, devices: Iterable[DeviceState] = ()) -> None:
        self.resource_name = resource_name
        self._devices = {device.id: device for device in devices}
        self._version = 0
        self._changed = anyio.Event()
        self._closed = False
        self._transition_listeners: list[Transition] = []

    @property
    def version(self) -> int:
        """Increases by one on every change."""
        return self._version

    @property
    def closed(self) -> bool:
        """True once the plugin is shutting down; waiters return at once."""
        return self._closed

    def devices(self) -> list[DeviceState]:
        """Every device, ordered by physical id."""
        return sorted(self._devices.values(), key=lambda device: device.chip.phy_id)

    def get(self, device_id: str) -> DeviceState | None:
        """The device with this ID, if the node has it."""
        return self._devices.get(device_id)

    def on_transition(self, listener: Transition) -> Callable[[], None]:
        """Call ``listener(old, new)`` whenever a device's health flips; return the way to stop it.

        Parts that subscribe can be restarted by their supervisor, so each must
        be able to take its listener back rather than pile up duplicates.
        """
        self._transition_listeners.append(listener)
        return lambda: self._transition_listeners.remove(listener)

    def update(self, device_id: str, **changes: object) -> bool:
        """Change fields of one device; return True if anything changed."""
        old = self._devices[device_id]
        new = dataclasses.replace(old, **changes)  # type: ignore[arg-type]
        if new == old:
            return False
        self._devices[device_id] = new
        if new.healthy != old.healthy:
            for listener in self._transition_listeners:
                listener(old, new)
        self._bump()
        return True

    def close(self) -> None:
        """Wake every waiter for good: the plugin is stopping."""
        self._closed = True
        self._bump()

    async def wait_for_change(self, seen_version: int) -> int:
        """Return the current version once it differs from ``seen_version`` (or on close)."""
        while self._version == seen_version and not self._closed:
            await self._changed.wait()
        return self._version

    def _bump(self) -> None:
        self._version += 1
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
