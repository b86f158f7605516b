"""HealthMonitor: keep a true verdict on every chip, from polls and fault events.

Every chip is watched by its own task: it reads the chip's health value and
fault codes on the chip's own call lane (:mod:`ascend_plugin.chip_calls`), every
``health_interval`` seconds or sooner when something happens, and records the
verdict in the inventory. A call that hangs on one chip makes that chip
unhealthy within the call timeout and holds up nobody else.

On families whose driver delivers fault events (910), the monitor subscribes:
an event is applied on the loop the moment it arrives, without waiting for a
poll or a driver call, and the chip's next poll follows at once. Events and
polls go to the node's :class:`~ascend_plugin.fault_policy.policy.FaultPolicy`
(Huawei's levels, escalations and manual separation), which judges the chip's
faults; :func:`~ascend_plugin.inventory.verdict.judge` adds what the driver
calls say (a hung call, failed polls, a dropped card), and flapping chips are
held by :class:`~ascend_plugin.inventory.damping.Damping`. The policy's next
deadline (a one-off's hold, a FaultDuration timeout, a release window) brings
the chip's next look forward; so does a change of the chips pods hold, since
PreSeparateNPU is healthy only while a pod holds the chip.

Where the chip has a RoCE port (the 910 families), the link's health is read
after a successful poll, at most every ``network_interval`` (5 s), as a second
source beside the fault codes (``dcmi_get_device_network_health``, as a
background call with its own 1 s timeout: the call can block after a card drop,
and never holds up the poll's verdict): a link that is not OK or INIT counts as
the polled code ``81078603``. Every poll would double a chip's wake-ups for a
code that takes effect only after 20 s of presence (its FaultDuration), and
that the driver's own fault codes carry too. A chip whose events keep
coming has them applied at most ``EVENT_RATE`` times a second (after a burst of
``EVENT_BURST``), each time all that came meanwhile, coalesced
(:mod:`~ascend_plugin.inventory.fault_events`), and logged once per
``event_log_interval`` (:mod:`~ascend_plugin.inventory.event_log`): however fast
the driver sends, the monitor's memory, work and log stay bounded.

Where the node reads static vNPUs, each poll also reads the chip's vNPUs in the
same call (one query for the list, one per vNPU to describe it, so a vNPU
re-created under its old id with another template is seen too). A vNPU an
operator creates or destroys therefore reaches the offers within one poll interval.

An idle node costs what its polls cost, so a poll is kept to the least the
process can do: the chips' regular polls fall on one node-wide tick, so the
loop wakes once for all of them; each chip's reads of one poll are one call on
its lane, and the calls of one tick run in turn (ARCHITECTURE.md "The chip
lane"), so that each chip's thread wakes once and the loop once more for all
the answers.
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

from ascend_plugin.chip_calls import NODE, ChipCallError, ChipCalls, LaneKey, StuckCall, step
from ascend_plugin.fault_policy.codes import LINK_DOWN
from ascend_plugin.fault_policy.observations import Observation
from ascend_plugin.fault_policy.policy import FaultPolicy
from ascend_plugin.faults import format_code
from ascend_plugin.inventory.damping import Damping, DampingPolicy, Verdict
from ascend_plugin.inventory.event_log import FaultEventLog, Source
from ascend_plugin.inventory.fault_events import Arrival, Batch, ChipBurst, EventInbox, Pace
from ascend_plugin.inventory.inventory import ChipHealth, ChipState, Inventory
from ascend_plugin.inventory.verdict import Observation as Evidence
from ascend_plugin.inventory.verdict import judge
from ascend_plugin.settings import Settings
from backends.backend import NETWORK_DOWN, NETWORK_UP, ChipBackend
from backends.chips import Chip, HealthReading
from backends.errors import ChipError, SymbolMissing
from backends.library import VdevInfo

log = logging.getLogger(__name__)

EVENT_RATE = 10.0  # times a second a chip's events are applied while they keep coming
EVENT_BURST = 5  # ... after this many applied at once
EVENT_LOG_INTERVAL = 10.0  # seconds between two fault-event lines of one chip while its events keep coming
# Seconds dcmi_get_device_network_health may take (Huawei's limit: it blocks after a card drop).
NETWORK_TIMEOUT = 1.0
# Seconds between two reads of a chip's RoCE link, at least (one every poll, at the regular 1 s, would
# double a chip's wake-ups for a code that takes effect after 20 s: its FaultDuration).
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
    """The health knobs of the settings."""
    return HealthPolicy(
        interval=settings.health_interval,
        failure_threshold=settings.health_failure_threshold,
        damping=DampingPolicy(
            settings.health_flap_threshold, settings.health_flap_window, settings.health_flap_hold
        ),
        network_interval=max(NETWORK_INTERVAL, settings.health_interval),
    )


class HeldSource(Protocol):
    """The chips pods hold (:class:`~ascend_plugin.holdings.held.HeldChips`), as read here."""

    @property
    def chips(self) -> frozenset[int]: ...

    @property
    def known(self) -> bool: ...

    @property
    def version(self) -> int: ...

    async def wait_for_change(self, seen_version: int) -> int: ...


_Vnpus = tuple[VdevInfo, ...] | ChipError | None  # what a poll read of the chip's vNPUs: None, not read


@dataclass
class _Watch:
    """What the monitor remembers of one chip between looks."""

    chip: Chip
    damping: Damping
    source: Source  # how fault-event lines name it
    reading: HealthReading | None = None
    read_at: int = 0  # when the poll that read it began, on the fault policy's clock (Unix ms)
    judged_at: int = 0  # when the policy last judged it, on its clock (Unix ms)
    failures: int = 0
    error: str = ""
    wake: anyio.Event = field(default_factory=anyio.Event)
    vnpu_error: str = ""  # the last vNPU read's failure, so a repeat is not logged again
    events: ChipBurst | None = None  # fault events not applied yet
    pace: Pace = field(default_factory=lambda: Pace(EVENT_RATE, EVENT_BURST))
    events_due: asyncio.TimerHandle | None = None  # when the waiting events are applied
    polled_at: float | None = None  # when its last poll started, on the loop's clock
    # dcmi_get_device_network_health: the link is down (True), up (False), not known yet (None).
    link_down: bool | None = None
    has_network: bool = True  # False once the chip (or its family) answered it has no RoCE port
    network_read: anyio.Event | None = None  # a poll succeeded: time for a network read
    network_asked: float | None = None  # when the link was last asked for, on the loop's clock


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
            state.phy_id: _Watch(
                state.chip, Damping(wall_clock, inventory.table.chip_id(state.phy_id)), self._source(state)
            )
            for state in inventory.chips()
        }
        self._event_log = FaultEventLog(event_log_interval)
        # The node-wide ticks of the regular polls, on the loop's clock: this plus whole intervals.
        self._ticks_from: float | None = None

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
                    watch.network_read = anyio.Event()
                    group.start_soon(self._network, watch, name=f"network health of chip {watch.chip.phy_id}")
                if self.held is not None:
                    group.start_soon(self._follow_holdings, self.held, name="health: chips pods hold")
        finally:
            stop_listening()
            self._event_log.flush()

    def wake(self) -> None:
        """Look at every chip now (a config change, a new fault configuration, an operator's release)."""
        for watch in self._watches.values():
            watch.wake.set()

    def judge_again(self) -> None:
        """Judge every chip again from what is known, without a poll (the chips pods hold changed)."""
        for watch in self._watches.values():
            self._decide(watch)

    async def look_again(self, phy_ids: Iterable[int]) -> None:
        """Poll these chips now, their codes read afresh; return once judged.

        After a hot reset the driver has re-initialised the chips: a code an
        event raised before it says nothing of them now, so the poll decides
        every code (Huawei's plugin does the same).
        """
        watches = [self._watches[phy] for phy in phy_ids if phy in self._watches]
        for watch in watches:
            self.faults.read_afresh(watch.chip.phy_id)
        async with anyio.create_task_group() as group:
            for watch in watches:
                group.start_soon(self._poll, watch)

    async def _watch(self, watch: _Watch) -> None:
        while True:
            with anyio.CancelScope(deadline=self._next_look(watch)):
                await watch.wake.wait()
            watch.wake = anyio.Event()
            await self._poll(watch)

    def _next_look(self, watch: _Watch) -> float:
        """When (loop clock) the chip's next poll is due: the next tick, or sooner for a timed change.

        The tick is the very same deadline for every chip, so that the loop
        wakes once for all of them rather than once for each.
        """
        now = self.clock()
        due = []
        if (deadline := self._policy_deadline(watch)) is not None:
            due.append(now + deadline)
        if (release := watch.damping.release_due(now, self.policy().damping)) is not None:
            due.append(release)
        if (retry := self.calls.next_try(watch.chip.phy_id)) is not None:
            due.append(retry)  # a lane held back by its thread cap is woken when a thread returns
        tick = self._next_tick(watch)
        return min(tick, anyio.current_time() + max(min(due) - now, 0.0)) if due else tick

    def _policy_deadline(self, watch: _Watch) -> float | None:
        """Seconds until the fault policy's next timed change on the chip (None: none pending).

        The policy keeps Unix milliseconds on its own clock; the monitor waits
        on the loop's. A deadline that passed since the last judgement is due
        at once; one no later than it was judged already (judging consumes it),
        and is not waited for again.
        """
        wake_at = self.faults.chip(watch.chip.phy_id).wake_at()
        if wake_at is None or wake_at <= watch.judged_at:
            return None
        return max(wake_at - self.faults.now(), 0) / 1000

    def _next_tick(self, watch: _Watch) -> float:
        """The first node-wide tick after the chip's last poll, on the loop's clock."""
        interval = self.policy().interval
        if self._ticks_from is None:
            self._ticks_from = anyio.current_time()
        last = anyio.current_time() if watch.polled_at is None else watch.polled_at
        ticks = (last + TICK_SLACK - self._ticks_from) // interval + 1
        return self._ticks_from + ticks * interval

    def between_ticks(self, at: float) -> float:
        """The first midpoint between two node-wide ticks at or after ``at`` (loop clock).

        Where other work on the chips' threads (telemetry) is best started: a
        job there neither waits for the polls of a tick nor makes one wait, and
        never splits the tick's one hand-off of answers in two.
        """
        if self._ticks_from is None:
            return at
        interval = self.policy().interval
        halves = math.ceil((at - self._ticks_from) / interval - 0.5)
        return self._ticks_from + (halves + 0.5) * interval

    # -- one look ----------------------------------------------------------------------

    async def _poll(self, watch: _Watch) -> None:
        chip = watch.chip
        started, watch.polled_at = self.clock(), anyio.current_time()
        reads_vnpus = self.inventory.facts.reads_vnpus and self.inventory.get(chip.phy_id) is not None
        try:
            reading, vnpus = await self.calls.call(chip.phy_id, "read_health", self._look, chip, reads_vnpus)
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
            watch.read_at = self._policy_time(started)
            self._reconcile(watch)
            self._record_vnpus(watch, vnpus)
            self._ask_network(watch)
        self._decide(watch)

    def _policy_time(self, at: float) -> int:
        """The monitor's clock time ``at`` on the fault policy's clock (Unix milliseconds)."""
        return self.faults.now() - round((self.clock() - at) * 1000)

    def _reconcile(self, watch: _Watch) -> None:
        """Tell the policy the codes the last poll listed, with the link's state as a second source.

        Only a reading that lists codes says anything of codes that cleared. It
        is dated when its poll began, so that an event since then wins over it.
        """
        reading = watch.reading
        if reading is None or not reading.codes_known:
            return
        codes = reading.codes
        if watch.link_down and LINK_DOWN not in codes:
            codes = (*codes, LINK_DOWN)
        self.faults.reconcile(watch.chip.phy_id, codes, watch.read_at)

    def _look(self, chip: Chip, reads_vnpus: bool) -> tuple[HealthReading, _Vnpus]:
        """One poll's reads in one hand-off to the chip's thread: its health, then (where read) its vNPUs."""
        reading = self.backend.read_health(chip)
        if not reads_vnpus or reading.dropped:
            return reading, None
        try:
            return reading, tuple(step("vnpus", self.backend.vnpus, chip))
        except ChipError as error:
            return reading, error

    def _record_vnpus(self, watch: _Watch, vnpus: _Vnpus) -> None:
        """Record the vNPUs the poll read; a failed read keeps what was known."""
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
        if self.inventory.set_vnpus(chip.phy_id, vnpus):
            _log_vnpu_change(chip, state.vnpus, vnpus)

    def _held(self, phy_id: int) -> bool:
        """Whether a pod holds the chip; until the holdings are known, every chip counts as free."""
        held = self.held
        return held is not None and held.known and phy_id in held.chips

    def _decide(self, watch: _Watch) -> None:
        """Judge the chip from what is known now and record the verdict."""
        now = self.clock()
        policy = self.policy()
        phy = watch.chip.phy_id
        held = self._held(phy)
        judgement = self.faults.judge(phy, held=held)
        watch.judged_at = self.faults.now()
        evidence = Evidence(
            watch.reading, judgement, held, watch.failures, watch.error, self.calls.stuck(phy)
        )
        verdict = watch.damping.apply(judge(evidence, policy.failure_threshold), now, policy.damping)
        old = self.inventory.get(phy)
        health = ChipHealth(True, verdict.healthy, verdict.reason, verdict.faults, verdict.judgement)
        if self.inventory.set_health(watch.chip.phy_id, health) and old is not None:
            self._log_transition(self.inventory.table.chip_id(old.phy_id), old, verdict)

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
        if turns := burst.turns():
            self._record(watch, turns)
            self._decide(watch)
        self._record(watch, burst.lasts())
        self._decide(watch)
        watch.wake.set()

    def _record(self, watch: _Watch, arrivals: Iterable[Arrival]) -> None:
        phy = watch.chip.phy_id
        for arrival in arrivals:
            if self.faults.observe(phy, Observation.of_event(arrival.event, self._policy_time(arrival.at))):
                self.faults.read_afresh(phy)  # reset finished: the poll that follows reads every code again

    # -- the chips pods hold, the RoCE link ----------------------------------------------

    async def _follow_holdings(self, held: HeldSource) -> None:
        """Judge every chip again whenever the chips pods hold change."""
        seen = held.version
        while True:
            seen = await held.wait_for_change(seen)
            self.judge_again()

    def _ask_network(self, watch: _Watch) -> None:
        """Time for the link's read, if the last was asked at least ``network_interval`` ago."""
        now = anyio.current_time()
        if watch.network_read is None:
            return
        if (
            watch.network_asked is not None
            and now - watch.network_asked < self.policy().network_interval - TICK_SLACK
        ):
            return
        watch.network_asked = now
        watch.network_read.set()

    async def _network(self, watch: _Watch) -> None:
        """When a poll asks, read the chip's RoCE link once (until it says it has none)."""
        assert watch.network_read is not None
        while watch.has_network:
            await watch.network_read.wait()
            watch.network_read = anyio.Event()
            await self._read_network(watch)

    async def _read_network(self, watch: _Watch) -> None:
        """``dcmi_get_device_network_health`` of the chip, as a second source of ``81078603``.

        Up (OK, INIT) or down changes the link's state; a failed or timed-out
        call says nothing, and the last state stays. A chip without a RoCE port
        is not asked again.
        """
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
            watch.has_network = False
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
