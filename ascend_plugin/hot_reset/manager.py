"""HotResetManager: watch the chips, and reset each one whose fault calls for it once its group is free.

The idle time counts from when the group was last seen busy, not when first seen free (docs/hot-reset.md).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio
from anyio.abc import TaskGroup

from ascend_plugin.changes import Changes, Followed, first_change
from ascend_plugin.chip_calls import ChipCallError, ChipCalls
from ascend_plugin.holdings.held import HeldChips
from ascend_plugin.hot_reset.budget import ResetBudget
from ascend_plugin.hot_reset.freeness import HOLDERS_UNKNOWN, Busy, GroupCheck
from ascend_plugin.hot_reset.manual import Listed, ManualReset, ManualResets
from ascend_plugin.hot_reset.notices import NoticeLog
from ascend_plugin.hot_reset.rules import Remedy, remedy
from ascend_plugin.hot_reset.sequence import (
    GroupReset,
    LookAgain,
    PutOff,
    ResetParts,
    Shown,
    shown_at_once,
)
from ascend_plugin.hot_reset.stats import ResetStats
from ascend_plugin.inventory.inventory import ChipState, Inventory
from ascend_plugin.resilience import Backoff, Retrier
from backends.backend import ChipBackend
from backends.chips import Chip
from backends.errors import ChipError

log = logging.getLogger(__name__)

RECHECK: Final = 1.0  # seconds between two looks at a busy group (processes end without telling anyone)
# Asking the driver again for a reset group it could not give: soon at first, then every half minute.
GROUP_BACKOFF: Final = Backoff(RECHECK, 30.0)
RESTORED = "named in the node's ResetInfo annotation when the plugin started"
UNREAD = "the node's ResetInfo annotation is not read yet (a chip a previous run named there is not reset)"


@dataclass(frozen=True)
class Waiting:
    """A chip that needs a reset, waiting: its group free since when (None: busy now), why not yet."""

    free_since: float | None
    busy: str = ""
    not_before: float = 0.0  # not tried again before this time: a reset put off, a group not read


class HotResetManager:
    """Hot reset of the node's chips (``hot_reset: on``)."""

    def __init__(
        self,
        backend: ChipBackend,
        calls: ChipCalls,
        inventory: Inventory,
        *,
        held: HeldChips | None,
        idle: float,
        look_again: LookAgain,
        shown: Shown = shown_at_once,
        reads_annotation: bool = False,
        clock: Callable[[], float] = time.monotonic,
        budget_file: Path | None = None,
    ) -> None:
        """``held``: which chips pods hold, asked afresh at the moment of a reset (None: not known here)."""
        self.inventory = inventory
        self.held = held
        self.idle = idle
        self.clock = clock
        self.manual = ManualResets()
        self.notices = NoticeLog()
        self.stats = ResetStats()
        self.budget = ResetBudget(clock, path=budget_file)
        self.parts = ResetParts(
            backend,
            calls,
            inventory,
            GroupCheck(held, backend, calls),
            look_again,
            shown,
            clock,
            self.budget,
            self.manual,
            self.notices,
            self.stats,
        )
        self.waiting: dict[int, Waiting] = {}  # faulty chip -> its wait for its group
        self.active: dict[int, GroupReset] = {}  # faulty chip -> its reset, while it runs
        self._groups: dict[int, tuple[Chip, ...]] = {}
        # Chips whose reset group could not be read: the retrier (said once), and when to ask again.
        self._group_retries: dict[int, Retrier] = {}
        self._group_due: dict[int, float] = {}
        self._wake = Changes()
        # With the Kubernetes side on, nothing is reset before the annotation a previous run left is read.
        self.restored = not reads_annotation

    # -- what others ask -------------------------------------------------------------------

    def wake(self) -> None:
        """Look again now (a reset ended, the annotation was read, a test moved the clock)."""
        self._wake.bump()

    def resetting(self) -> set[int]:
        """The chips under a reset now (a chip still booting after its reset timed out, too)."""
        return {phy for run in self.active.values() for phy in run.out}

    def in_progress(self) -> list[str]:
        """One line per reset under way, where it is and for how long (for /readyz)."""
        now = self.clock()
        return [self.active[phy].describe(now) for phy in sorted(self.active)]

    async def restore(self, phy_ids: Iterable[int]) -> None:
        """The chips the node's annotation named when the plugin started; those still unhealthy stay named."""
        for phy in phy_ids:
            state = self.inventory.get(phy)
            if state is None or state.healthy:
                continue
            if await self._list(state, RESTORED, Listed.RESTORED):
                self._say(logging.WARNING, phy, "%s stays out of hot reset: %s", RESTORED)
        self.restored = True
        self.wake()

    # -- running ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Watch and reset until the inventory closes."""
        log.info(
            "hot reset is on: a chip at RestartRequest, RestartBusiness, FreeRestartNPU or RestartNPU "
            "is reset once its reset group has been free for %g s",
            self.idle,
            extra={"idle": self.idle},
        )
        if self.held is None:
            log.warning(
                "hot reset is on but %s in this mode: no chip is reset (see docs/hot-reset.md)",
                HOLDERS_UNKNOWN,
            )
        async with anyio.create_task_group() as tasks:
            while not self.inventory.closed:
                held_version = self.held.version if self.held is not None else 0
                seen = (self.inventory.version, held_version, self._wake.version)
                delay = await self._look(tasks)
                await self._until_change(seen, delay)
            tasks.cancel_scope.cancel()

    async def _look(self, tasks: TaskGroup) -> float | None:
        """Act on every chip as it is now; seconds until the next look is due (None: at the next change)."""
        states = self.inventory.chips()
        gone = self.manual.discard(state.phy_id for state in states if state.healthy)
        for phy in gone:
            self._say(logging.INFO, phy, "%s is healthy again: off the node's ResetInfo annotation")
        due: list[float] = []
        for state in states:
            wait = await self._act(tasks, state)
            if wait is not None:
                due.append(wait)
        return min(due) if due else None

    async def _act(self, tasks: TaskGroup, state: ChipState) -> float | None:
        """What one chip needs now; seconds until it needs a look again (None: at the next change)."""
        phy = state.phy_id
        wanted = remedy(state)
        listed = self.manual.get(phy)
        if wanted is Remedy.MANUAL:
            self.waiting.pop(phy, None)
            level = state.health.worst_level.name
            await self._list(state, f"{level}: a separated chip is never reset", Listed.SEPARATED)
            return None
        if wanted is Remedy.NONE or (listed is not None and listed.listed is not Listed.SPENT):
            self.waiting.pop(phy, None)
            return None
        if phy in self.resetting():
            return None
        if not self.restored:
            self.waiting[phy] = Waiting(None, UNREAD)
            return None
        if self.budget.left(phy) == 0:
            self.waiting.pop(phy, None)
            spent = f"{self.budget.resets} hot resets in the last 6 hours did not mend it"
            await self._list(state, spent, Listed.SPENT)
            return self.budget.next_in(phy)
        return await self._consider(tasks, state)

    async def _consider(self, tasks: TaskGroup, state: ChipState) -> float | None:
        """Start the chip's reset if its group is free and idle long enough; else when to look again."""
        phy = state.phy_id
        now = self.clock()
        before = self.waiting.get(phy)
        if before is not None and now < before.not_before:
            return before.not_before - now
        group = await self._group(state.chip)
        resetting = self.resetting()
        if group is None:
            busy = [Busy(phy, "its reset group cannot be read from the driver")]
        else:
            busy = await self.parts.check.busy(group, resetting)
        if busy:
            why = "; ".join(f"{self.parts.name(each.phy_id)} {each.why}" for each in busy)
            if before is None or before.busy != why:
                message = "%s needs a hot reset (%s); waiting for its reset group to be free: %s"
                self._say(logging.INFO, phy, message, state.health.reason, why, busy=why)
            if group is None:  # asked of the driver again once its backoff is up, not at every look
                due = self._group_due[phy]
                self.waiting[phy] = Waiting(None, why, due)
                return max(due - now, 0.0)
            self.waiting[phy] = Waiting(None, why)
            return RECHECK
        assert group is not None
        since = before.free_since if before is not None and before.free_since is not None else now
        self.waiting[phy] = Waiting(since)
        left = since + self.idle - now
        if left > 0:
            if before is None or before.free_since is None:
                message = (
                    "%s needs a hot reset (%s); its reset group %s is free: reset in %.0f s if it stays free"
                )
                self._say(
                    logging.INFO, phy, message, state.health.reason, ", ".join(self.parts.names(group)), left
                )
            return min(left, RECHECK)
        del self.waiting[phy]

        def others() -> set[int]:
            return {chip for other, run in self.active.items() if other != phy for chip in run.out}

        run = self.active[phy] = GroupReset(self.parts, state.chip, group, others)
        tasks.start_soon(self._reset, run, name=f"hot reset of chip {phy}")
        return None

    async def _reset(self, run: GroupReset) -> None:
        phy = run.chip.phy_id
        try:
            outcome = await run.run()
            if isinstance(outcome, PutOff):
                self.waiting[phy] = Waiting(None, outcome.why, self.clock() + RECHECK)
        finally:
            self.active.pop(phy, None)
            self.wake()

    async def _group(self, chip: Chip) -> tuple[Chip, ...] | None:
        """The chip's reset group, asked of the driver until it answers (None: said once, asked again)."""
        phy = chip.phy_id
        if phy not in self._groups:
            chips = [state.chip for state in self.inventory.chips()]
            backend = self.parts.backend
            try:
                group = await self.parts.calls.call(phy, "reset_group", backend.reset_group, chip, chips)
            except (ChipError, ChipCallError) as error:
                retry = self._group_retries.setdefault(
                    phy, Retrier(f"reset group of {self.parts.name(phy)}", GROUP_BACKOFF, logger=log)
                )
                problem = f"the reset group of {chip.label} cannot be read"
                delay = retry.failure(
                    problem,
                    level=logging.WARNING,
                    said=f"{problem}: {error}",
                    device=self.parts.name(phy),
                    error=str(error),
                )
                self._group_due[phy] = self.clock() + delay
                return None
            if phy in self._group_retries:
                log.info(
                    "the reset group of %s is read after %d failed attempt(s)",
                    chip.label,
                    self._group_retries.pop(phy).succeeded(),
                    extra={"device": self.parts.name(phy)},
                )
                del self._group_due[phy]
            self._groups[phy] = tuple(group)
        return self._groups[phy]

    async def _list(self, state: ChipState, why: str, listed: Listed) -> bool:
        """Name the chip for an operator's reset; True when it was not named yet."""
        if state.phy_id in self.manual:
            return False
        associated = await self.parts.associated_card(state.chip)
        added = self.manual.add(ManualReset(state.chip, associated, why, listed))
        if added and listed is not Listed.RESTORED:
            message = "%s needs an operator's reset: %s; named in the node's ResetInfo annotation"
            self._say(logging.WARNING, state.phy_id, message, why, reason=why)
        return added

    async def _until_change(self, seen: tuple[int, int, int], delay: float | None) -> None:
        """Sleep until the chips, the held chips or the wake-ups moved past ``seen``, or ``delay`` is up."""
        version, held_version, woken = seen
        followed: list[tuple[Followed, int]] = [(self.inventory, version), (self._wake, woken)]
        if self.held is not None:
            followed.append((self.held, held_version))
        await first_change(*followed, within=math.inf if delay is None else delay)

    def _say(self, level: int, phy_id: int, message: str, *args: object, **extra: str) -> None:
        """Log ``message`` about the chip, its name first, with the chip's name as the device field."""
        log.log(
            level, message, self.parts.name(phy_id), *args, extra={"device": self.parts.name(phy_id), **extra}
        )
