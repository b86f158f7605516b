"""A health monitor over a fake node, without the kubelet: for fast, exact health tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from node_harness import backend_of, inventory_of

from ascend_plugin.chip_calls import ChipCalls
from ascend_plugin.faults import FaultTable, builtin_table
from ascend_plugin.inventory.inventory import ChipHealth, Inventory
from ascend_plugin.inventory.monitor import EVENT_LOG_INTERVAL, HealthMonitor, HealthPolicy
from backends.backend import ChipBackend
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
    """A backend, its inventory and the monitor keeping it, on a given library."""

    backend: ChipBackend
    inventory: Inventory
    monitor: HealthMonitor
    calls: ChipCalls
    clock: FakeClock = field(default_factory=FakeClock)

    def device(self, device_id: str) -> ChipHealth:
        """The verdict on the chip a whole-chip device ID (``Ascend310P-0``) names."""
        state = self.inventory.get(int(device_id.rsplit("-", 1)[1]))
        assert state is not None, device_id
        return state.health


@contextmanager
def monitored(
    library: DeviceLibrary,
    *,
    policy: HealthPolicy | None = None,
    table: FaultTable | None = None,
    timeout: float = 5.0,
    event_log_interval: float = EVENT_LOG_INTERVAL,
) -> Iterator[Monitored]:
    """A monitor over the chips of an initialised ``library`` (enter inside the event loop).

    The monitor's clock is moved by hand; the call timeout and the fault-event
    log's interval run on real time. The
    call threads end with the block.
    """
    inventory = inventory_of(library, healthy=False)
    backend = backend_of(library)
    calls = ChipCalls(timeout)
    clock = FakeClock()
    chosen_policy = policy or HealthPolicy()
    chosen_table = table or builtin_table()
    monitor = HealthMonitor(
        backend,
        calls,
        inventory,
        policy=lambda: chosen_policy,
        fault_table=lambda: chosen_table,
        clock=clock,
        event_log_interval=event_log_interval,
    )
    try:
        yield Monitored(backend, inventory, monitor, calls, clock)
    finally:
        calls.shutdown()
