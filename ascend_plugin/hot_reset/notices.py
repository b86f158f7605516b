"""What a hot reset tells: its start, end and failure, as Huawei's ``resetRecord`` Events name them.

The log keeps the latest notices, numbered: a follower that starts late or comes back after an outage
posts what it missed, in bounded memory.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass
from typing import Final

from ascend_plugin.changes import Changes

KEPT: Final = 64  # notices the log holds for a follower that is behind


class ResetStage(enum.StrEnum):
    """The Event reason of each stage (Huawei's), and whether it is a Warning."""

    START = "HotResetStart"
    COMPLETE = "HotResetComplete"
    FAILED = "HotResetFailed"

    @property
    def event_type(self) -> str:
        """Huawei posts the start and a failure as Warnings, a completed reset as Normal."""
        return "Normal" if self is ResetStage.COMPLETE else "Warning"


@dataclass(frozen=True)
class ResetNotice:
    """One stage of one hot reset."""

    sequence: int
    stage: ResetStage
    device: str  # the faulty chip, e.g. Ascend910-3
    group: tuple[str, ...]  # every chip of its reset group
    message: str


class NoticeLog:
    """The latest notices, numbered, with a wait for the next one."""

    def __init__(self, kept: int = KEPT) -> None:
        self._notices: deque[ResetNotice] = deque(maxlen=kept)
        self._changes = Changes()

    def append(self, stage: ResetStage, device: str, group: tuple[str, ...], message: str) -> ResetNotice:
        notice = ResetNotice(self._changes.version, stage, device, group, message)
        self._notices.append(notice)
        self._changes.bump()
        return notice

    def since(self, sequence: int) -> list[ResetNotice]:
        """The notices numbered ``sequence`` or later that are still kept."""
        return [notice for notice in self._notices if notice.sequence >= sequence]

    async def wait_beyond(self, sequence: int) -> None:
        """Return once a notice numbered ``sequence`` or later exists."""
        while self._changes.version <= sequence:
            await self._changes.wait_for_change(self._changes.version)
