"""TelemetryCollector: every chip's figures, read in rounds as background calls on the chips' lanes.

Each call is held to ``call_timeout``, so health calls never wait for figures (docs/telemetry.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import anyio

from ascend_plugin.changes import Changes
from ascend_plugin.chip_calls import ChipCallError, ChipCalls, ChipCallTimeout, LaneStuck, step
from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.settings import Settings
from ascend_plugin.telemetry.readout import FAST, MAX_ERROR_CODES, SLOW, STALE_ROUNDS, HealthFigures, Readout
from backends.backend import ChipBackend
from backends.chips import Chip
from backends.errors import ChipError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TelemetryPolicy:
    """How often the figures are read and how long one call may take (seconds)."""

    interval: float = 5.0
    slow_interval: float = 60.0
    call_timeout: float = 1.0

    @classmethod
    def from_settings(cls, settings: Settings) -> TelemetryPolicy:
        return cls(
            settings.telemetry_interval, settings.telemetry_slow_interval, settings.telemetry_call_timeout
        )

    def intervals(self) -> Mapping[str, float]:
        """Each figure's interval (the VDIE id has none: it is read once)."""
        return MappingProxyType(
            {**dict.fromkeys(FAST, self.interval), **dict.fromkeys(SLOW, self.slow_interval)}
        )


@dataclass(frozen=True)
class ChipSample:
    """One chip as a scrape shows it: its state in the inventory and its fresh figures."""

    state: ChipState
    readout: Readout


def health_figures(backend: ChipBackend, chip: Chip) -> HealthFigures:
    """npu-exporter's health status and error codes: 1 when the health value is 0, -1 when the call fails."""
    try:
        reading = backend.read_health(chip)
    except ChipError:
        return HealthFigures(-1)
    return HealthFigures(1 if reading.value == 0 else 0, reading.codes[:MAX_ERROR_CODES], reading.dropped)


Reader = Callable[[ChipBackend, Chip, tuple[int, ...]], object]  # (backend, chip, its vNPU ids) -> figure

# How each figure is read, chip figures first: the order a round reads them in.
READERS: Mapping[str, Reader] = MappingProxyType(
    {
        "health": lambda backend, chip, _: health_figures(backend, chip),
        "temperature": lambda backend, chip, _: backend.temperature(chip),
        "power": lambda backend, chip, _: backend.power(chip),
        "voltage": lambda backend, chip, _: backend.voltage(chip),
        "aicore_frequency": lambda backend, chip, _: backend.aicore_frequency(chip),
        "utilization": lambda backend, chip, _: backend.utilization(chip),
        "vnpus": lambda backend, chip, vdev_ids: (
            tuple(backend.vnpu_activity(chip, vdev_ids)) if vdev_ids else ()
        ),
        "memory": lambda backend, chip, _: backend.memory_usage(chip),
        "network": lambda backend, chip, _: backend.exported_network_status(chip),
        "ecc": lambda backend, chip, _: backend.hbm_ecc(chip),
        "vdie_id": lambda backend, chip, _: backend.vdie_id(chip),
    }
)


class _Chip:
    """What the collector keeps of one chip between rounds."""

    def __init__(self) -> None:
        self.readout = Readout()
        self.due: dict[str, float] = dict.fromkeys(READERS, 0.0)
        self.problem = ""  # why its telemetry is not read now, as last said; empty when it is


def _at_once(at: float) -> float:
    """A round at the moment its figures fall due (a collector beside no health monitor's ticks)."""
    return at


