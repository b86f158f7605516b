"""VnpuFamily: the families whose chips can be split into vNPUs (310P, the 910 families).

Static vNPUs (``npu-smi set -t create-vnpu``) are read through VDEV_MNG;
vNPUs made on demand take what the family's templates say (:meth:`VnpuFamily.splits`,
:mod:`backends.vnpu_split`), the driver choosing each vNPU's id, as Huawei's plugin lets it.
"""

from __future__ import annotations

import abc
import logging

from backends.backend import DEVICE_INFO, ChipBackend
from backends.chips import Chip
from backends.errors import NOT_SUPPORTED, DcmiError, SymbolMissing
from backends.family_table import FamilyTable
from backends.library import ALL_VDEVS, VdevInfo
from backends.session import LibrarySession
from backends.vnpu_split import AICORE, MEMORY, ChipSplits, VnpuTemplate

log = logging.getLogger(__name__)


class VnpuFamily(ChipBackend):
    """A family whose chips can carry vNPUs: static ones read through VDEV_MNG, others made on demand."""

    def __init__(self, session: LibrarySession, table: FamilyTable | None = None) -> None:
        super().__init__(session, table)
        self._without_vnpus: set[int] = set()  # chips whose driver answered "not supported" for vNPUs

    def vnpu_absence(self) -> str:
        return ""

    def lists_vnpus(self) -> bool:
        return DEVICE_INFO not in self.missing

    def vnpus(self, chip: Chip) -> list[VdevInfo]:
        """The chip's static vNPUs by id, each described afresh (a freed id may come back with another
        template); none where the driver or the chip has none (said once), any other failure raised."""
        if DEVICE_INFO in self.missing or chip.phy_id in self._without_vnpus:
            return []
        try:
            ids = self.library.vdev_ids(chip.card_id, chip.device_id)
        except SymbolMissing:
            self.missing.add(DEVICE_INFO)
            return self._no_vnpus(chip, f"the driver has no {DEVICE_INFO}")
        except DcmiError as error:
            if error.code != NOT_SUPPORTED:
                raise
            return self._no_vnpus(chip, f"{error.function} answers {error.code} (not supported) for VDEV_MNG")
        return [self.library.vdev_info(chip.card_id, chip.device_id, vdev_id) for vdev_id in sorted(set(ids))]

    def _no_vnpus(self, chip: Chip, why: str) -> list[VdevInfo]:
        self._without_vnpus.add(chip.phy_id)
        log.debug("%s has no static vNPUs: %s", chip.label, why, extra={"chip": chip.phy_id})
        return []

    def create_vnpu(self, chip: Chip, template: str) -> int:
        """Make a vNPU of ``template`` on ``chip``; its id (DcmiError -8001: unknown template, -8020: no
        room)."""
        created = self.library.create_vdev(chip.card_id, chip.device_id, template)
        log.debug("%s: made vNPU %d (%s)", chip.label, created.vdev_id, template, extra={"chip": chip.phy_id})
        return created.vdev_id

    def destroy_vnpu(self, chip: Chip, vdev_id: int) -> None:
        """Destroy vNPU ``vdev_id`` of ``chip`` (never all of them: that id is refused here)."""
        if vdev_id == ALL_VDEVS:
            raise ValueError(f"vNPU id {vdev_id:#x} would destroy every vNPU of {chip.label}")
        self.library.destroy_vdev(chip.card_id, chip.device_id, vdev_id)
        log.debug("%s: destroyed vNPU %d", chip.label, vdev_id, extra={"chip": chip.phy_id})

    def splits(self, chip: Chip, ai_cores: float | None, memory_mb: int | None) -> ChipSplits | None:
        """What ``chip`` can be split into (its own totals, of what some template takes); None where
        unknown or none fits."""
        if ai_cores is None or ai_cores < 1 or ai_cores != round(ai_cores) or not memory_mb or memory_mb < 0:
            return None
        cores = round(ai_cores)
        templates = self.vnpu_templates(cores, memory_mb)
        if not templates:
            return None
        used = {resource for template in templates for resource in template.takes}
        totals = {name: value for name, value in self.chip_totals(cores, memory_mb).items() if name in used}
        return ChipSplits(totals, tuple(sorted(templates, key=lambda t: (t.ai_cores, t.name))))

    @abc.abstractmethod
    def vnpu_templates(self, cores: int, memory_mb: int) -> list[VnpuTemplate]:
        """The templates a chip of ``cores`` AI cores and ``memory_mb`` MiB splits by, with their costs."""

    def chip_totals(self, cores: int, memory_mb: int) -> dict[str, int]:
        """The chip's totals of everything its family's templates may take: AI cores and memory here."""
        return {AICORE: cores, MEMORY: memory_mb}
