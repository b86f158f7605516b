"""Is a reset group free? Each of its chips must be: no container holds it, no process, no reset.

What cannot be known counts as busy (a process list the driver cannot give, holders not known yet): a
reset under a running job would take its chips mid-step. At the moment of a reset the kubelet is asked
afresh, and a chip handed over since counts as held.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import anyio

from ascend_plugin.chip_calls import ChipCallError, ChipCalls
from ascend_plugin.holdings.held import HeldChips
from backends.backend import ChipBackend
from backends.chips import Chip
from backends.errors import ChipError

HOLDERS_UNKNOWN = "which chips pods hold is not known on this node"
HANDED = "was just handed to a container (the kubelet does not list it yet)"


@dataclass(frozen=True)
class Busy:
    """Why one chip of a group is not free."""

    phy_id: int
    why: str


class GroupCheck:
    """Asks whether a group is free, with the calls its answer needs (process lists, on each chip's lane)."""

    def __init__(self, held: HeldChips | None, backend: ChipBackend, calls: ChipCalls) -> None:
        self.held = held
        self.backend = backend
        self.calls = calls

    async def busy(
        self, group: Sequence[Chip], resetting: Collection[int], *, afresh: bool = False
    ) -> list[Busy]:
        """Why chips of ``group`` are not free (empty: free); ``resetting``: chips under a reset.

        ``afresh``: the kubelet is asked now (the moment of the reset). The driver is asked for
        processes only when nothing else holds the group.
        """
        if afresh and self.held is not None:
            await self.held.refresh()  # not answered: the last listing and the chips handed over since stand
        found: list[Busy] = []
        for chip in group:
            if chip.phy_id in resetting:
                found.append(Busy(chip.phy_id, "is being reset"))
            elif self.held is None or not self.held.known:
                found.append(Busy(chip.phy_id, HOLDERS_UNKNOWN))
            elif chip.phy_id in self.held.just_handed:
                found.append(Busy(chip.phy_id, HANDED))
            elif chip.phy_id in self.held.chips:
                found.append(Busy(chip.phy_id, "a pod holds it"))
        if found:
            return found
        answers: dict[int, Busy | None] = {}

        async def ask(chip: Chip) -> None:
            answers[chip.phy_id] = await self.processes(chip)

        async with anyio.create_task_group() as tasks:
            for chip in group:
                tasks.start_soon(ask, chip)
        return [busy for chip in group if (busy := answers[chip.phy_id]) is not None]

    async def processes(self, chip: Chip) -> Busy | None:
        """Busy when a process runs on the chip, or its process list cannot be read; else None."""
        try:
            processes = await self.calls.call(chip.phy_id, "processes", self.backend.processes, chip)
        except (ChipError, ChipCallError) as error:
            return Busy(chip.phy_id, f"its process list cannot be read ({error})")
        if not processes:
            return None
        pids = ", ".join(str(process.pid) for process in processes[:8])
        more = f" and {len(processes) - 8} more" if len(processes) > 8 else ""
        return Busy(chip.phy_id, f"{len(processes)} process(es) run on it (PID {pids}{more})")