class TelemetryCollector:
    """Reads every chip's figures on the telemetry's cadence and keeps them for the scrapes."""

    def __init__(
        self,
        backend: ChipBackend,
        calls: ChipCalls,
        inventory: Inventory,
        policy: Callable[[], TelemetryPolicy],
        *,
        clock: Callable[[], float] = time.monotonic,
        align: Callable[[float], float] = _at_once,
    ) -> None:
        """``policy``: read at every round (it reloads); ``align``: when a round due at a time starts."""
        self.backend = backend
        self.calls = calls
        self.inventory = inventory
        self._policy = policy
        self.policy = policy()
        self.clock = clock
        self._align = align
        self._intervals = self.policy.intervals()
        self._woken = Changes()  # bumped by wake()
        # A utilization read over a period (910B, A3) may take that period on top of the call timeout.
        self._sampling = MappingProxyType({"utilization": backend.utilization_sampling_s})
        self._chips = {state.phy_id: _Chip() for state in inventory.chips()}
        # npu-exporter's machine_card_nums: fixed with the chips (None: the family shows none)
        self.cards = backend.card_count([state.chip for state in inventory.chips()])

    # -- what a scrape reads -----------------------------------------------------------

    def snapshot(self) -> list[ChipSample]:
        """Every chip with the figures fresh enough to show, by physical id."""
        now = self.clock()
        return [
            ChipSample(state, self._chips[state.phy_id].readout.fresh(now, self._intervals))
            for state in self.inventory.chips()
            if state.phy_id in self._chips
        ]

    # -- the rounds --------------------------------------------------------------------

    async def run(self) -> None:
        """Read whatever is due, chips side by side, then sleep until the next is due; until cancelled."""
        while True:
            woken = self._woken.version
            await self.read_due()
            wake = (
                min(min(chip.due.values()) for chip in self._chips.values()) if self._chips else float("inf")
            )
            delay = max(wake - self.clock(), 0.0) if wake != float("inf") else self.policy.interval
            with anyio.CancelScope(deadline=self._align(anyio.current_time() + delay)):
                await self._woken.wait_for_change(woken)

    def wake(self) -> None:
        """The settings may have changed: look at the intervals now, not at the next figure due."""
        self._woken.bump()

    async def read_due(self) -> None:
        """One round: every chip's due figures, side by side."""
        self._follow_policy()
        now = self.clock()
        async with anyio.create_task_group() as group:
            for state in self.inventory.chips():
                watched = self._chips.get(state.phy_id)
                if watched is not None and min(watched.due.values()) <= now:
                    group.start_soon(self._read, state, watched, now)

    async def _read(self, state: ChipState, watched: _Chip, now: float) -> None:
        due = [name for name, at in watched.due.items() if at <= now]  # in READERS' order
        backend, chip = self.backend, state.chip
        vdev_ids = tuple(vnpu.vdev_id for vnpu in state.vnpus or ())
        figures: dict[str, object] = {}  # filled on the lane's thread, read here once the call ended or hung

        def read() -> None:
            for name in due:
                longer = self._sampling.get(name, 0.0)
                figures[name] = step(name, READERS[name], backend, chip, vdev_ids, longer=longer)

        try:
            await self.calls.call(
                state.phy_id, "telemetry", read, within=self.policy.call_timeout, background=True
            )
        except ChipCallTimeout as timeout:
            self._record(watched, dict(figures), now)  # what was read before the call that hangs
            self._postpone(watched, due, now)
            self._say(
                watched, state, f"driver call {timeout.name} did not return within {timeout.timeout:g} s"
            )
            return
        except LaneStuck as refused:
            self._postpone(watched, due, now)
            self._say(watched, state, str(refused))
            return
        except ChipCallError:
            return  # shutting down
        self._record(watched, figures, now)
        if watched.problem:
            log.info(
                "telemetry of %s is read again",
                state.chip.label,
                extra={"chip": state.phy_id, "after": watched.problem},
            )
            watched.problem = ""

    def _follow_policy(self) -> None:
        """Take intervals changed at run time: each figure falls due one new interval after its last read."""
        policy = self._policy()
        if policy == self.policy:
            return
        old, new = self._intervals, policy.intervals()
        for watched in self._chips.values():
            for name, due in watched.due.items():
                if name in old and due != float("inf"):
                    watched.due[name] = due - old[name] + new[name]
        log.info(
            "telemetry read every %g s (HBM, memory, network and ECC every %g s), each call within %g s",
            policy.interval,
            policy.slow_interval,
            policy.call_timeout,
            extra={
                "interval": policy.interval,
                "slow_interval": policy.slow_interval,
                "call_timeout": policy.call_timeout,
            },
        )
        self.policy, self._intervals = policy, new

    def _record(self, watched: _Chip, figures: Mapping[str, object], now: float) -> None:
        """Keep the figures a job read; each is due one interval after it was due (not after the round
        began: that would add the lag to every interval), or after this round when read that late."""
        if not figures:
            return
        watched.readout = watched.readout.updated(figures, self.clock())
        for name in figures:
            interval = self._intervals.get(name)
            if interval is None:
                watched.due[name] = float("inf")
                continue
            following = watched.due[name] + interval
            watched.due[name] = following if following > now else now + interval

    def _postpone(self, watched: _Chip, names: Sequence[str], now: float) -> None:
        """Ask what was not read again at the next round, not at once: one job a round for a silent chip."""
        for name in names:
            watched.due[name] = max(watched.due[name], now + self.policy.interval)

    def _say(self, watched: _Chip, state: ChipState, problem: str) -> None:
        """Say once that the chip's telemetry is not read, and what becomes of its figures."""
        if watched.problem:
            return
        watched.problem = problem
        log.warning(
            "telemetry of %s is not read: %s; its figures stay on /metrics for %g s (HBM, memory, network "
            "and ECC for %g s), then leave it until the chip answers again; its health is polled as before",
            state.chip.label,
            problem,
            STALE_ROUNDS * self.policy.interval,
            STALE_ROUNDS * self.policy.slow_interval,
            extra={"chip": state.phy_id, "problem": problem},
        )
