"""What the checks share: the settings, the root they look under, and what earlier checks found.

Every host path goes through :meth:`Context.host` (``--root /host`` in a debug pod).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypeVar

from ascend_plugin.chip_calls import NODE, ChipCallError, ChipCalls
from ascend_plugin.doctor.findings import unmet
from ascend_plugin.settings import Settings, family_overrides
from backends.backend import ChipBackend
from backends.chips import Chip
from backends.errors import ChipError
from backends.families import FamilyTable
from backends.library import VdevInfo
from backends.session import LibrarySession

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class Context:
    """One doctor run's inputs and the facts its checks establish."""

    settings: Settings
    root: Path
    environ: Mapping[str, str]
    calls: ChipCalls
    # Established by the library checks ...
    library_path: Path | None = None
    library_may_load: bool = False  # trusted, or the operator allows untrusted libraries
    library_loads: bool = False
    # ... and by the chip checks.
    session: LibrarySession | None = None  # the library, initialised
    chips: list[Chip] | None = None
    family: FamilyTable | None = None  # the family's own row, before the operator's overrides
    backend: ChipBackend | None = None  # the family's backend over the session, with the overrides
    # ... and by the vNPU check: each chip's static vNPUs, by physical id.
    vnpus: dict[int, tuple[VdevInfo, ...]] | None = None

    def host(self, path: str | PurePosixPath) -> Path:
        """Where the host's ``path`` is seen from here (absolute paths are placed under the root)."""
        posix = PurePosixPath(path)
        if not posix.is_absolute():
            return Path(posix)
        return self.root.joinpath(*posix.parts[1:])

    @staticmethod
    def need(value: T | None, step: str) -> T:
        """``value``, or the skip naming the step that should have produced it."""
        if value is None:
            raise unmet(step)
        return value

    @property
    def table(self) -> FamilyTable:
        """The family's table with the operator's overrides, as the plugin would use it."""
        family = self.need(self.family, "chip-family")
        return family.with_overrides(**family_overrides(self.settings))

    async def release(self, session: LibrarySession) -> None:
        """Close ``session``, unless a call into it is stuck (closing would wait behind that call)."""
        if self.calls.stuck(None) is not None:
            return
        try:
            await self.calls.call(NODE, "close", session.close)
        except (ChipError, ChipCallError) as error:
            log.warning("closing the chip library failed: %s", error)

    async def close(self) -> None:
        """Release the chip library and the call threads."""
        session, self.session, self.backend = self.session, None, None
        try:
            if session is not None:
                await self.release(session)
        finally:
            self.calls.shutdown()
