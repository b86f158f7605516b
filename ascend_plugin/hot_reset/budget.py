"""The reset budget: at most three hot resets of one chip in any 6 hours, across restarts of the plugin.

A sliding window (Huawei's refills tokens: 6 resets can fall within minutes), written beside the sockets.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread

from ascend_plugin.files import write_atomically

log = logging.getLogger(__name__)

RESETS: Final = 3
WINDOW: Final = 6 * 3600.0  # seconds
BUDGET_FILE: Final = "ascend-hot-reset-budget.json"  # in the directory the plugin serves


class ResetBudget:
    """The resets each chip has left, on ``clock`` (monotonic seconds), kept in ``path`` when given."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        path: Path | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        self.resets = RESETS
        self.window = WINDOW
        self.path = path
        self.wall_clock = wall_clock
        self._spent: dict[int, deque[float]] = {}
        self._write_problem = ""  # the last failed write, as said
        self._writing = anyio.Lock()
        if path is not None:
            self._load(path)

    def left(self, phy_id: int) -> int:
        """How many resets the chip may have now."""
        return self.resets - len(self._recent(phy_id))

    async def spend(self, phy_id: int) -> None:
        """A reset of the chip starts now: counted at once, and written down before this returns."""
        self._recent(phy_id).append(self.clock())
        if self.path is not None:
            async with self._writing:  # one write at a time (they share the temporary file), the latest last
                # Each chip's resets in the window, as Unix times (read on the loop).
                offset = self.wall_clock() - self.clock()
                document = {
                    str(phy): [round(t + offset, 3) for t in self._recent(phy)] for phy in sorted(self._spent)
                }
                await anyio.to_thread.run_sync(self._write, self.path, json.dumps(document) + "\n")

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

    # -- the file ----------------------------------------------------------------------

    def _load(self, path: Path) -> None:
        """The resets an earlier run spent, moved onto this run's clock."""
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError, ValueError) as error:
            log.warning(
                "hot-reset budget file %s cannot be read (%s): every chip starts with %d resets",
                path,
                error,
                self.resets,
                extra={"path": str(path)},
            )
            return
        now = self.wall_clock()
        offset = self.clock() - now  # this run's clock minus Unix time
        for phy, times in document.items() if isinstance(document, dict) else ():
            if not phy.isdigit() or not isinstance(times, list):
                continue
            recent = sorted(t for t in times if isinstance(t, (int, float)) and now - self.window < t <= now)
            if recent:
                self._spent[int(phy)] = deque(t + offset for t in recent[-self.resets :])

    def _write(self, path: Path, text: str) -> None:
        """Write the file (blocking: a worker thread runs it); a failure is said once, kept in memory."""
        try:
            write_atomically(path, text, durable=True)
        except OSError as error:
            if str(error) != self._write_problem:
                log.warning(
                    "hot-reset budget file %s cannot be written (%s): the budget is kept in memory only, "
                    "so a restarted plugin starts with %d resets per chip",
                    path,
                    error,
                    self.resets,
                    extra={"path": str(path)},
                )
            self._write_problem = str(error)
        else:
            self._write_problem = ""
