"""Bus errors that merely accompany an HBM multi-bit error, dropped as Huawei drops them.

docs/faults.md "Special codes". Unlike Huawei's, a dropped code stays dropped until it clears: polls
list it while the HBM error's aftermath lasts, and it is not the chip's own fault.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field

from ascend_plugin.fault_policy.faults import (
    AIC_BUS_ERROR,
    AIV_BUS_ERROR,
    HBM_MULTI_BIT,
    Assertion,
    Observation,
)

WINDOW_MS = 5000
BUS_ERRORS = frozenset({AIC_BUS_ERROR, AIV_BUS_ERROR})


@dataclass
class AccompanyingFaults:
    """One chip's held bus errors and the time of its last HBM multi-bit error."""

    hbm_at: int | None = None
    held: list[Observation] = field(default_factory=list)
    dropped: set[int] = field(default_factory=set)  # bus errors dropped and not cleared since

    def offer(self, observation: Observation, current: Container[int]) -> list[Observation]:
        """What to apply now of ``observation`` (``current``: the codes on the chip now)."""
        code = observation.code
        if code == HBM_MULTI_BIT and observation.assertion is not Assertion.RECOVERED:
            self.hbm_at = observation.at
        if code not in BUS_ERRORS:
            return [observation]
        if observation.assertion is Assertion.RECOVERED:
            if any(held.code == code for held in self.held):
                self.held.append(observation)  # after the raise it recovers
                return []
            if code in self.dropped:
                self.dropped.discard(code)
                return []
            return [observation] if code in current else []
        if code in self.dropped:
            return []
        self.held.append(observation)
        return []

    def release(self, now: int, current: Container[int]) -> list[Observation]:
        """The held observations that are due and no HBM error accompanies, oldest first."""
        present = {code for code in BUS_ERRORS if code in current}
        due: list[Observation] = []
        kept: list[Observation] = []
        for held in sorted(self.held, key=lambda observation: observation.at):
            code = held.code
            if held.assertion is Assertion.RECOVERED:
                if any(earlier.code == code for earlier in kept):
                    kept.append(held)
                elif code in self.dropped:
                    self.dropped.discard(code)
                elif code in present:
                    due.append(held)
                    present.discard(code)
            elif self.hbm_at is not None and abs(self.hbm_at - held.at) < WINDOW_MS:
                if held.assertion is Assertion.RAISED:
                    self.dropped.add(code)
            elif now - held.at > WINDOW_MS:
                due.append(held)
                present.add(code)
            else:
                kept.append(held)
        self.held = kept
        return due

    def forget_absent(self, listed: Container[int]) -> None:
        """A poll no longer lists these dropped codes: they have cleared."""
        self.dropped = {code for code in self.dropped if code in listed}

    def flush(self) -> list[Observation]:
        """Everything held, to apply now (the configuration stopped dropping bus errors)."""
        held, self.held, self.dropped = sorted(self.held, key=lambda o: o.at), [], set()
        return held

    def deadline(self) -> int | None:
        return min((held.at + WINDOW_MS + 1 for held in self.held), default=None)
