"""First-generation 910 (Atlas 800 9000): requests stay inside one HCCS ring of 4 (phy 0-3, 4-7)."""

from __future__ import annotations

import itertools

import pytest
from placement_nodes import first_gen_910

RING = first_gen_910()


def _free(ring0: int, ring1: int) -> list[int]:
    """The last ``ring0`` chips of ring 0 and the last ``ring1`` of ring 1 are free."""
    return [*range(4 - ring0, 4), *range(8 - ring1, 8)]


def _ring(chips: list[int]) -> set[int]:
    return {phy // 4 for phy in chips}


# The table: the free count of the ring a request is taken from, best first.
ONE_CHIP = (1, 3, 2, 4)
TWO_CHIPS = (2, 4, 3)


@pytest.mark.parametrize(("ring0", "ring1"), list(itertools.permutations(range(1, 5), 2)))
def test_one_chip_goes_to_the_ring_with_1_then_3_then_2_then_4_free(ring0: int, ring1: int) -> None:
    expected_ring = 0 if ONE_CHIP.index(ring0) < ONE_CHIP.index(ring1) else 1
    (chosen,) = RING.ask(1, _free(ring0, ring1))
    assert chosen // 4 == expected_ring


@pytest.mark.parametrize(("ring0", "ring1"), list(itertools.permutations(range(2, 5), 2)))
def test_two_chips_share_a_ring_with_2_then_4_then_3_free(ring0: int, ring1: int) -> None:
    expected_ring = 0 if TWO_CHIPS.index(ring0) < TWO_CHIPS.index(ring1) else 1
    chosen = RING.ask(2, _free(ring0, ring1))
    assert _ring(chosen) == {expected_ring}


def test_equal_rings_give_the_lowest_chips() -> None:
    assert RING.ask(1) == [0]
    assert RING.ask(2) == [0, 1]
    assert RING.ask(2, _free(2, 2)) == [2, 3]


@pytest.mark.parametrize("other", [2, 3, 4])
def test_two_chips_never_split_when_one_ring_has_room(other: int) -> None:
    assert _ring(RING.ask(2, _free(1, other))) == {1}


def test_two_chips_split_over_the_rings_only_when_no_ring_has_two() -> None:
    assert RING.ask(2, [3, 7]) == [3, 7]


def test_four_chips_take_a_ring_with_exactly_4_free() -> None:
    assert RING.ask(4, _free(3, 4)) == [4, 5, 6, 7]
    assert RING.ask(4, _free(4, 3)) == [0, 1, 2, 3]
    assert RING.ask(4) == [0, 1, 2, 3]


def test_four_chips_without_a_free_ring_touch_the_fewest_rings() -> None:
    chosen = RING.ask(4, _free(3, 3))
    assert len(chosen) == 4
    assert _ring(chosen) == {0, 1}
    # The whole free part of one ring, the remainder from the other.
    assert chosen == [1, 2, 3, 5]


def test_eight_chips_take_the_whole_server() -> None:
    assert RING.ask(8) == list(range(8))


def test_three_chips_stay_in_one_ring_preferring_3_free_over_4() -> None:
    assert RING.ask(3, _free(4, 3)) == [5, 6, 7]
    assert RING.ask(3, _free(3, 4)) == [1, 2, 3]
    assert RING.ask(3, _free(2, 4)) == [4, 5, 6]


@pytest.mark.parametrize("size", [5, 6, 7])
def test_five_to_seven_chips_take_a_whole_ring_and_the_rest_from_the_other(size: int) -> None:
    chosen = RING.ask(size)
    assert chosen[:4] == [0, 1, 2, 3]
    assert _ring(chosen[4:]) == {1}
    # With one ring partly taken, the whole free ring is the one used in full.
    chosen = RING.ask(size, _free(3, 4))
    assert set(range(4, 8)) <= set(chosen)


def test_a_must_include_chip_pulls_the_request_into_its_ring() -> None:
    assert RING.ask(2, must=[5]) == [4, 5]
    assert RING.ask(4, must=[6]) == [4, 5, 6, 7]


def test_a_ring_missing_a_chip_counts_its_free_chips_against_its_own_size() -> None:
    # A server whose chip 7 is not enumerated: ring 1 has three chips.
    node = first_gen_910(chips=7)
    assert node.unit("Ascend-4").size == 3
    # Ring 1 can never hold four chips, so a single chip goes there and ring 0 stays whole.
    assert node.ask(1) == [4]
    assert node.ask(4) == [0, 1, 2, 3]
