"""The chips that wait for an operator's reset: what the node's ``ResetInfo`` annotation lists.

A chip is listed when hot reset will not (or can no longer) help it (:class:`Listed`), and leaves the list
once it is healthy again.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from ascend_plugin.changes import Followable
from backends.chips import Chip


class Listed(enum.Enum):
    """Why a chip is listed, as far as hot reset's next step goes."""

    SEPARATED = "separated"  # never reset
    SPENT = "budget spent"  # reset again once the budget allows, listed until healthy
    FAILED = "reset failed"  # not reset again
    RESTORED = "named at start"  # not reset again: a previous run listed it


@dataclass(frozen=True)
class ManualReset:
    """A chip waiting for an operator's reset, and why."""

    chip: Chip
    associated_card: int  # Huawei's AssociatedCardId: the brother card on A3, else -1
    why: str  # in an operator's words, e.g. "its reset failed: ..."
    listed: Listed


class ManualResets(Followable):
    """The chips waiting for an operator's reset, by physical id, with a version that follows every change."""

    def __init__(self) -> None:
        super().__init__()
        self._entries: dict[int, ManualReset] = {}

    def entries(self) -> tuple[ManualReset, ...]:
        """Every chip listed, by physical id."""
        return tuple(self._entries[phy] for phy in sorted(self._entries))

    def __contains__(self, phy_id: object) -> bool:
        return phy_id in self._entries

    def get(self, phy_id: int) -> ManualReset | None:
        return self._entries.get(phy_id)

    def add(self, entry: ManualReset) -> bool:
        """List the chip (its first reason is kept); True when it was not listed yet."""
        if entry.chip.phy_id in self._entries:
            return False
        self._entries[entry.chip.phy_id] = entry
        self._changes.bump()
        return True

    def discard(self, phy_ids: Iterable[int]) -> list[int]:
        """Take these chips off the list; the ones that were on it."""
        gone = [phy for phy in phy_ids if self._entries.pop(phy, None) is not None]
        if gone:
            self._changes.bump()
        return gone
