"""Ascend 310P: the Atlas 300I Pro / Duo / 300V inference cards (310P1, 310P3; China edition: I2)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

from backends.chips import Chip
from backends.family_table import FamilyTable
from backends.library import ResetChannel
from backends.reset_groups import same_card
from backends.vnpu_family import VnpuFamily

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

    A card is the unit and the reset group: an Atlas 300I Duo's two chips are
    reset together (its driver takes the reset on device 0 only, for the card);
    a 300I Pro's card holds one, device 0 too.
    """

    TABLE = ASCEND_310P
    shares_chips: ClassVar[bool] = True

    def reset_group(self, chip: Chip, chips: Sequence[Chip]) -> tuple[Chip, ...]:
        return same_card(chip, chips)

    def hot_reset(self, chip: Chip) -> None:
        """Reset the chip's card through its device 0, the one the driver takes a card's reset on."""
        self.library.reset(chip.card_id, 0, ResetChannel.INBAND)
