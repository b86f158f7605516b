"""HealthMonitor: keep a true verdict on every chip, from polls, fault events and the RoCE link.

A task per chip polls its health and fault codes (and vNPUs, where read) in one
call on its lane, on a node-wide tick or sooner when something happens, tells
the fault policy what it read and records the verdict in the inventory. The
whole way: ARCHITECTURE.md "A fault's way"; the rules: docs/faults.md.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from ascend_plugin.changes import Changes, Followed
from ascend_plugin.chip_calls import NODE, ChipCallError, ChipCalls, LaneKey, StuckCall, step
from ascend_plugin.fault_policy.faults import LINK_DOWN, Observation
from ascend_plugin.fault_policy.policy import FaultPolicy
from ascend_plugin.inventory.damping import Damping, DampingPolicy
from ascend_plugin.inventory.fault_events import (
    Arrival,
    Batch,
    ChipBurst,
    EventInbox,
    FaultEventLog,
    PacedBursts,
    Source,
)
from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.inventory.verdict import Polls, Verdict, judge
from ascend_plugin.settings import Settings
from backends.backend import NETWORK_DOWN, NETWORK_UP, ChipBackend
from backends.chips import Chip, HealthReading
from backends.errors import ChipError, SymbolMissing
from backends.library import VdevInfo

log = logging.getLogger(__name__)

EVENT_RATE = 10.0  # times a second a chip's events are applied while they keep coming
EVENT_BURST = 5  # ... after this many applied at once
EVENT_LOG_INTERVAL = 10.0  # seconds between two fault-event lines of one chip while its events keep coming
NETWORK_TIMEOUT = 1.0  # seconds dcmi_get_device_network_health may take (it blocks after a card drop)
# Seconds between two reads of a chip's RoCE link, at least: one every 1 s poll would double a chip's
# wake-ups for a code that takes effect after 20 s (its FaultDuration).
NETWORK_INTERVAL = 5.0
STRAYS = Source("chips this node does not have")
# A poll that starts this little before its tick (the loop runs timers a hair early) is that tick's.
TICK_SLACK = 0.001


@dataclass(frozen=True)
class HealthPolicy:
    """The knobs of the health decision (from settings, reloadable)."""

    interval: float = 1.0
    failure_threshold: int = 3
    damping: DampingPolicy = field(default_factory=DampingPolicy)
    network_interval: float = NETWORK_INTERVAL  # seconds between two reads of a chip's RoCE link, at least


def health_policy(settings: Settings) -> HealthPolicy:
    return HealthPolicy(
        interval=settings.health_interval,
        failure_threshold=settings.health_failure_threshold,
        damping=DampingPolicy(
            settings.health_flap_threshold, settings.health_flap_window, settings.health_flap_hold
        ),
        network_interval=max(NETWORK_INTERVAL, settings.health_interval),
    )


class HeldSource(Followed, Protocol):
    """The chips pods hold (:class:`~ascend_plugin.holdings.held.HeldChips`), as read here."""

    @property
    def chips(self) -> frozenset[int]: ...

    @property
    def known(self) -> bool: ...


_Vnpus = tuple[VdevInfo, ...] | ChipError | None  # what a poll read of the chip's vNPUs: None, not read


@dataclass
class _Watch:
    """What the monitor remembers of one chip between polls."""

    chip: Chip
    damping: Damping
    wake: Changes = field(default_factory=Changes)  # bumped: poll now
    polls: Polls = field(default_factory=Polls)
    polled_at: float | None = None  # when its last poll started, on the loop's clock
    vnpu_error: str = ""  # the last vNPU read's failure, so a repeat is not logged again
    # The RoCE link: down (True), up (False), not known yet (None); when last asked (loop clock);
    # whether the chip has one (False once it answered it has none).
    link_down: bool | None = None
    link_asked: float | None = None
    has_link: bool = True


class HealthMonitor:
    """Keeps the inventory's verdict on every chip of ``backend`` true."""

    def __init__(
        self,
        backend: ChipBackend,
        calls: ChipCalls,
        inventory: Inventory,
        *,
        policy: Callable[[], HealthPolicy],
        faults: FaultPolicy,
        held: HeldSource | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        event_log_interval: float = EVENT_LOG_INTERVAL,
    ) -> None:
        self.backend = backend
        self.calls = calls
        self.inventory = inventory
        self.policy = policy
        self.faults = faults
        self.held = held  # None: no holdings known (PreSeparateNPU then counts as free)
        self.clock = clock
        self.subscribed = False
        self.inbox: EventInbox | None = None  # once subscribed: where the library leaves events
        self._watches = {
            state.phy_id: _Watch(state.chip, Damping(wall_clock, inventory.table.chip_id(state.phy_id)))
            for state in inventory.chips()
        }
        self._events = PacedBursts(self._apply_events, EVENT_RATE, EVENT_BURST)
        self._event_log = FaultEventLog(event_log_interval)
        self._group: TaskGroup | None = None  # while running: where the RoCE link reads run
        # The node-wide ticks of the regular polls, on the loop's clock: this plus whole intervals.
        self._ticks_from: float | None = None

    # -- running -----------------------------------------------------------------------

    async def poll_all(self) -> None:
        """Look at every chip once, side by side; returns within about one call timeout."""
        async with anyio.create_task_group() as group:
            for watch in self._watches.values():
                group.start_soon(self._poll, watch)

    async def run(self) -> None:
        stop_listening = self.calls.on_lane_change(self._lane_changed)
        try:
            await self.subscribe()
            async with anyio.create_task_group() as self._group:
                for watch in self._watches.values():
                    self._group.start_soon(self._watch, watch, name=f"health of chip {watch.chip.phy_id}")
                if self.held is not None:
                    self._group.start_soon(self._follow_holdings, self.held, name="health: chips pods hold")
        finally:
            self._group = None
            stop_listening()
            self._event_log.flush()

    def wake(self) -> None:
        """Look at every chip now (a config change, a new fault configuration, an operator's release)."""
        for watch in self._watches.values():
            watch.wake.bump()

    async def look_again(self, phy_ids: Iterable[int]) -> None:
        """Poll these chips now, every code read afresh (after a hot reset, as Huawei's plugin does)."""
        watches = [self._watches[phy] for phy in phy_ids if phy in self._watches]
        for watch in watches:
            self.faults.read_afresh(watch.chip.phy_id)
        async with anyio.create_task_group() as group:
            for watch in watches:
                group.start_soon(self._poll, watch)

    async def _watch(self, watch: _Watch) -> None:
        woken = 0  # a wake before the first poll counts
        while True:
            with anyio.CancelScope(deadline=self._next_poll(watch)):
                await watch.wake.wait_for_change(woken)
            woken = watch.wake.version
            await self._poll(watch)

    def _next_poll(self, watch: _Watch) -> float:
        """When (loop clock) the chip's next poll is due: the node-wide tick, or a timed change before it.

        Timed changes: the fault policy's next deadline, the end of a flap hold, a lane's retry.
        """
        now, phy = self.clock(), watch.chip.phy_id
        due = []
        if (wake_at := self.faults.chip(phy).wake_at()) is not None:
            due.append(now + max(wake_at - self.faults.now(), 0) / 1000)
        if (release := watch.damping.release_due(now, self.policy().damping)) is not None:
            due.append(release)
        if (retry := self.calls.next_try(phy)) is not None:
            due.append(retry)  # a lane held back by its thread cap is woken when a thread returns
        # The first node-wide tick after the chip's last poll: the same deadline for every chip.
        interval = self.policy().interval
        if self._ticks_from is None:
            self._ticks_from = anyio.current_time()
        last = anyio.current_time() if watch.polled_at is None else watch.polled_at
        tick = self._ticks_from + ((last + TICK_SLACK - self._ticks_from) // interval + 1) * interval
        return min(tick, anyio.current_time() + max(min(due) - now, 0.0)) if due else tick

    def between_ticks(self, at: float) -> float:
        """The first midpoint between two ticks at or after ``at``: where telemetry neither waits for a
        tick's polls nor makes one wait (loop clock)."""
        if self._ticks_from is None:
            return at
        interval = self.policy().interval
        halves = math.ceil((at - self._ticks_from) / interval - 0.5)
        return self._ticks_from + (halves + 0.5) * interval

    # -- one poll ----------------------------------------------------------------------

    async def _poll(self, watch: _Watch) -> None:
        chip = watch.chip
        started, watch.polled_at = self.clock(), anyio.current_time()
        reads_vnpus = self.inventory.facts.reads_vnpus and self.inventory.get(chip.phy_id) is not None
        edits = self.inventory.vnpu_edits(chip.phy_id)
        try:
            reading, vnpus = await self.calls.call(chip.phy_id, "read_health", self._reads, chip, reads_vnpus)
        except ChipCallError:
            pass  # a hung or stuck lane: the verdict reads it from the lanes
        except ChipError as error:
            failures = watch.polls.failures + 1
            watch.polls = Polls(watch.polls.reading, watch.polls.at, failures, str(error))
            log.warning(
                "health query of %s failed (%d in a row): %s",
                chip.label,
                failures,
                error,
                extra={"chip": chip.phy_id, "error": type(error).__name__},
            )
        else:
            watch.polls = Polls(reading, self.faults.now() - round((self.clock() - started) * 1000))
            self._reconcile(watch)
            self._record_vnpus(watch, vnpus, edits)
            self._ask_link(watch)
        self._decide(watch)

    def _reconcile(self, watch: _Watch) -> None:
        """Tell the policy the codes the last poll listed (the link's state a second source), dated
        when the poll began so that an event since wins; a reading without codes says nothing of them."""
        reading = watch.polls.reading
        if reading is None or not reading.codes_known:
            return
        codes = reading.codes
        if watch.link_down and LINK_DOWN not in codes:
            codes = (*codes, LINK_DOWN)
        self.faults.reconcile(watch.chip.phy_id, codes, watch.polls.at)

    def _reads(self, chip: Chip, reads_vnpus: bool) -> tuple[HealthReading, _Vnpus]:
        """One poll's reads in one hand-off to the chip's thread: its health, then (where read) its vNPUs."""
        reading = self.backend.read_health(chip)
        if not reads_vnpus or reading.dropped:
            return reading, None
        try:
            return reading, tuple(step("vnpus", self.backend.vnpus, chip))
        except ChipError as error:
            return reading, error

    def _record_vnpus(self, watch: _Watch, vnpus: _Vnpus, edits: int) -> None:
        """Record the vNPUs the poll read (unless a make or destroy since ``edits`` made the read stale);
        a failed read keeps what was known."""
        chip = watch.chip
        state = self.inventory.get(chip.phy_id)
        if state is None or vnpus is None:
            return  # not read: the node reads no vNPUs, or the chip dropped off
        if isinstance(vnpus, ChipError):
            if str(vnpus) != watch.vnpu_error:
                log.warning(
                    "cannot read the vNPUs of %s: %s; keeping what was known (%s)",
                    chip.label,
                    vnpus,
                    "nothing yet: the chip is not offered healthy" if state.vnpus is None else "as before",
                    extra={"chip": chip.phy_id, "call": "vnpus", "error": str(vnpus)},
                )
            watch.vnpu_error = str(vnpus)
            return
        watch.vnpu_error = ""
        if self.inventory.set_vnpus(chip.phy_id, vnpus, read_at=edits):
            _log_vnpu_change(chip, state.vnpus, vnpus)

    def _decide(self, watch: _Watch) -> None:
        """Judge the chip from what is known now and record the verdict."""
        phy, policy = watch.chip.phy_id, self.policy()
        held = self.held is not None and self.held.known and phy in self.held.chips  # unknown: free
        verdict = judge(
            watch.polls,
            self.faults.judge(phy, held=held),
            held=held,
            stuck=self.calls.stuck(phy),
            failure_threshold=policy.failure_threshold,
        )
        verdict = watch.damping.apply(verdict, self.clock(), policy.damping)
        old = self.inventory.get(phy)
        if self.inventory.set_health(phy, verdict) and old is not None:
            _log_transition(self.inventory.table.chip_id(phy), old, verdict)

    # -- fault events ------------------------------------------------------------------

    async def subscribe(self) -> None:
        """Subscribe to fault events where the family and the driver support it."""
        if self.subscribed:
            return
        logic_ids = [state.chip.logic_id for state in self.inventory.chips()]
        inbox = EventInbox(asyncio.get_running_loop(), self._take_events, logic_ids, self.clock)
        try:
            subscribed = await self.calls.call(
                NODE, "dcmi_subscribe_fault_event", self.backend.subscribe_faults, inbox.put
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
        """Events from the library's thread (on the loop): each chip's applied as its pace allows."""
        for logic_id, burst in batch.chips.items():
            state = self.inventory.by_logic_id(logic_id)
            if state is not None:
                self._events.add(state.phy_id, burst)
        if batch.strays.events:
            self._event_log.burst(STRAYS, batch.strays)

    def _apply_events(self, phy: int, burst: ChipBurst) -> None:
        """The turns within the chip's events, a verdict (damping sees where the chip went), the last
        of each code, a verdict; the chip's poll follows."""
        watch = self._watches[phy]
        chip = watch.chip
        self._event_log.burst(Source(self.inventory.table.chip_id(phy), phy, chip.logic_id), burst)
        if turns := burst.turns():
            self._observe(phy, turns)
            self._decide(watch)
        self._observe(phy, burst.lasts())
        self._decide(watch)
        watch.wake.bump()

    def _observe(self, phy: int, arrivals: Iterable[Arrival]) -> None:
        for arrival in arrivals:
            at = self.faults.now() - round((self.clock() - arrival.at) * 1000)  # on the policy's clock
            if self.faults.observe(phy, Observation.of_event(arrival.event, at)):
                self.faults.read_afresh(phy)  # reset finished: the poll that follows reads every code again

    # -- the chips pods hold, the RoCE link, stuck lanes --------------------------------

    async def _follow_holdings(self, held: HeldSource) -> None:
        """Judge every chip again whenever the chips pods hold change."""
        seen = held.version
        while True:
            seen = await held.wait_for_change(seen)
            for watch in self._watches.values():
                self._decide(watch)

    def _ask_link(self, watch: _Watch) -> None:
        """Read the RoCE link now, if the monitor runs and the last read was ``network_interval`` ago."""
        now = anyio.current_time()
        if self._group is None or not watch.has_link:
            return
        if (
            watch.link_asked is not None
            and now - watch.link_asked < self.policy().network_interval - TICK_SLACK
        ):
            return
        watch.link_asked = now
        self._group.start_soon(self._read_link, watch, name=f"network health of chip {watch.chip.phy_id}")

    async def _read_link(self, watch: _Watch) -> None:
        """``dcmi_get_device_network_health``: up (OK, INIT) or down; a failed call leaves the last state."""
        chip = watch.chip
        try:
            status = await self.calls.call(
                chip.phy_id,
                "network health",
                lambda: step("network_status", self.backend.network_status, chip),
                within=NETWORK_TIMEOUT,
                background=True,
            )
        except (ChipCallError, ChipError) as error:
            log.debug("%s: network health not read (%s); its last state stays", chip.label, error)
            return
        if status is None:
            watch.has_link = False
            return
        down = {NETWORK_UP: False, NETWORK_DOWN: True}.get(status)
        if down is None or down == watch.link_down:
            return
        watch.link_down = down
        self._reconcile(watch)
        self._decide(watch)

    def _lane_changed(self, lane: LaneKey, stuck: StuckCall | None) -> None:
        watch = self._watches.get(lane) if lane is not None else None
        if watch is None:
            return
        if stuck is not None:
            self._decide(watch)  # marked unhealthy now, not at the next poll
        watch.wake.bump()


def _log_transition(name: str, old: ChipState, verdict: Verdict) -> None:
    if verdict.healthy == old.healthy and old.health.known:
        return
    extra = {
        "device": name,
        "chip": old.chip.label,
        "codes": verdict.codes,
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
