"""HealthMonitor: poll every chip, react to fault events, keep the registry's health true.

Each round reads every chip's health value and fault codes through the chip
caller (one worker thread, per-call timeout). A fault event from a 910
subscription records the event's severity and starts a round at once, so the
kubelet hears of it without waiting for the next poll.

What decides a chip's health, in order:

* the call hung: unhealthy ("driver call timed out"), until the call returns;
* the call failed ``failure_threshold`` times in a row: unhealthy (the error
  is the reason); fewer failures keep the last state;
* the chip dropped off the bus: unhealthy;
* any fault whose level is worse than SubHealthFault: unhealthy;
* a major or critical health value with no fault code to explain it: unhealthy;
* otherwise healthy, except that a chip which turned unhealthy
  ``flap_threshold`` times within ``flap_window`` seconds stays unhealthy until
  it has been clean for ``flap_hold`` seconds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from ascend_plugin.chip_calls import ChipCaller, ChipCallsBlocked, ChipCallTimeout, StuckCall
from ascend_plugin.faults import Fault, FaultTable, format_code
from ascend_plugin.registry import DeviceRegistry, DeviceState
from backends.base import ChipBackend, HealthReading
from backends.errors import BackendError, DcmiError
from backends.library import FaultEvent

log = logging.getLogger(__name__)

_HEALTH_VALUES = {0: "ok", 1: "minor alarm", 2: "major alarm", 3: "critical alarm"}


@dataclass(frozen=True)
class HealthPolicy:
    """The knobs of the health decision (from settings, reloadable)."""

    interval: float = 1.0
    failure_threshold: int = 3
    flap_threshold: int = 3
    flap_window: float = 60.0
    flap_hold: float = 30.0


@dataclass
class _ChipTrack:
    """Per-device memory the decision needs between rounds."""

    failures: int = 0
    spells: deque[float] = field(default_factory=deque)  # when each unhealthy spell began
    clean_since: float | None = None


@dataclass(frozen=True)
class Verdict:
    """The outcome of one look at a chip."""

    healthy: bool
    reason: str
    faults: tuple[Fault, ...]


class HealthMonitor:
    """Keeps ``registry`` health current for every chip of ``backend``."""

    def __init__(
        self,
        backend: ChipBackend,
        caller: ChipCaller,
        registry: DeviceRegistry,
        *,
        table: FaultTable,
        policy: HealthPolicy,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend = backend
        self.caller = caller
        self.registry = registry
        self.table = table
        self.policy = policy
        self.clock = clock
        self.rounds = 0
        self.last_round_seconds = 0.0
        self.subscribed = False
        self._tracks = {device.id: _ChipTrack() for device in registry.devices()}
        self._severities: dict[int, int] = {}  # fault code -> last severity an event gave it
        self._wake = anyio.Event()
        self._round_listeners: list[Callable[[float], None]] = []
        caller.on_circuit_change(self._circuit_changed)

    def on_round(self, listener: Callable[[float], None]) -> None:
        """Call ``listener(seconds)`` after every health round (for metrics)."""
        self._round_listeners.append(listener)

    # -- running ---------------------------------------------------------------

    async def run(self) -> None:
        """Poll forever, every ``policy.interval`` seconds or sooner when woken."""
        await self.subscribe()
        while True:
            await self.poll_once()
            with anyio.move_on_after(self.policy.interval):
                await self._wake.wait()
            self._wake = anyio.Event()

    def wake(self) -> None:
        """Start the next round now (fault event, circuit closed, config change)."""
        self._wake.set()

    async def subscribe(self) -> None:
        """Subscribe to fault events where the family and the driver support it."""
        if not self.backend.table.fault_subscription or self.subscribed:
            return
        loop = asyncio.get_running_loop()

        def handler(event: FaultEvent) -> None:  # runs on a library thread
            loop.call_soon_threadsafe(self.on_fault_event, event)

        try:
            await self.caller.call(
                "dcmi_subscribe_fault_event", self.backend.library.subscribe_faults, handler
            )
        except (BackendError, ChipCallTimeout, ChipCallsBlocked) as error:
            log.info("fault events unavailable (%s); polling only", error)
            return
        self.subscribed = True
        log.info("subscribed to fault events; polling stays as the fallback")

    def on_fault_event(self, event: FaultEvent) -> None:
        """A fault event arrived (on the loop thread): note its severity, look at once."""
        self._severities[event.code] = event.severity
        device = next((d for d in self.registry.devices() if d.chip.logic_id == event.logic_id), None)
        log.info(
            "fault event %s on %s (severity %d, %s)",
            format_code(event.code),
            device.id if device else f"logic id {event.logic_id}",
            event.severity,
            {0: "recovered", 1: "raised", 2: "one-off"}.get(event.assertion, "?"),
            extra={"code": format_code(event.code), "logic_id": event.logic_id},
        )
        self.wake()

    # -- one round ---------------------------------------------------------------

    async def poll_once(self) -> None:
        """Look at every chip once and apply the verdicts."""
        started = time.monotonic()
        for device in self.registry.devices():
            verdict = await self._look(device)
            if verdict is not None:
                self._apply(device, verdict)
        self.rounds += 1
        self.last_round_seconds = time.monotonic() - started
        for listener in self._round_listeners:
            listener(self.last_round_seconds)

    async def _look(self, device: DeviceState) -> Verdict | None:
        """The verdict for one chip, or None to keep its current state."""
        track = self._tracks[device.id]
        try:
            reading = await self.caller.call_for(
                (device.id,), "read_health", self.backend.read_health, device.chip
            )
        except ChipCallTimeout as error:
            return Verdict(False, str(error), device.faults)
        except ChipCallsBlocked as blocked:
            if device.id in blocked.stuck.concerns:
                return Verdict(False, f"driver call {blocked.stuck.name} timed out", device.faults)
            return None
        except DcmiError as error:
            track.failures += 1
            log.warning(
                "health query of %s failed (%d in a row): %s",
                device.id,
                track.failures,
                error,
                extra={"device": device.id, "function": error.function, "code": error.code},
            )
            if track.failures >= self.policy.failure_threshold:
                return Verdict(False, f"health query failed {track.failures} times in a row: {error}", ())
            return None
        track.failures = 0
        return self.judge(reading)

    def judge(self, reading: HealthReading) -> Verdict:
        """Healthy or not, from a reading alone (no damping)."""
        # Without an event's severity, the chip's health value (0-3) stands in for it.
        hint = reading.value if reading.value in _HEALTH_VALUES else None
        faults = self.table.classify(reading.codes, self._severities, hint)
        if reading.dropped:
            return Verdict(False, "card dropped off the bus (no health answer)", faults)
        bad = [fault for fault in faults if not fault.level.healthy]
        if bad:
            return Verdict(False, "fault " + ", ".join(str(fault) for fault in bad), faults)
        if not faults and reading.value >= 2:
            state = _HEALTH_VALUES.get(reading.value, f"unknown value {reading.value}")
            return Verdict(False, f"health value {reading.value} ({state}) without a fault code", faults)
        return Verdict(True, "", faults)

    def _apply(self, device: DeviceState, verdict: Verdict) -> None:
        """Damp the recovery of flapping chips, then write and log the change."""
        healthy, reason = verdict.healthy, verdict.reason
        track = self._tracks[device.id]
        if not healthy:
            track.clean_since = None
            if device.healthy:
                track.spells.append(self.clock())
        elif not device.healthy and self._held(track):
            healthy = False
            reason = (
                f"flapping ({len(track.spells)} unhealthy spells within {self.policy.flap_window:g} s); "
                f"held until clean for {self.policy.flap_hold:g} s"
            )
        self.registry.update(device.id, healthy=healthy, reason=reason, faults=verdict.faults)
        if healthy != device.healthy:
            self._log_transition(device, healthy, reason, verdict.faults)

    def _held(self, track: _ChipTrack) -> bool:
        """Whether a chip that looks clean must stay unhealthy because it has been flapping."""
        now = self.clock()
        if track.clean_since is None:
            while track.spells and now - track.spells[0] > self.policy.flap_window:
                track.spells.popleft()
            if len(track.spells) < self.policy.flap_threshold:
                return False
            track.clean_since = now
        if now - track.clean_since < self.policy.flap_hold:
            return True
        track.spells.clear()
        track.clean_since = None
        return False

    @staticmethod
    def _log_transition(device: DeviceState, healthy: bool, reason: str, faults: tuple[Fault, ...]) -> None:
        extra = {
            "device": device.id,
            "chip": device.chip.label,
            "codes": [format_code(f.code) for f in faults],
            "levels": [f.level.name for f in faults],
            "reason": reason,
        }
        if healthy:
            log.info("%s is healthy again", device.id, extra=extra)
        else:
            log.warning("%s is unhealthy: %s", device.id, reason, extra=extra)

    def _circuit_changed(self, stuck: StuckCall | None) -> None:
        if stuck is None:
            self.wake()  # the stuck call returned: look again now
