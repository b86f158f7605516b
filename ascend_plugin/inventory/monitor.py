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
:class:`~ascend_plugin.inventory.damping.Damping`. A chip whose events keep
coming has them applied at most ``EVENT_RATE`` times a second (after a burst of
``EVENT_BURST``), each time all that came meanwhile, coalesced
(:mod:`~ascend_plugin.inventory.fault_events`), and logged once per
``event_log_interval`` (:mod:`~ascend_plugin.inventory.event_log`): however fast
the driver sends, the monitor's memory, work and log stay bounded.

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
from ascend_plugin.inventory.event_log import FaultEventLog, Source
from ascend_plugin.inventory.fault_events import Arrival, Batch, ChipBurst, EventInbox, Pace
from ascend_plugin.inventory.fault_memory import FaultMemory
from ascend_plugin.inventory.inventory import ChipHealth, ChipState, Inventory
from ascend_plugin.inventory.verdict import Observation, judge
from ascend_plugin.settings import Settings
from backends.backend import SUBSCRIBE, ChipBackend
from backends.chips import Chip, HealthReading
from backends.errors import ChipError, SymbolMissing
from backends.library import VdevInfo

log = logging.getLogger(__name__)

EVENT_RATE = 10.0  # times a second a chip's events are applied while they keep coming
EVENT_BURST = 5  # ... after this many applied at once
EVENT_LOG_INTERVAL = 10.0  # seconds between two fault-event lines of one chip while its events keep coming
MAX_SEVERITIES = 4096  # fault codes whose last event severity is remembered (the oldest is forgotten)
STRAYS = Source("chips this node does not have")


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
    source: Source  # how fault-event lines name it
    memory: FaultMemory = field(default_factory=FaultMemory)
    reading: HealthReading | None = None
    failures: int = 0
    error: str = ""
    wake: anyio.Event = field(default_factory=anyio.Event)
    vnpu_error: str = ""  # the last vNPU read's failure, so a repeat is not logged again
    events: ChipBurst | None = None  # fault events not applied yet
    pace: Pace = field(default_factory=lambda: Pace(EVENT_RATE, EVENT_BURST))
    events_due: asyncio.TimerHandle | None = None  # when the waiting events are applied


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
        event_log_interval: float = EVENT_LOG_INTERVAL,
    ) -> None:
        self.backend = backend
        self.calls = calls
        self.inventory = inventory
        self.policy = policy
        self.fault_table = fault_table
        self.clock = clock
        self.subscribed = False
        self.inbox: EventInbox | None = None  # once subscribed: where the library leaves events
        self._watches = {
            state.phy_id: _Watch(state.chip, Damping(wall_clock), self._source(state))
            for state in inventory.chips()
        }
        self._severities: dict[int, int] = {}  # fault code -> last severity an event gave it
        self._event_log = FaultEventLog(event_log_interval)

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
            self._event_log.flush()

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
                    extra={"chip": chip.phy_id, "call": "vnpus", "error": str(error)},
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
        logic_ids = [state.chip.logic_id for state in self.inventory.chips()]
        inbox = EventInbox(asyncio.get_running_loop(), self._take_events, logic_ids, self.clock)
        try:
            subscribed = await self.calls.node(
                "dcmi_subscribe_fault_event", self.backend.subscribe_faults, inbox.put
            )
        except SymbolMissing as error:
            log.warning("%s: fault events unavailable, health comes from polling alone", error)
            return
        except (ChipError, ChipCallError) as error:
            log.info("fault events unavailable (%s); polling only", error)
            return
        if not subscribed:
            return  # the family's driver sends none: its chips are polled alone
        self.subscribed, self.inbox = True, inbox
        log.info("subscribed to fault events; polling stays as the fallback", extra={"logic_ids": logic_ids})

    def _take_events(self, batch: Batch) -> None:
        """Events from the library's thread (on the loop): each chip's applied now or once its pace allows."""
        for logic_id, burst in batch.chips.items():
            state = self.inventory.by_logic_id(logic_id)
            if state is None:
                continue
            watch = self._watches[state.phy_id]
            if watch.events is None:
                watch.events = burst
            else:
                watch.events.merge(burst)
            if watch.events_due is None:
                loop = asyncio.get_running_loop()
                wait = watch.pace.delay(loop.time())
                if wait > 0:
                    watch.events_due = loop.call_later(wait, self._apply_events, watch)
                else:
                    self._apply_events(watch)
        if batch.strays.events:
            self._event_log.burst(STRAYS, batch.strays)

    def _apply_events(self, watch: _Watch) -> None:
        """Apply a chip's waiting events: the turns within them, a verdict, the last of each code, a verdict.

        The first verdict shows damping where the chip went during the burst
        (:mod:`~ascend_plugin.inventory.fault_events`); the chip's poll follows.
        """
        burst, watch.events, watch.events_due = watch.events, None, None
        if burst is None:
            return
        watch.pace.spend(asyncio.get_running_loop().time())
        self._event_log.burst(watch.source, burst)
        table = self.fault_table()
        if turns := burst.turns():
            self._record(watch, turns, table)
            self._decide(watch)
        self._record(watch, burst.lasts(), table)
        self._decide(watch)
        watch.wake.set()

    def _record(self, watch: _Watch, arrivals: Iterable[Arrival], table: FaultTable) -> None:
        for arrival in arrivals:
            event = arrival.event
            self._severities.pop(event.code, None)  # re-inserted last: the oldest is what goes
            self._severities[event.code] = event.severity
            if len(self._severities) > MAX_SEVERITIES:
                del self._severities[next(iter(self._severities))]
            watch.memory.record(event, arrival.at, table)

    def _lane_changed(self, lane: LaneKey, stuck: StuckCall | None) -> None:
        watch = self._watches.get(lane) if lane is not None else None
        if watch is None:
            return
        if stuck is not None:
            self._decide(watch)  # marked unhealthy now, not at the next poll
        watch.wake.set()

    def _source(self, state: ChipState) -> Source:
        return Source(self.inventory.table.chip_id(state.phy_id), state.phy_id, state.chip.logic_id)

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
