"""Chips as DCMI addresses them, what a health poll of one returns, and the enumeration recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from backends.library import HEALTH_ABSENT, ChipInfo, DeviceLibrary, DeviceLibraryV2

# Synthetic fault code Huawei's plugin records when a card drops off the bus
# (dcmi_get_device_health answering -8012); it classifies as RestartNPU.
CARD_DROPPED_CODE = 0x40F84E00
# The card and device id of a chip DCMI v2 enumerated: v2 has none (Huawei's plugin says -1 too).
NO_CARD = -1


@dataclass(frozen=True)
class Chip:
    """One NPU chip as DCMI addresses it: (card_id, device_id) on v1, logic_id on v2 (card NO_CARD)."""

    card_id: int
    device_id: int
    logic_id: int
    phy_id: int
    info: ChipInfo

    @property
    def label(self) -> str:
        """How logs name this chip: physical id plus its DCMI address."""
        if self.card_id == NO_CARD:
            return f"chip {self.phy_id} (logical id {self.logic_id}, {self.info.chip_name})"
        return f"chip {self.phy_id} (card {self.card_id}, device {self.device_id}, {self.info.chip_name})"

    @property
    def npu_smi(self) -> str:
        """The chip as ``npu-smi`` takes it: ``-i <card> -c <device>``, on a 950 ``-i <logical id>``."""
        if self.card_id == NO_CARD:
            return f"-i {self.logic_id}"
        return f"-i {self.card_id} -c {self.device_id}"


@dataclass(frozen=True)
class HealthReading:
    """What one health poll of a chip returned."""

    value: int  # dcmi_get_device_health; HEALTH_ABSENT when the card dropped
    codes: tuple[int, ...]  # current fault codes
    # False when the driver cannot list fault codes (no dcmi_get_device_errorcode_v2):
    # then an empty ``codes`` says nothing about whether a fault has cleared.
    codes_known: bool = True

    @property
    def dropped(self) -> bool:
        """The chip is gone from the bus."""
        return self.value == HEALTH_ABSENT


@dataclass(frozen=True)
class AiCoreFigure:
    """An AI-core count and where it came from."""

    value: float
    source: Literal["vdev_total_resource", "chip_info", "family_nominal"]


def enumerate_chips(library: DeviceLibrary) -> list[Chip]:
    """DCMI's enumeration recipe: cards -> NPUs per card -> logic id -> physical id.

    Card ids come only from the card list (they may be slot numbers); device
    ids run 0..n-1 per card, where n counts NPUs only, so the MCU (at index n)
    is never asked for. The result is in DCMI's order (card, then device).
    """
    chips: list[Chip] = []
    for card_id in library.card_list():
        for device_id in range(library.device_count(card_id)):
            logic_id = library.logic_id(card_id, device_id)
            chips.append(
                Chip(
                    card_id=card_id,
                    device_id=device_id,
                    logic_id=logic_id,
                    phy_id=library.phy_id(logic_id),
                    info=library.chip_info(card_id, device_id),
                )
            )
    return chips


def enumerate_chips_v2(library: DeviceLibraryV2) -> list[Chip]:
    """DCMI v2's enumeration: the logical ids of the device list, each with its physical id.

    v2 has no cards: every chip's card and device id is :data:`NO_CARD`.
    """
    return [
        Chip(NO_CARD, NO_CARD, dev_id, library.phy_id(dev_id), library.chip_info(dev_id))
        for dev_id in library.device_list()
    ]
