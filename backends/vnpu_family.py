"""VnpuFamily: the families whose chips an operator can split into vNPUs (310P, the 910 families).

An operator carves static vNPUs out of a chip with ``npu-smi set -t
create-vnpu``; the driver lists them through VDEV_MNG (``dcmi_get_device_info``).
A driver without VDEV_MNG, or a chip that answers "not supported", simply has
no vNPUs.
"""

from __future__ import annotations

import logging
from typing import ClassVar

from backends.backend import DEVICE_INFO, ChipBackend
from backends.chips import Chip
from backends.errors import NOT_SUPPORTED, DcmiError, SymbolMissing
from backends.family_table import FamilyTable
from backends.library import VdevInfo
from backends.session import LibrarySession

log = logging.getLogger(__name__)


class VnpuFamily(ChipBackend):
    """A family whose chips can carry static vNPUs, read through VDEV_MNG."""

    splits_into_vnpus: ClassVar[bool] = True

    def __init__(self, session: LibrarySession, table: FamilyTable | None = None) -> None:
        super().__init__(session, table)
        self._without_vnpus: set[int] = set()  # chips whose driver answered "not supported" for vNPUs

    def vnpus(self, chip: Chip) -> list[VdevInfo]:
        """The chip's static vNPUs by id; empty where the driver or the chip has none.

        One VDEV_MNG query lists the ids and one more describes each: every read
        describes every vNPU afresh, since a vNPU destroyed and re-created (the
        driver hands the freed id out again) may carry another template under the
        same id. Any other failure is raised: a vNPU that cannot be described is
        not taken for absent. A driver without ``dcmi_get_device_info``, or a chip
        that answers "not supported", has no vNPUs: said once per chip at debug
        level, and not asked again.
        """
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
