"""Topology units: which chips share a fast link, from DCMI's chip facts and the unit kind of each family."""

from __future__ import annotations

import pytest
from node_harness import backend_of
from placement_nodes import chip_facts
from plugin_harness import FakeNode

from backends.errors import ChipError
from backends.fake import FakeLibrary
from backends.families import FAMILIES, Ascend910, Ascend950, family_for
from backends.library import ChipInfo
from backends.topology import (
    ChipFacts,
    TopologyUnit,
    UnitKind,
    assign_units,
)


def _kind(chip_name: str) -> UnitKind:
    info = ChipInfo("Ascend", chip_name, "V1", 0)
    return family_for(info).for_chip(info).unit_kind


@pytest.mark.parametrize(
    ("chip_name", "kind"),
    [
        *[(name, UnitKind.RING) for name in ("910A", "910B", "910ProA", "910ProB", "910PremiumA")],
        *[(name, UnitKind.MESH) for name in ("910B1", "910B2", "910B3", "910B4", "A2G1", "A2G3")],
        ("Ascend910", UnitKind.CARD),
        ("910C", UnitKind.CARD),  # a 910 name no generation claims: served as A3, by card
        ("310", UnitKind.CARD),
        ("310P3", UnitKind.CARD),
        ("I2", UnitKind.CARD),
        ("310B1", UnitKind.CARD),
        ("310B4", UnitKind.CARD),
    ],
)
def test_each_family_gives_its_chips_their_unit_kind(chip_name: str, kind: UnitKind) -> None:
    assert _kind(chip_name) is kind


@pytest.mark.parametrize("chip_name", ["910A", "910B", "910B3", "A2G2", "Ascend910"])
def test_the_910_names_of_the_generations_are_910_chips(chip_name: str) -> None:
    assert family_for(ChipInfo("Ascend", chip_name, "V1", 0)) is Ascend910


def test_generation_names_are_matched_in_full_not_by_prefix() -> None:
    assert _kind("910B") is UnitKind.RING
    assert _kind("910B3") is UnitKind.MESH
    assert _kind("910A-x") is UnitKind.CARD


def test_a_family_naming_no_unit_kind_gets_cards() -> None:
    named = (Ascend910, Ascend950)  # rings or meshes; every other family names none
    assert {family.unit_kind for family in FAMILIES if family not in named} == {UnitKind.CARD}


def _facts(chip_name: str, family: str, chips: list[tuple[int, int]]) -> list[ChipFacts]:
    return [chip_facts(phy, card, chip_name, family) for phy, card in chips]


def test_first_generation_910_chips_form_two_rings_by_physical_id() -> None:
    units = assign_units(_facts("910ProB", "910", [(phy, 20 + phy) for phy in range(8)]))
    assert [units[phy] for phy in (0, 3, 4, 7)] == [
        TopologyUnit(UnitKind.RING, 0, 4),
        TopologyUnit(UnitKind.RING, 0, 4),
        TopologyUnit(UnitKind.RING, 1, 4),
        TopologyUnit(UnitKind.RING, 1, 4),
    ]
    assert units[5].label == "ring 1"


def test_a_ring_missing_a_chip_is_smaller() -> None:
    units = assign_units(_facts("910A", "910", [(phy, phy) for phy in (0, 1, 2, 3, 4, 6, 7)]))
    assert (units[0].size, units[4].size) == (4, 3)


def test_310_cards_are_units_of_the_chips_sharing_a_card_id() -> None:
    # DCMI card ids are slot numbers: not 0-based, not contiguous.
    chips = [(phy, (3, 8)[phy // 4]) for phy in range(8)]
    units = assign_units(_facts("310", "310", chips))
    assert {units[phy] for phy in range(4)} == {TopologyUnit(UnitKind.CARD, 3, 4)}
    assert {units[phy] for phy in range(4, 8)} == {TopologyUnit(UnitKind.CARD, 8, 4)}


def test_a_mix_of_300i_pro_and_duo_cards_gives_units_of_one_and_two() -> None:
    units = assign_units(_facts("310P3", "310P", [(0, 1), (1, 2), (2, 2)]))
    assert (units[0], units[1], units[2]) == (
        TopologyUnit(UnitKind.CARD, 1, 1),
        TopologyUnit(UnitKind.CARD, 2, 2),
        TopologyUnit(UnitKind.CARD, 2, 2),
    )


def test_a3_dies_pair_up_by_module() -> None:
    units = assign_units(_facts("Ascend910", "910", [(phy, phy // 2) for phy in range(16)]))
    assert len(set(units.values())) == 8
    assert units[14] == units[15] == TopologyUnit(UnitKind.CARD, 7, 2)


def test_a_310b_board_is_one_card_of_one_chip() -> None:
    assert assign_units(_facts("310B1", "310B", [(0, 0)])) == {0: TopologyUnit(UnitKind.CARD, 0, 1)}


@pytest.mark.parametrize(
    ("chips", "groups"),
    [
        (range(8), {0: 8}),
        (range(8, 16), {0: 8}),  # eight chips are one mesh whatever their ids
        (range(16), {0: 8, 1: 8}),
        (range(12), {0: 8, 1: 4}),
    ],
)
def test_910b_chips_are_one_mesh_split_in_groups_of_8_beyond_8(chips: range, groups: dict[int, int]) -> None:
    units = assign_units(_facts("910B3", "910", [(phy, phy) for phy in chips]))
    assert {unit.kind for unit in units.values()} == {UnitKind.MESH}
    assert {unit.index: unit.size for unit in units.values()} == groups
    assert {units[phy].index for phy in chips if phy % 8 == 0} == set(groups)


def test_two_chips_with_one_physical_id_are_refused() -> None:
    with pytest.raises(ChipError, match="physical id 2 appears twice"):
        assign_units(_facts("310", "310", [(2, 0), (2, 1)]))


def test_units_come_from_a_discovered_node(node: FakeNode) -> None:
    # Two Atlas 300I cards in slots 5 and 9, enumerated through the fake library like DCMI.
    node.write(
        {"chip_name": "310", "chips": [{"phy_id": phy, "card_id": 5 if phy < 4 else 9} for phy in range(8)]}
    )
    library = FakeLibrary(node.scenario)
    library.init()
    backend = backend_of(library)
    chips = backend.session.discover()
    units = backend.units(chips)
    assert [units[chip.phy_id] for chip in chips] == [TopologyUnit(UnitKind.CARD, 5, 4)] * 4 + [
        TopologyUnit(UnitKind.CARD, 9, 4)
    ] * 4
