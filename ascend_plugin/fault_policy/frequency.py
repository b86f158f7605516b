"""FaultFrequency: how often one code occurred on one chip, and when it last recovered.

Huawei's counting: an occurrence is a raised (or one-off) code, or, for a
code with a FaultDuration entry, each time it stays longer than its timeout;
occurrences older than ``TimeWindow`` are forgotten; at ``Times`` within the
window the code escalates, the count starts again, and while the escalation
stands further occurrences only move its time. The escalation is lifted once
the code has recovered after its last occurrence and stayed clear for
``ReleaseTimeWindow``. All times are Unix milliseconds.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from ascend_plugin.fault_policy.customization import FrequencyRule

MS = 1000


@dataclass
class FrequencyCounter:
    """One code's occurrences on one chip."""

    occurrences: list[int] = field(default_factory=list)  # oldest first
    last_fault: int | None = None
    last_recover: int | None = None

    def occurred(self, at: int) -> None:
        bisect.insort(self.occurrences, at)
        self.last_fault = at if self.last_fault is None else max(self.last_fault, at)

    def recovered(self, at: int) -> None:
        self.last_recover = at if self.last_recover is None else max(self.last_recover, at)

    def restored(self, escalated_at: int, now: int) -> None:
        """An escalation at ``escalated_at`` was read back at ``now``: count the code clear since then."""
        self.last_fault = escalated_at if self.last_fault is None else max(self.last_fault, escalated_at)
        self.recovered(now)

    def reached(self, rule: FrequencyRule, now: int) -> bool:
        """Whether the code occurred ``times`` times within the window ending ``now``."""
        start = now - rule.time_window * MS
        del self.occurrences[: bisect.bisect_left(self.occurrences, start)]
        return len(self.occurrences) >= rule.times

    def restart_count(self) -> None:
        """Forget the occurrences: the escalation they caused stands for them."""
        self.occurrences.clear()

    def release_at(self, rule: FrequencyRule) -> int | None:
        """When an escalation by ``rule`` is lifted, as things stand (None: not while they do)."""
        if not rule.releases or self.last_recover is None:
            return None
        if self.last_fault is not None and self.last_recover < self.last_fault:
            return None  # not recovered since it last occurred
        return self.last_recover + rule.release_window * MS + 1  # Huawei: clear for *more* than the window
