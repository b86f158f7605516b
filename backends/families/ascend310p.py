"""Ascend 310P: the Atlas 300I Pro / Duo / 300V inference cards (310P1, 310P3; China edition: I2)."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import ClassVar

from backends.chips import Chip
from backends.errors import ChipError
from backends.family_table import FamilyTable
from backends.library import ResetChannel, VdevActivity
from backends.readings import valid
from backends.reset_groups import same_card
from backends.vnpu_family import VnpuFamily

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


class Ascend310P(VnpuFamily):
    """310P chips: DDR memory, polled for faults, static vNPUs, chips shareable by device-share mode.

    Their telemetry shows the card's power (read by its MCU) and each vNPU's activity.

    A card is the unit and the reset group: an Atlas 300I Duo's two chips are
    reset together (its driver takes the reset on device 0 only, for the card);
    a 300I Pro's card holds one, device 0 too.
    """

    TABLE = ASCEND_310P
    shares_chips: ClassVar[bool] = True

    def power(self, chip: Chip) -> float | None:
        """The card's power, read by its MCU (``dcmi_mcu_get_power_info``), as npu-exporter shows 310P's."""
        reading = self.optional(MCU_POWER, chip, lambda card, _device: self.library.board_power(card))
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

    def hot_reset(self, chip: Chip) -> None:
        """Reset the chip's card through its device 0, the one the driver takes a card's reset on."""
        self.library.reset(chip.card_id, 0, ResetChannel.INBAND)
