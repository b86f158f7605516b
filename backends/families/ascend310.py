"""Ascend 310: the Atlas 300I (model 3000/3010) inference card, four chips to a card."""

from __future__ import annotations

import re
from collections.abc import Sequence

from backends.backend import ChipBackend
from backends.chips import Chip
from backends.family_table import FamilyTable
from backends.topology import alone

ASCEND_310 = FamilyTable(
    family="310",
    chip_names=re.compile(r"310"),
    resource_name="huawei.com/Ascend310",
    device_id_prefix="Ascend310",
    accelerator_label="huawei-Ascend310",
    fault_key="huawei.com/Ascend310P-Fault",  # Huawei's quirk: readers look there
    ai_core_min=2,
    ai_core_max=2,
    ai_core_nominal=2,
)


class Ascend310(ChipBackend):
    """310 chips: DDR memory, polled for faults (the driver sends no events), units by card. The four chips
    of a card share nothing a reset takes down: each resets alone."""

    TABLE = ASCEND_310

    def reset_group(self, chip: Chip, chips: Sequence[Chip]) -> tuple[Chip, ...]:
        return alone(chip, chips)

    def card_count(self, chips: Sequence[Chip]) -> int | None:
        """None: npu-exporter shows no ``machine_card_nums`` for this family."""
        return None
