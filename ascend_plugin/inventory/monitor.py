"""HealthMonitor: keep a true verdict on every chip, from polls and fault events.

Every chip is watched by its own task: it reads the chip's health value and
fault codes on the chip's own call lane (:mod:`ascend_plugin.chip_calls`), every
``health_interval`` seconds or sooner when something happens, and records the
verdict in the inventory. A call that hangs on one chip makes that chip
unhealthy within the call timeout and holds up nobody else.

On families whose driver delivers fault events (910), the monitor subscribes:
an event is applied on the loop the moment it arrives, without waiting for a
poll or a driver call, and the chip's next poll follows at once. Events and
polls are combined by :class:`~ascend_plugin.inventory.fault_memory.FaultMemory`
and :func:`~ascend_plugin.inventory.verdict.judge`; flapping chips are held by
:class:`~ascend_plugin.inventory.damping.Damping`.

Where the node reads static vNPUs, each poll also reads the chip's vNPUs on the
same lane (one query for the list, one per vNPU to describe it, so a vNPU
re-created under its old id with another template is seen too). A vNPU an
operator creates or destroys therefore reaches the offers within one poll interval.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import anyio

from ascend_plugin.chip_calls import ChipCallError, ChipCalls, LaneKey, StuckCall
from ascend_plugin.faults import FaultTable, format_code
from ascend_plugin.inventory.damping import Damping, DampingPolicy, Verdict
from ascend_plugin.inventory.fault_memory import FaultMemory
from ascend_plugin.inventory.inventory import ChipHealth, ChipState, Inventory
from ascend_plugin.inventory.verdict import Observation, judge
from ascend_plugin.settings import Settings
from backends.backend import SUBSCRIBE, ChipBackend
from backends.chips import Chip, HealthReading
from backends.errors import ChipError, SymbolMissing
from backends.library import FaultEvent, VdevInfo

log = logging.getLogger(__name__)

_ASSERTIONS = {0: "recovered", 1: "raised", 2: "one-off"}


@dataclass(frozen=True)
class HealthPolicy:
    """The knobs of the health decision (from settings, reloadable)."""

    interval: float = 1.0
    failure_threshold: int = 3
    damping: DampingPolicy = field(default_factory=DampingPolicy)


def health_policy(settings: Settings) -> HealthPolicy:
    """The health knobs of the settings."""
    return HealthPolicy(
        interval=settings.health_interval,
        failure_threshold=settings.health_failure_threshold,
        damping=DampingPolicy(
            settings.health_flap_threshold, settings.health_flap_window, settings.health_flap_hold
        ),
    )


@dataclass
class _Watch:
    """What the monitor remembers of one chip between looks."""

    chip: Chip
    damping: Damping
    memory: FaultMemory = field(default_factory=FaultMemory)
    reading: HealthReading | None = None
    failures: int = 0
    error: str = ""
    wake: anyio.Event = field(default_factory=anyio.Event)
    vnpu_error: str = ""  # the last vNPU read's failure, so a repeat is not logged again


class HealthMonitor:
    """Keeps the inventory's verdict on every chip of ``backend`` true."""

    def __init__(
        self,
        backend: ChipBackend,
        calls: ChipCalls,
        inventory: Inventory,
        *,
        policy: Callable[[], HealthPolicy],
        fault_table: Callable[[], FaultTable],
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.backend = backend
        self.calls = calls
        self.inventory = inventory
        self.policy = policy
        self.fault_table = fault_table
        self.clock = clock
        self.subscribed = False
        self._watches = {state.phy_id: _Watch(state.chip, Damping(wall_clock)) for state in inventory.chips()}
        self._severities: dict[int, int] = {}  # fault code -> last severity an event gave it

    # -- running -----------------------------------------------------------------------

    async def poll_all(self) -> None:
        """Look at every chip once, side by side; returns within about one call timeout."""
        async with anyio.create_task_group() as group:
            for watch in self._watches.values():
                group.start_soon(self._poll, watch)

    async def run(self) -> None:
        """Subscribe where possible, then watch every chip until cancelled."""
        stop_listening = self.calls.on_lane_change(self._lane_changed)
        try:
            await self.subscribe()
            async with anyio.create_task_group() as group:
                for watch in self._watches.values():
                    group.start_soon(self._watch, watch, name=f"health of chip {watch.chip.phy_id}")
        finally:
            stop_listening()

    def wake(self) -> None:
        """Look at every chip now (a config change)."""
        for watch in self._watches.values():
            watch.wake.set()

    async def _watch(self, watch: _Watch) -> None:
        while True:
            with anyio.move_on_after(self._next_look(watch)):
                await watch.wake.wait()
            watch.wake = anyio.Event()
            await self._poll(watch)

    def _next_look(self, watch: _Watch) -> float:
        """Seconds until the chip's next poll: the interval, or sooner for a timed change."""
        now = self.clock()
        due = [now + self.policy().interval]
        if (expiry := watch.memory.next_expiry()) is not None:
            due.append(expiry)
        if (release := watch.damping.release_due(now, self.policy().damping)) is not None:
            due.append(release)
        if (stuck := self.calls.stuck(watch.chip.phy_id)) is not None:
            due.append(stuck.retry_at)
        return max(min(due) - now, 0.0)

    # -- one look ----------------------------------------------------------------------

    async def _poll(self, watch: _Watch) -> None:
        chip = watch.chip
        started = self.clock()
        try:
            reading = await self.calls.call(chip.phy_id, "read_health", self.backend.read_health, chip)
        except ChipCallError:
            pass  # a hung or stuck lane: the verdict reads it from the lanes
        except ChipError as error:
            watch.failures += 1
            watch.error = str(error)
            log.warning(
                "health query of %s failed (%d in a row): %s",
                chip.label,
                watch.failures,
                error,
                extra={"chip": chip.phy_id, "error": type(error).__name__},
            )
        else:
            watch.reading, watch.failures, watch.error = reading, 0, ""
            watch.memory.reconcile(reading, started, self.fault_table())
            if self.inventory.facts.reads_vnpus and not reading.dropped:
                await self._read_vnpus(watch)
        self._decide(watch)

    async def _read_vnpus(self, watch: _Watch) -> None:
        """Read the chip's vNPUs on its lane and record them; a failed read keeps what was known."""
        chip = watch.chip
        state = self.inventory.get(chip.phy_id)
        if state is None:
            return
        try:
            vnpus = await self.calls.call(chip.phy_id, "vnpus", self.backend.vnpus, chip)
        except ChipCallError:
            return  # a hung or stuck lane: the verdict says so
        except ChipError as error:
            if str(error) != watch.vnpu_error:
                log.warning(
                    "cannot read the vNPUs of %s: %s; keeping what was known (%s)",
                    chip.label,
                    error,
                    "nothing yet: the chip is not offered healthy" if state.vnpus is None else "as before",
                    extra={"chip": chip.phy_id, "error": str(error)},
                )
            watch.vnpu_error = str(error)
            return
        watch.vnpu_error = ""
        if self.inventory.set_vnpus(chip.phy_id, tuple(vnpus)):
            _log_vnpu_change(chip, state.vnpus, tuple(vnpus))

    def _decide(self, watch: _Watch) -> None:
        """Judge the chip from what is known now and record the verdict."""
        now = self.clock()
        policy = self.policy()
        watch.memory.expire(now)
        observation = Observation(
            watch.reading,
            watch.failures,
            watch.error,
            self.calls.stuck(watch.chip.phy_id),
            watch.memory.held(),
        )
        verdict = judge(observation, self.fault_table(), self._severities, policy.failure_threshold, now)
        verdict = watch.damping.apply(verdict, now, policy.damping)
        old = self.inventory.get(watch.chip.phy_id)
        health = ChipHealth(True, verdict.healthy, verdict.reason, verdict.faults)
        if self.inventory.set_health(watch.chip.phy_id, health) and old is not None:
            self._log_transition(self.inventory.table.chip_id(old.phy_id), old, verdict)

    # -- fault events ------------------------------------------------------------------

    async def subscribe(self) -> None:
        """Subscribe to fault events where the family and the driver support it."""
        if self.subscribed or SUBSCRIBE in self.backend.missing:
            return
        loop = asyncio.get_running_loop()

        def handler(event: FaultEvent) -> None:  # runs on a library thread
            loop.call_soon_threadsafe(self.on_fault_event, event)

        try:
            subscribed = await self.calls.node(
                "dcmi_subscribe_fault_event", self.backend.subscribe_faults, handler
            )
        except SymbolMissing as error:
            log.warning("%s: fault events unavailable, health comes from polling alone", error)
            return
        except (ChipError, ChipCallError) as error:
            log.info("fault events unavailable (%s); polling only", error)
            return
        if not subscribed:
            return  # the family's driver sends none: its chips are polled alone
        self.subscribed = True
        log.info("subscribed to fault events; polling stays as the fallback")

    def on_fault_event(self, event: FaultEvent) -> None:
        """A fault event arrived (on the loop thread): apply it now, then poll the chip."""
        self._severities[event.code] = event.severity
        state = self.inventory.by_logic_id(event.logic_id)
        log.info(
            "fault event %s on %s (severity %d, %s)",
            format_code(event.code),
            self.inventory.table.chip_id(state.phy_id) if state else f"logic id {event.logic_id}",
            event.severity,
            _ASSERTIONS.get(event.assertion, f"assertion {event.assertion}"),
            extra={"code": format_code(event.code), "logic_id": event.logic_id},
        )
        if state is None:
            return
        watch = self._watches[state.phy_id]
        watch.memory.record(event, self.clock(), self.fault_table())
        self._decide(watch)
        watch.wake.set()

    def _lane_changed(self, lane: LaneKey, stuck: StuckCall | None) -> None:
        watch = self._watches.get(lane) if lane is not None else None
        if watch is None:
            return
        if stuck is not None:
            self._decide(watch)  # marked unhealthy now, not at the next poll
        watch.wake.set()

    @staticmethod
    def _log_transition(name: str, old: ChipState, verdict: Verdict) -> None:
        if verdict.healthy == old.healthy and old.health.known:
            return
        extra = {
            "device": name,
            "chip": old.chip.label,
            "codes": [format_code(fault.code) for fault in verdict.faults],
            "levels": [fault.level.name for fault in verdict.faults],
            "reason": verdict.reason,
        }
        if verdict.healthy:
            log.info("%s is healthy%s", name, " again" if old.health.known else "", extra=extra)
        else:
            log.warning("%s is unhealthy: %s", name, verdict.reason, extra=extra)


def _named(vnpus: Iterable[VdevInfo]) -> str:
    return ", ".join(f"{vnpu.vdev_id} ({vnpu.template})" for vnpu in vnpus) or "none"


def _log_vnpu_change(chip: Chip, old: tuple[VdevInfo, ...] | None, new: tuple[VdevInfo, ...]) -> None:
    """One line per change of a chip's split: what it carries now, what appeared, what went."""
    extra = {"chip": chip.phy_id, "vnpus": [vnpu.vdev_id for vnpu in new]}
    if old is None:
        if new:
            log.info("%s carries vNPUs %s", chip.label, _named(new), extra=extra)
        return
    before = {(vnpu.vdev_id, vnpu.template) for vnpu in old}
    after = {(vnpu.vdev_id, vnpu.template) for vnpu in new}
    appeared = [vnpu for vnpu in new if (vnpu.vdev_id, vnpu.template) not in before]
    gone = [vnpu for vnpu in old if (vnpu.vdev_id, vnpu.template) not in after]
    if not appeared and not gone:
        return  # only a figure such as in_use moved
    log.info(
        "%s: vNPUs changed: appeared %s; gone %s; now %s",
        chip.label,
        _named(appeared),
        _named(gone),
        _named(new),
        extra=extra,
    )
