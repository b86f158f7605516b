"""NUMA: among choices the rules rank equal, the answer keeps to one NUMA node; it never overrides them."""

from __future__ import annotations

import pytest
from placement_nodes import atlas_300i, first_gen_910, mesh_910b, pairs

from ascend_plugin.offers.placement import numa_ids

# 910B box of 8: chips 0-3 on NUMA node 0, 4-7 on node 1.
MESH = mesh_910b(8, numa=lambda phy: phy // 4)


def _numa(chips: list[int]) -> set[int]:
    return {phy // 4 for phy in chips}


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_a_mesh_request_that_fits_one_numa_node_stays_on_it(size: int) -> None:
    assert len(_numa(MESH.ask(size))) == 1
    assert len(_numa(MESH.ask(size, [1, 2, 3, 4, 5, 6, 7]))) == 1


def test_a_mesh_request_goes_to_the_numa_node_with_the_fewest_free_that_fits() -> None:
    assert MESH.ask(2, [0, 1, 2, 5, 6]) == [5, 6]
    assert MESH.ask(1, [0, 1, 2, 5, 6]) == [5]
    # Node 0 cannot hold three, node 1 can.
    assert MESH.ask(3, [0, 1, 4, 5, 6, 7]) == [4, 5, 6]


def test_a_mesh_request_joins_the_numa_node_of_its_must_include_chip() -> None:
    assert MESH.ask(3, must=[6]) == [4, 5, 6]


def test_without_numa_facts_the_mesh_takes_the_lowest_chips() -> None:
    assert mesh_910b(8).ask(3, [0, 1, 4, 5, 6, 7]) == [0, 1, 4]


def test_whole_cards_come_from_the_numa_node_that_can_hold_the_whole_request() -> None:
    # Cards 0, 1 on NUMA node 0; cards 2, 3 on node 1. Card 1 is half taken.
    node = atlas_300i(numa=lambda phy: phy // 8)
    free = [0, 1, 2, 3, 6, 7, *range(8, 16)]
    assert node.ask(8, free) == list(range(8, 16))
    # Without NUMA facts the lowest whole cards are taken.
    assert atlas_300i().ask(8, free) == [0, 1, 2, 3, *range(8, 12)]


def test_a_tie_between_units_goes_to_the_numa_node_of_the_must_include_chip() -> None:
    # 300I Duo cards 0, 1 on NUMA node 0, cards 2, 3 on node 1; one chip free on each of cards 0 and 3.
    node = pairs("310P3", "310P", units=4, numa=lambda phy: phy // 4)
    assert node.ask(2, [1, 4, 7], must=[4]) == [4, 7]
    assert node.ask(2, [1, 3, 7], must=[3]) == [1, 3]


def test_numa_never_overrides_the_card_table() -> None:
    # Cards 0, 1 on NUMA node 0, cards 2, 3 on node 1. The must-include chip 3 is alone on card 0;
    # the second chip goes to card 2 (1 free, first in the table) rather than card 1 (2 free) on node 0.
    node = atlas_300i(numa=lambda phy: phy // 8)
    assert node.ask(2, [3, 6, 7, 11], must=[3]) == [3, 11]
    # With equal ranks, NUMA decides: cards 1 (node 0) and 2 (node 1) both have 1 free.
    assert node.ask(2, [7, 11, 15], must=[15]) == [11, 15]


def test_rings_on_their_own_numa_nodes_follow_the_table() -> None:
    node = first_gen_910(numa=lambda phy: phy // 4)
    assert node.ask(1, [2, 3, 7]) == [7]
    assert node.ask(2, [0, 1, 2, 3, 6, 7]) == [6, 7]


def test_unknown_and_negative_numa_nodes_count_as_no_preference() -> None:
    for numa in (None, -1):
        node = mesh_910b(8, numa=lambda phy, numa=numa: numa)
        assert node.ask(3, [0, 1, 4, 5, 6, 7]) == [0, 1, 4]


@pytest.mark.parametrize(("numa_node", "ids"), [(None, []), (-1, []), (0, [0]), (3, [3])])
def test_device_topology_carries_the_numa_node_when_known(numa_node: int | None, ids: list[int]) -> None:
    assert numa_ids(numa_node) == ids
