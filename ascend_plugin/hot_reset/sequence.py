"""One hot reset of one chip, step by step (docs/hot-reset.md, "The sequence").

A failure names the chip for an operator (:mod:`.manual`); a chip not booted stays out until it is.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import anyio

from ascend_plugin.chip_calls import ChipCallError, ChipCalls
from ascend_plugin.hot_reset.budget import ResetBudget
from ascend_plugin.hot_reset.freeness import GroupCheck
from ascend_plugin.hot_reset.manual import Listed, ManualReset, ManualResets
from ascend_plugin.hot_reset.notices import NoticeLog, ResetStage
from ascend_plugin.hot_reset.stats import ResetStats, Result
from ascend_plugin.inventory.inventory import Inventory
from backends.backend import ChipBackend
from backends.chips import Chip
from backends.errors import ChipError, SymbolMissing
from backends.library import BootStatus

log = logging.getLogger(__name__)

BOOT_TIMEOUT: Final = 180.0  # seconds the group may take to boot again (Huawei's, in its current version)
BOOT_POLL: Final = 0.25  # seconds between two reads of the boot status
BOOT_RECHECK: Final = 2.0  # ... of a chip still booting after the boot wait timed out
CANNOT_SAY: Final = "unknown (the driver has no dcmi_get_device_boot_status)"
MARK_OUT_WAIT: Final = 10.0  # seconds the reset waits for the kubelet to hear the group is out

Shown = Callable[[int], Awaitable[None]]  # returns once the faces show this inventory version
LookAgain = Callable[[Sequence[int]], Awaitable[None]]  # reads these chips afresh, returns once judged


@dataclass(frozen=True)
class PutOff:
    """A reset that did not go ahead, and why (the group was busy after all, the chip reads healthy)."""

    why: str


async def shown_at_once(version: int) -> None:
    """For a plugin with no face to wait for: nothing to tell."""


@dataclass(frozen=True)
class ResetParts:
    """Everything one reset uses, shared by all resets of the node."""

    backend: ChipBackend
    calls: ChipCalls
    inventory: Inventory
    check: GroupCheck
    look_again: LookAgain
    shown: Shown
    clock: Callable[[], float]
    budget: ResetBudget
    manual: ManualResets
    notices: NoticeLog
    stats: ResetStats

    def name(self, phy_id: int) -> str:
        return self.inventory.table.chip_id(phy_id)

    def names(self, chips: Sequence[Chip]) -> tuple[str, ...]:
        return tuple(self.name(chip.phy_id) for chip in chips)

    async def associated_card(self, chip: Chip) -> int:
        """The card reset with ``chip``, for the ResetInfo annotation; -1 where the driver cannot say."""
        try:
            return await self.calls.call(chip.phy_id, "associated_card", self.backend.associated_card, chip)
        except (ChipError, ChipCallError):
            return -1


class GroupReset:
    """The hot reset of ``chip`` with its ``group``; ``others`` says which chips other resets have now."""

    def __init__(
        self, parts: ResetParts, chip: Chip, group: Sequence[Chip], others: Callable[[], Collection[int]]
    ):
        self.parts = parts
        self.chip = chip
        self.group = tuple(group)
        self.others = others
        self.device = parts.name(chip.phy_id)
        self.members = parts.names(self.group)
        self.out = tuple(member.phy_id for member in self.group)  # the chips this reset has (or will) out
        self.since = parts.clock()
        self.stage = "its health read once more"  # where it is, for /readyz

    def describe(self, now: float) -> str:
        """``hot reset of Ascend910-0 (group ...) for 12 s: <stage>``: a reset in progress, for /readyz."""
        return (
            f"hot reset of {self.device} (reset group {', '.join(self.members)}) for "
            f"{now - self.since:.0f} s: {self.stage}"
        )

    async def run(self) -> Result | PutOff:
        """Reset the chip: how it ended, or why it was put off (then nothing is spent, no reset asked)."""
        try:
            why_not = await self._health_calls_for_it()
            if why_not:
                return self._put_off(why_not)
            parts = self.parts
            phy_ids = [chip.phy_id for chip in self.group]
            parts.inventory.set_resetting(phy_ids, True)
            try:
                self.stage = "its group marked out, the kubelet being told"
                await self._tell_the_kubelet(parts.inventory.version)
                self.stage = "its group checked once more for pods and processes"
                busy = await parts.check.busy(self.group, self.others(), afresh=True)
                if busy:
                    return self._put_off("; ".join(f"{parts.name(each.phy_id)} {each.why}" for each in busy))
                return await self._reset()
            finally:
                parts.inventory.set_resetting(phy_ids, False)
        finally:
            self.out = ()

    async def _health_calls_for_it(self) -> str:
        """Why the chip's health says no reset now (empty: it says reset): health 0 means it mended itself."""
        parts = self.parts
        try:
            reading = await parts.calls.call(
                self.chip.phy_id, "read_health", parts.backend.read_health, self.chip
            )
        except (ChipError, ChipCallError) as error:
            return f"its health cannot be read ({error})"
        if reading.value == 0 and not reading.dropped:
            return "it reads health 0 (Huawei's rule: a chip whose health is 0 is not reset)"
        return ""

    def _put_off(self, why: str) -> PutOff:
        log.info("hot reset of %s put off: %s", self.device, why, extra=self._extra(reason=why))
        return PutOff(why)

    async def _tell_the_kubelet(self, version: int) -> None:
        with anyio.move_on_after(MARK_OUT_WAIT) as waited:
            await self.parts.shown(version)
        if waited.cancelled_caught:
            log.warning(
                "the kubelet was not seen told within %g s that %s are out for a hot reset; resetting "
                "anyway (Allocate refuses them meanwhile)",
                MARK_OUT_WAIT,
                ", ".join(self.members),
                extra=self._extra(),
            )

    async def _reset(self) -> Result:
        parts = self.parts
        left = parts.budget.left(self.chip.phy_id) - 1
        await parts.budget.spend(self.chip.phy_id)
        state = parts.inventory.get(self.chip.phy_id)
        fault = state.health.reason if state is not None else ""
        message = (
            f"hot reset of {self.device} started, with its reset group {', '.join(self.members)} "
            f"({fault}); {left} of {parts.budget.resets} resets left in the next 6 hours"
        )
        parts.notices.append(ResetStage.START, self.device, self.members, message)
        log.warning(message, extra=self._extra(resets_left=left))
        started = parts.clock()
        try:
            await parts.calls.call(self.chip.phy_id, "hot_reset", parts.backend.hot_reset, self.chip)
        except (ChipError, ChipCallError) as error:
            return await self._failed(Result.FAILED, f"the driver refused it: {error}", None)
        self.stage = "reset asked, waiting for its group to boot"
        late = await self._booted(started + BOOT_TIMEOUT)
        if late:
            said = "; ".join(f"{parts.name(phy)} boot status {status}" for phy, status in late.items())
            result = await self._failed(
                Result.TIMEOUT, f"not back within {BOOT_TIMEOUT:g} s: {said}", parts.clock() - started
            )
            await self._until_booted(late)
            return result
        await parts.look_again([chip.phy_id for chip in self.group])
        seconds = parts.clock() - started
        parts.stats.record(Result.COMPLETE, seconds)
        after = parts.inventory.get(self.chip.phy_id)
        if after is None or after.health.healthy:
            now = "healthy"
        else:
            now = f"still unhealthy ({after.health.reason})"
        message = (
            f"hot reset of {self.device} complete in {seconds:.1f} s: {', '.join(self.members)} answered "
            f"again; {self.device} is {now}"
        )
        parts.notices.append(ResetStage.COMPLETE, self.device, self.members, message)
        log.info(message, extra=self._extra(seconds=round(seconds, 3)))
        return Result.COMPLETE

    async def _booted(self, deadline: float) -> dict[int, int | str]:
        """Wait for boot status 16 on every chip: empty once they say it, else who did not by ``deadline``."""
        parts = self.parts
        while True:
            late = await self._late(self.group)
            if not late or parts.clock() >= deadline:
                return late
            await anyio.sleep(BOOT_POLL)

    async def _until_booted(self, late: Mapping[int, int | str]) -> None:
        """After the boot wait timed out: the chips that booted go back, the others once they do (health 0
        comes long before a chip can run anything); without a boot status, through their verdicts."""
        parts = self.parts
        back = [chip.phy_id for chip in self.group if chip.phy_id not in late]
        if back:
            await parts.look_again(back)
            parts.inventory.set_resetting(back, False)
        self.out = tuple(late)
        names = ", ".join(parts.name(phy) for phy in late)
        self.stage = f"not back in time; {names} out until they finish booting"
        log.warning(
            "%s stay out until they finish booting after the hot reset of %s (boot status read every %g s)",
            names,
            self.device,
            BOOT_RECHECK,
            extra=self._extra(late=[parts.name(phy) for phy in late]),
        )
        booting = [chip for chip in self.group if chip.phy_id in late]
        while booting:
            await anyio.sleep(BOOT_RECHECK)
            still = await self._late(booting)
            booting = [chip for chip in booting if chip.phy_id in still and still[chip.phy_id] != CANNOT_SAY]
        await parts.look_again(list(late))
        log.info(
            "%s finished booting after the hot reset of %s: back through the normal health path",
            names,
            self.device,
            extra=self._extra(),
        )

    async def _late(self, chips: Sequence[Chip]) -> dict[int, int | str]:
        """The chips of ``chips`` whose boot status is not 16 (system start finished), with what they say."""
        statuses = {chip.phy_id: await self._boot_status(chip) for chip in chips}
        return {phy: status for phy, status in statuses.items() if status != BootStatus.SYSTEM_START_FINISH}

    async def _boot_status(self, chip: Chip) -> int | str:
        """The chip's boot status, or why it cannot be read (the wait goes on: a booting chip may not say)."""
        try:
            return await self.parts.calls.call(
                chip.phy_id, "boot_status", self.parts.backend.boot_status, chip
            )
        except SymbolMissing:
            return CANNOT_SAY
        except (ChipError, ChipCallError) as error:
            return f"unknown ({error})"

    async def _failed(self, result: Result, why: str, seconds: float | None) -> Result:
        parts = self.parts
        parts.stats.record(result, seconds)
        associated = await parts.associated_card(self.chip)
        parts.manual.add(ManualReset(self.chip, associated, f"its hot reset failed: {why}", Listed.FAILED))
        message = (
            f"hot reset of {self.device} failed: {why}; it stays out, named in the node's ResetInfo "
            f"annotation, until it is healthy again (by hand: npu-smi set -t reset {self.chip.npu_smi})"
        )
        parts.notices.append(ResetStage.FAILED, self.device, self.members, message)
        log.error(message, extra=self._extra(result=result.value))
        return result

    def _extra(self, **more: object) -> dict[str, object]:
        return {"device": self.device, "group": list(self.members), **more}
