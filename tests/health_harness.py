"""A health monitor over a fake node, without the kubelet: for fast, exact health tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from node_harness import backend_of, inventory_of

from ascend_plugin.chip_calls import ChipCalls
from ascend_plugin.fault_policy.config import BaseConfig, base_config
from ascend_plugin.fault_policy.policy import FaultSources
from ascend_plugin.holdings.held import HeldChips
from ascend_plugin.holdings.pod_resources import PodResourcesClient
from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.inventory.monitor import EVENT_LOG_INTERVAL, HealthMonitor, HealthPolicy
from ascend_plugin.inventory.verdict import Verdict
from backends.backend import ChipBackend
from backends.library import DeviceLibrary

WALL_START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the fault policy's clock when the monotonic one reads 0


@dataclass
class FakeClock:
    """A monotonic clock the test moves by hand; :meth:`wall` moves with it (the fault policy's)."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now

    def wall(self) -> float:
        """Unix seconds, moved with the monotonic time."""
        return WALL_START + self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Monitored:
    """A backend, its inventory and the monitor keeping it, on a given library."""

    backend: ChipBackend
    inventory: Inventory
    monitor: HealthMonitor
    calls: ChipCalls
    faults: FaultSources
    held: HeldChips
    clock: FakeClock = field(default_factory=FakeClock)

    def device(self, device_id: str) -> Verdict:
        """The verdict on the chip a whole-chip device ID (``Ascend310P-0``) names."""
        state = self.inventory.get(int(device_id.rsplit("-", 1)[1]))
        assert state is not None, device_id
        return state.health


def no_kubelet() -> HeldChips:
    """Held chips that only what a test tells them fills: their kubelet is never asked."""
    return HeldChips(PodResourcesClient(Path("/nonexistent/pod-resources/kubelet.sock")))


@contextmanager
def monitored(
    library: DeviceLibrary,
    *,
    policy: HealthPolicy | None = None,
    base: BaseConfig | None = None,
    timeout: float = 5.0,
    event_log_interval: float = EVENT_LOG_INTERVAL,
) -> Iterator[Monitored]:
    """A monitor over the chips of an initialised ``library`` (enter inside the event loop).

    The monitor's clock and the fault policy's (on the configuration ``base``,
    by default the built-in files) are moved by hand, together; the call
    timeout and the fault-event log's interval run on real time. Which chips
    pods hold is ``held``, known and empty to begin with. The call threads end
    with the block.
    """
    inventory = inventory_of(library, healthy=False)
    backend = backend_of(library)
    calls = ChipCalls(timeout)
    clock = FakeClock()
    chosen_policy = policy or HealthPolicy()
    faults = FaultSources(base or base_config(None), clock.wall)
    held = no_kubelet()
    held.also_held(frozenset())
    monitor = HealthMonitor(
        backend,
        calls,
        inventory,
        policy=lambda: chosen_policy,
        faults=faults.policy,
        held=held,
        clock=clock,
        wall_clock=clock.wall,
        event_log_interval=event_log_interval,
    )
    try:
        yield Monitored(backend, inventory, monitor, calls, faults, held, clock)
    finally:
        calls.shutdown()


@asynccontextmanager
async def watching(watched: Monitored) -> AsyncIterator[None]:
    """The monitor's own loop for the block: its polls, fault events, RoCE link reads, holdings.

    As the plugin wires it, a change of the fault policy (a new configuration,
    a release) wakes the monitor.
    """
    stop = watched.faults.policy.on_change(watched.monitor.wake)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(watched.monitor.run)
            yield
            group.cancel_scope.cancel()
    finally:
        stop()
