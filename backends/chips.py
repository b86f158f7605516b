"""Chips as DCMI addresses them, what a health poll of one returns, and the enumeration recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from backends.errors import DcmiError
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
        return self.value == HEALTH_ABSENT


@dataclass(frozen=True)
class AiCoreFigure:
    """An AI-core count and where it came from."""

    value: float
    source: Literal["vdev_total_resource", "chip_info", "family_nominal"]


@dataclass(frozen=True)
class ChipAddress:
    """Where DCMI reaches one chip, and the physical id that names it (device IDs are made of it)."""

    card_id: int
    device_id: int
    logic_id: int
    phy_id: int

    def chip(self, info: ChipInfo) -> Chip:
        """The chip at this address, with the chip info the driver gave for it."""
        return Chip(self.card_id, self.device_id, self.logic_id, self.phy_id, info)


@dataclass(frozen=True)
class Unnamed:
    """A chip the driver would not name (a whole card when ``device_id`` is None), and its answer."""

    card_id: int
    device_id: int | None
    error: DcmiError

    @property
    def where(self) -> str:
        """``card 3 device 0``; ``card 3`` when its chips could not be counted; ``logical id 5`` on v2."""
        if self.card_id == NO_CARD:
            return f"logical id {self.device_id}"
        return f"card {self.card_id}" + (f" device {self.device_id}" if self.device_id is not None else "")


def address_chips(library: DeviceLibrary) -> tuple[list[ChipAddress], list[Unnamed]]:
    """DCMI's recipe up to the physical ids, in its order: cards -> NPUs per card -> logic id -> physical
    id. Card ids come from the card list only; device ids run 0..n-1 per card (the MCU, at n, is never
    asked). A card or chip the driver will not name is returned apart with its answer, so one bad card
    hides no other; an error of the whole node (the card list, a missing function) is raised."""
    found: list[ChipAddress] = []
    unnamed: list[Unnamed] = []
    for card_id in library.card_list():
        try:
            count = library.device_count(card_id)
        except DcmiError as error:
            unnamed.append(Unnamed(card_id, None, error))
            continue
        for device_id in range(count):
            try:
                logic_id = library.logic_id(card_id, device_id)
                found.append(ChipAddress(card_id, device_id, logic_id, library.phy_id(logic_id)))
            except DcmiError as error:
                unnamed.append(Unnamed(card_id, device_id, error))
    return found, unnamed


def address_chips_v2(library: DeviceLibraryV2) -> tuple[list[ChipAddress], list[Unnamed]]:
    """DCMI v2's: each logical id with its physical id, card and device :data:`NO_CARD`; one whose physical
    id the driver will not give returned apart (its logical id as ``device_id``)."""
    found: list[ChipAddress] = []
    unnamed: list[Unnamed] = []
    for dev_id in library.device_list():
        try:
            found.append(ChipAddress(NO_CARD, NO_CARD, dev_id, library.phy_id(dev_id)))
        except DcmiError as error:
            unnamed.append(Unnamed(NO_CARD, dev_id, error))
    return found, unnamed
