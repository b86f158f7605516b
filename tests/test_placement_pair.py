"""Two chips per unit: the Atlas 300I Duo card (two 310P3) and the A3 module (two Ascend910 dies)."""

from __future__ import annotations

import pytest
from placement_nodes import Node, pairs

from backends.topology import UnitKind

NODES = {
    "300I Duo": pairs("310P3", "310P", units=4),
    "A3 module": pairs("Ascend910", "910", units=8),
}


@pytest.fixture(params=sorted(NODES))
def node(request: pytest.FixtureRequest) -> Node:
    return NODES[request.param]


def _units(chips: list[int]) -> list[int]:
    return [phy // 2 for phy in chips]


def test_the_unit_is_the_card(node: Node) -> None:
    unit = node.unit("Ascend-3")
    assert (unit.kind, unit.index, unit.size) == (UnitKind.CARD, 1, 2)


def test_one_chip_goes_to_a_unit_with_one_free_before_a_whole_one(node: Node) -> None:
    assert node.ask(1, [0, 1, 3, 4, 5]) == [3]
    assert node.ask(1, [0, 1, 2, 3]) == [0]


def test_two_chips_take_a_whole_free_unit(node: Node) -> None:
    # Units 0 and 2 each have one chip free, unit 3 is whole.
    assert node.ask(2, [1, 4, 6, 7]) == [6, 7]


def test_two_chips_split_only_when_no_unit_is_whole(node: Node) -> None:
    assert node.ask(2, [1, 4]) == [1, 4]


def test_larger_requests_take_whole_units_first_and_the_fewest_units(node: Node) -> None:
    # Unit 0 half, units 1 and 2 whole, unit 3 half.
    free = [1, 2, 3, 4, 5, 6]
    assert node.ask(4, free) == [2, 3, 4, 5]
    # Three: one whole unit and the remaining chip from a half-free unit, not a second whole one.
    chosen = node.ask(3, free)
    assert sorted(_units(chosen)) == [0, 1, 1]


def test_a_must_include_chip_brings_its_partner(node: Node) -> None:
    assert node.ask(2, must=[5]) == [4, 5]
