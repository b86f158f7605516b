"""A health monitor over a fake node, without the kubelet: for fast, exact health tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from ascend_plugin.chip_calls import ChipCaller
from ascend_plugin.faults import FaultTable, builtin_table
from ascend_plugin.health import HealthMonitor, HealthPolicy
from ascend_plugin.registry import DeviceRegistry, DeviceState
from backends.base import ChipBackend, enumerate_chips
from backends.families import family_for
from backends.library import DeviceLibrary


@dataclass
class FakeClock:
    """A monotonic clock the test moves by hand."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Monitored:
    """A backend, its registry and the monitor keeping it, on a given library."""

    backend: ChipBackend
    registry: DeviceRegistry
    monitor: HealthMonitor
    clock: FakeClock = field(default_factory=FakeClock)

    def device(self, device_id: str) -> DeviceState:
        state = self.registry.get(device_id)
        assert state is not None, device_id
        return state


def monitored(
    library: DeviceLibrary,
    *,
    policy: HealthPolicy | None = None,
    table: FaultTable | None = None,
    timeout: float = 5.0,
) -> Monitored:
    """Discover the chips of an initialised ``library`` and build a monitor (call inside the event loop)."""
    found = enumerate_chips(library)
    backend = family_for(found[0].info)(library)
    registry = DeviceRegistry(
        backend.table.resource_name, [DeviceState(backend.device_id(chip), chip) for chip in found]
    )
    clock = FakeClock()
    monitor = HealthMonitor(
        backend,
        ChipCaller(timeout),
        registry,
        table=table or builtin_table(),
        policy=policy or HealthPolicy(),
        clock=clock,
    )
    return Monitored(backend, registry, monitor, clock)
