"""Ascend 310P: the Atlas 300I Pro / Duo / 300V inference cards (310P1, 310P3; China edition: I2)."""

from __future__ import annotations

import collections
import logging
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import ClassVar, Final

from backends.backend import valid
from backends.chips import Chip
from backends.errors import ChipError
from backends.family_table import FamilyTable
from backends.library import ResetChannel, VdevActivity
from backends.topology import same_card
from backends.vnpu_family import VnpuFamily
from backends.vnpu_split import AICORE, AICPU, JPEGD, JPEGE, MEMORY, VDEC, VENC, VPC, VnpuTemplate

log = logging.getLogger(__name__)

MCU_POWER = "dcmi_mcu_get_power_info"

ASCEND_310P = FamilyTable(
    family="310P",
    chip_names=re.compile(r"^(310P\d?|I2\d?)"),
    resource_name="huawei.com/Ascend310P",
    device_id_prefix="Ascend310P",
    accelerator_label="huawei-Ascend310P",
    ai_core_min=8,
    ai_core_max=10,
    ai_core_nominal=8,
)

# What each template takes besides its AI cores, and the chip's totals (Huawei's virtualization table).
_COUNTED: Final = (AICPU, VPC, JPEGD, JPEGE, VENC, VDEC)
_CHIP: Final = (7, 12, 16, 8, 3, 12)
_TEMPLATES: Mapping[str, tuple[int, tuple[int, ...]]] = MappingProxyType(
    {
        "vir01": (1, (1, 1, 2, 1, 0, 1)),
        "vir02": (2, (2, 3, 4, 2, 1, 3)),
        "vir02_1c": (2, (1, 3, 4, 2, 0, 3)),
        "vir04": (4, (4, 6, 8, 4, 2, 6)),
        "vir04_3c": (4, (3, 6, 8, 4, 1, 6)),
        "vir04_3c_ndvpp": (4, (3, 0, 0, 0, 0, 0)),
        "vir04_4c_dvpp": (4, (4, 12, 16, 8, 3, 12)),
    }
)
# A template's memory is its share of the chip's: its AI cores of these (vir04 takes half).
_SHARE_OF: Final = 8
_DUO_CHIPS: Final = 2  # chips on an Atlas 300I Duo card


class Ascend310P(VnpuFamily):
    """310P chips: DDR memory, polled for faults, static vNPUs, chips shareable by device-share mode.
    Telemetry shows the card's power (its MCU) and each vNPU's activity. The card is the unit and the reset
    group: a 300I Duo's two chips reset together, through device 0."""

    TABLE = ASCEND_310P
    shares_chips: ClassVar[bool] = True

    def power(self, chip: Chip) -> float | None:
        """The card's power, read by its MCU (``dcmi_mcu_get_power_info``), as npu-exporter shows 310P's."""
        reading = self.optional(MCU_POWER, chip, lambda chip: self.library.board_power(chip.card_id))
        return reading.watts if reading is not None and valid(reading.deciwatts) is not None else None

    def vnpu_activity(self, chip: Chip, vdev_ids: Sequence[int]) -> list[VdevActivity]:
        """Each vNPU's AI-core use and memory (VDEV_MNG / GET_VDEV_ACTIVITY); one that fails is left out."""
        activity = []
        for vdev_id in vdev_ids:
            try:
                activity.append(self.library.vdev_activity(chip.card_id, chip.device_id, vdev_id))
            except ChipError as error:
                log.debug(
                    "no activity of vNPU %d on %s: %s",
                    vdev_id,
                    chip.label,
                    error,
                    extra={"chip": chip.phy_id},
                )
        return activity

    def reset_group(self, chip: Chip, chips: Sequence[Chip]) -> tuple[Chip, ...]:
        return same_card(chip, chips)

    def has_rank_table(self, chips: Sequence[Chip]) -> bool:
        """On an Atlas 300I Duo node: every card carries two chips."""
        per_card = collections.Counter(chip.card_id for chip in chips)
        return set(per_card.values()) == {_DUO_CHIPS}

    def hot_reset(self, chip: Chip) -> None:
        """Reset the chip's card through its device 0, the one the driver takes a card's reset on."""
        self.library.reset(chip.card_id, 0, ResetChannel.INBAND)

    def vnpu_templates(self, cores: int, memory_mb: int) -> list[VnpuTemplate]:
        """Huawei's seven 310P templates: AI cores, memory share, AI CPUs and the five media engines. The
        chip's 7 AI CPUs are why it holds 7 vNPUs at most: every template takes one or more."""
        return [
            VnpuTemplate(
                name,
                {
                    AICORE: aic,
                    MEMORY: memory_mb * aic // _SHARE_OF,
                    **dict(zip(_COUNTED, others, strict=True)),
                },
            )
            for name, (aic, others) in _TEMPLATES.items()
            if aic <= cores
        ]

    def chip_totals(self, cores: int, memory_mb: int) -> dict[str, int]:
        return super().chip_totals(cores, memory_mb) | dict(zip(_COUNTED, _CHIP, strict=True))
