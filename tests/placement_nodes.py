"""Nodes for the placement tests: real unit assignment over chip facts, asked in physical ids.

A chip's unit kind is the one its family's backend names, picked from the chip
name as discovery picks it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ascend_plugin.offers.placement import DevicePlace, NodeTopology
from backends.families import family_named
from backends.library import ChipInfo
from backends.topology import ChipFacts, TopologyUnit, assign_units

NumaOf = Callable[[int], int | None]


@dataclass
class Node:
    """A node's offered devices and its topology; device ``Ascend-<phy>`` (or ``-<phy>-<share>``)."""

    places: list[DevicePlace]
    topology: NodeTopology
    shares: int

    @classmethod
    def build(
        cls,
        chip_name: str,
        family: str,
        chips: Sequence[tuple[int, int]],
        numa: NumaOf | None = None,
        shares: int = 1,
    ) -> Node:
        """``chips`` are (physical id, card id) pairs; each chip offers ``shares`` devices."""
        return cls.of([chip_facts(phy, card, chip_name, family) for phy, card in chips], numa, shares)

    @classmethod
    def of(cls, chips: Sequence[ChipFacts], numa: NumaOf | None = None, shares: int = 1) -> Node:
        """A node of these chips, each offering ``shares`` devices."""
        units = assign_units(chips)
        places = [
            DevicePlace(
                _device_id(chip.phy_id, share, shares),
                chip.phy_id,
                units[chip.phy_id],
                numa(chip.phy_id) if numa else None,
            )
            for chip in chips
            for share in range(shares)
        ]
        return cls(places, NodeTopology(places), shares)

    @property
    def all_ids(self) -> list[str]:
        return [place.id for place in self.places]

    def ids(self, phys: Iterable[int]) -> list[str]:
        """The device IDs of these chips (every share of each)."""
        wanted = set(phys)
        return [place.id for place in self.places if place.phy_id in wanted]

    def phy(self, device_id: str) -> int:
        return next(place.phy_id for place in self.places if place.id == device_id)

    def unit(self, device_id: str) -> TopologyUnit:
        return next(place.unit for place in self.places if place.id == device_id)

    def ask(self, size: int, free: Iterable[int] | None = None, must: Iterable[int] = ()) -> list[int]:
        """The physical ids preferred for ``size`` whole chips out of ``free`` (default: all)."""
        available = self.all_ids if free is None else self.ids(free)
        return [self.phy(device_id) for device_id in self.topology.preferred(available, self.ids(must), size)]


def chip_facts(phy: int, card: int, chip_name: str, family: str) -> ChipFacts:
    """A chip of ``family`` named ``chip_name``, with the unit kind the family's backend gives it."""
    implementation = family_named(family).for_chip(ChipInfo("Ascend", chip_name, "V1", 0))
    return ChipFacts(phy, card, implementation.unit_kind)


def _device_id(phy: int, share: int, shares: int) -> str:
    return f"Ascend-{phy}" if shares == 1 else f"Ascend-{phy}-{share}"


def first_gen_910(chips: int = 8, numa: NumaOf | None = None) -> Node:
    """An Atlas 800 (model 9000): 910A chips, one per card, two HCCS rings."""
    return Node.build("910A", "910", [(phy, phy) for phy in range(chips)], numa)


def atlas_300i(card_ids: Sequence[int] = (0, 1, 2, 3), numa: NumaOf | None = None) -> Node:
    """Atlas 300I (Ascend 310) cards of four chips, with the given DCMI card ids."""
    chips = [(4 * position + device, card) for position, card in enumerate(card_ids) for device in range(4)]
    return Node.build("310", "310", chips, numa)


def pairs(chip_name: str, family: str, units: int, numa: NumaOf | None = None, shares: int = 1) -> Node:
    """Two chips per card: Atlas 300I Duo (310P3) cards or A3 modules (Ascend910 dies)."""
    return Node.build(chip_name, family, [(phy, phy // 2) for phy in range(2 * units)], numa, shares)


def mesh_910b(chips: int = 8, numa: NumaOf | None = None, shares: int = 1) -> Node:
    """An Atlas A2 box of 910B3 chips, one per card."""
    return Node.build("910B3", "910", [(phy, phy) for phy in range(chips)], numa, shares)
