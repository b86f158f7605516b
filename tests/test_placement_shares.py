"""Shares and vNPUs: several devices per chip, placed in their chip's unit, one chip's devices together."""

from __future__ import annotations

from placement_nodes import Node, mesh_910b, pairs


def _chips(node: Node, chosen: list[str]) -> list[int]:
    return [node.phy(device_id) for device_id in chosen]


def _free(node: Node, per_chip: dict[int, int]) -> list[str]:
    """The last ``count`` shares of each chip are free."""
    return [device_id for phy, count in per_chip.items() for device_id in node.ids([phy])[4 - count :]]


MESH = mesh_910b(8, shares=4)


def test_a_share_goes_to_the_chip_with_the_fewest_free_shares() -> None:
    free = _free(MESH, {0: 4, 1: 1, 2: 3})
    assert MESH.topology.preferred(free, [], 1) == ["Ascend-1-3"]


def test_shares_of_one_request_come_from_one_chip_when_one_can_hold_them() -> None:
    free = _free(MESH, {0: 4, 1: 1, 2: 2, 3: 3})
    assert _chips(MESH, MESH.topology.preferred(free, [], 2)) == [2, 2]
    assert _chips(MESH, MESH.topology.preferred(free, [], 3)) == [3, 3, 3]
    assert _chips(MESH, MESH.topology.preferred(free, [], 4)) == [0, 0, 0, 0]


def test_a_request_larger_than_a_chip_takes_whole_chips_first() -> None:
    free = _free(MESH, {0: 4, 1: 1, 2: 4})
    assert _chips(MESH, MESH.topology.preferred(free, [], 5)) == [0, 0, 0, 0, 1]


def test_a_must_include_share_pulls_the_request_onto_its_chip() -> None:
    free = _free(MESH, {0: 4, 1: 1, 2: 4})
    assert MESH.topology.preferred(free, ["Ascend-2-1"], 2) == ["Ascend-2-0", "Ascend-2-1"]


def test_shares_belong_to_their_chips_unit() -> None:
    duo = pairs("310P3", "310P", units=2, shares=2)  # two cards of two chips, two shares each
    assert duo.unit("Ascend-3-1") == duo.unit("Ascend-2-0")
    # Card 0 has three shares free, card 1 all four: three shares fit card 0 exactly.
    free = [*duo.ids([0, 1])[1:], *duo.ids([2, 3])]
    assert _chips(duo, duo.topology.preferred(free, [], 3)) == [0, 1, 1]
    assert _chips(duo, duo.topology.preferred(free, [], 4)) == [2, 2, 3, 3]
