"""The check's time budget and its narration.

The whole check must end within its budget (20 minutes, both platforms): every
step's timeout is cut to what is left, so a slow machine fails with the step
that ran out rather than a CI job killed without a word.
"""

from __future__ import annotations

import time


class OutOfTime(RuntimeError):
    """The check's budget is spent."""


class Clock:
    """Elapsed time since the start, the budget left, and timestamped progress lines."""

    def __init__(self, budget_seconds: float, tag: str = "") -> None:
        self.started = time.monotonic()
        self.limit = budget_seconds
        self.tag = tag

    def tagged(self, tag: str) -> Clock:
        """The same clock and budget, its lines marked with ``tag`` (the platform a step is for)."""
        clock = Clock(self.limit, f"[{tag}] ")
        clock.started = self.started
        return clock

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def budget(self, timeout: float) -> float:
        """``timeout`` cut to the time left; OutOfTime when none is."""
        left = self.limit - self.elapsed()
        if left <= 0:
            raise OutOfTime(f"the image check ran out of its {self.limit:.0f} s budget")
        return min(timeout, left)

    def say(self, text: str) -> None:
        print(f"[{self.elapsed():6.1f}s] {self.tag}{text}", flush=True)
