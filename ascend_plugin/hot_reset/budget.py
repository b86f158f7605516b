"""The reset budget: at most three hot resets of one chip in any 6 hours.

A chip that needs a reset again and again has something a reset does not
mend; resetting it forever would only take its group away from work each time.
Huawei's plugin gives each chip 3 tokens and refills them all 6 hours after the
last refill, so up to 6 resets can fall within a few minutes across a refill;
here the window slides: whatever 6 hours one looks at, a chip was reset at most
3 times in them. The budget is kept in memory, per physical id.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Final

RESETS: Final = 3
WINDOW: Final = 6 * 3600.0  # seconds


class ResetBudget:
    """The resets each chip has left, on ``clock`` (monotonic seconds)."""

    def __init__(self, clock: Callable[[], float], resets: int = RESETS, window: float = WINDOW) -> None:
        self.clock = clock
        self.resets = resets
        self.window = window
        self._spent: dict[int, deque[float]] = {}

    def left(self, phy_id: int) -> int:
        """How many resets the chip may have now."""
        return self.resets - len(self._recent(phy_id))

    def spend(self, phy_id: int) -> None:
        """A reset of the chip starts now."""
        self._recent(phy_id).append(self.clock())

    def next_in(self, phy_id: int) -> float:
        """Seconds until the chip may have one more reset (0 when it may now)."""
        recent = self._recent(phy_id)
        if len(recent) < self.resets:
            return 0.0
        return max(recent[0] + self.window - self.clock(), 0.0)

    def _recent(self, phy_id: int) -> deque[float]:
        spent = self._spent.setdefault(phy_id, deque())
        since = self.clock() - self.window
        while spent and spent[0] <= since:
            spent.popleft()
        return spent
