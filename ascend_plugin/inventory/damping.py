"""Flap damping: a chip that keeps failing and recovering stays out until it is clean for a while.

``flap_threshold`` unhealthy spells within ``flap_window`` s hold it out until clean for ``flap_hold`` s;
while held it shows every fault seen since and its worst judgement. A new fault configuration begins no spell.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ascend_plugin.fault_policy.chip import ChipJudgement
from ascend_plugin.fault_policy.faults import Fault
from ascend_plugin.inventory.verdict import Verdict

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DampingPolicy:
    flap_threshold: int = 3
    flap_window: float = 60.0
    flap_hold: float = 30.0


class Damping:
    def __init__(self, wall_clock: Callable[[], float] = time.time, name: str = "the chip") -> None:
        self.wall_clock = wall_clock
        self.name = name  # the chip, as its log line names it
        self._said = False  # the hold of a clean chip was logged (once per hold)
        self._spells: deque[float] = deque()
        self._last_healthy: bool | None = None
        self._damped = False
        self._clean_since: float | None = None
        self._clean_since_wall = 0.0
        self._faults: dict[int, Fault] = {}  # while damped: every fault seen since, by code
        self._judgement: ChipJudgement | None = None  # while damped: the most severe judgement since
        self._judged: ChipJudgement | None = None  # the fault policy's judgement in the last verdict

    def apply(self, verdict: Verdict, now: float, policy: DampingPolicy) -> Verdict:
        """The verdict to report, given the chip's own ``verdict`` at monotonic time ``now``."""
        # Whether only the fault configuration changed since the last verdict (the chip's codes did not).
        judgement, last, self._judged = verdict.judgement, self._judged, verdict.judgement
        reconfigured = (
            judgement is not None
            and last is not None
            and judgement.configuration != last.configuration
            and judgement.codes == last.codes
        )
        if not verdict.healthy:
            if self._last_healthy is not False and not reconfigured:  # an unhealthy spell begins
                self._spells.append(now)
            self._last_healthy = False
            self._clean_since = None
            while self._spells and now - self._spells[0] > policy.flap_window:
                self._spells.popleft()
            if len(self._spells) >= policy.flap_threshold:
                self._damped = True
            if self._damped:
                return self._holding(verdict, verdict.reason)
            return verdict
        self._last_healthy = True
        if not self._damped:
            return verdict
        if self._clean_since is None:
            self._clean_since = now
            self._clean_since_wall = self.wall_clock()
        if now - self._clean_since >= policy.flap_hold:
            self._damped = self._said = False
            self._spells.clear()
            self._clean_since = None
            self._faults.clear()
            self._judgement = None
            return verdict
        clean_at = _clock_time(self._clean_since_wall)
        release_at = _clock_time(self._clean_since_wall + policy.flap_hold)
        spells = f"{len(self._spells)} unhealthy spells within {policy.flap_window:g} s"
        if not self._said:  # the chip looks clean and stays out: say why, once per hold
            self._said = True
            log.warning(
                "%s looks healthy but is held out for flapping (%s; flap_threshold %d): released at %s "
                "if it stays clean for %g s (flap_hold)",
                self.name,
                spells,
                policy.flap_threshold,
                release_at,
                policy.flap_hold,
                extra={"device": self.name, "spells": len(self._spells)},
            )
        return self._holding(
            verdict,
            f"flapping ({spells}): held until clean for {policy.flap_hold:g} s; clean since {clean_at}, "
            f"released at {release_at} if it stays clean",
        )

    def _holding(self, verdict: Verdict, reason: str) -> Verdict:
        """``verdict`` held out: unhealthy, every fault seen since it was damped, the worst judgement."""
        self._faults.update((fault.code, fault) for fault in verdict.faults)
        judged, held = verdict.judgement, self._judgement
        if judged is not None and (
            held is None or (judged.level, judged.network_level) > (held.level, held.network_level)
        ):
            self._judgement = judged
        return dataclasses.replace(
            verdict,
            healthy=False,
            reason=reason,
            faults=tuple(sorted(self._faults.values(), key=lambda fault: (-fault.level, fault.code))),
            judgement=self._judgement,
        )

    def release_due(self, now: float, policy: DampingPolicy) -> float | None:
        """When a held chip that stays clean is to be released (monotonic), if one is pending."""
        if not self._damped or self._clean_since is None:
            return None
        return self._clean_since + policy.flap_hold


def _clock_time(wall: float) -> str:
    """HH:MM:SS UTC: enough to tell an operator when to look again."""
    return time.strftime("%H:%M:%S UTC", time.gmtime(wall))
