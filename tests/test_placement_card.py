"""Atlas 300I (Ascend 310): four chips per card; requests stay on one card, larger ones take whole cards."""

from __future__ import annotations

import itertools

import pytest
from placement_nodes import atlas_300i

# Card ids are slot numbers in DCMI, not positions: cards 3, 5, 6 and 9 hold chips 0-3, 4-7, 8-11, 12-15.
NODE = atlas_300i(card_ids=(3, 5, 6, 9))

# The table: the free count of the card a request is taken from, best first.
ORDERS = {1: (1, 3, 2, 4), 2: (2, 3, 4), 3: (3, 4)}


def _free(*counts: int) -> list[int]:
    """The last ``counts[i]`` chips of card position ``i`` are free."""
    return [phy for card, count in enumerate(counts) for phy in range(4 * card + 4 - count, 4 * card + 4)]


def _cards(chips: list[int]) -> list[int]:
    """Card positions used, with repetition, in order."""
    return [phy // 4 for phy in chips]


@pytest.mark.parametrize("size", [1, 2, 3])
@pytest.mark.parametrize("counts", list(itertools.permutations([1, 2, 3, 4])))
def test_a_request_of_up_to_three_goes_to_the_card_the_table_prefers(
    size: int, counts: tuple[int, ...]
) -> None:
    order = ORDERS[size]
    best = min((count for count in counts if count >= size), key=order.index)
    chosen = NODE.ask(size, _free(*counts))
    assert len(chosen) == size
    assert set(_cards(chosen)) == {counts.index(best)}


def test_two_chips_prefer_a_card_with_3_free_over_a_whole_card() -> None:
    # Unlike a 910 ring (2, 4, 3), a 310 pair leaves whole cards whole.
    assert NODE.ask(2, _free(4, 3, 0, 0)) == [5, 6]


def test_four_chips_take_a_whole_free_card() -> None:
    assert NODE.ask(4, _free(3, 4, 3, 4)) == [4, 5, 6, 7]


def test_four_chips_without_a_whole_card_use_the_fewest_cards() -> None:
    chosen = NODE.ask(4, _free(3, 2, 3, 1))
    assert len(set(_cards(chosen))) == 2
    assert chosen == [1, 2, 3, 15]


def test_more_than_a_card_takes_whole_free_cards_first_then_the_table_for_the_rest() -> None:
    assert NODE.ask(8) == list(range(8))
    # Six chips: one whole card, then two from the card the two-chip order prefers (2 free).
    assert NODE.ask(6, _free(4, 3, 2, 4)) == [0, 1, 2, 3, 10, 11]
    # Nine: two whole cards and one chip from the card with 1 free.
    assert _cards(NODE.ask(9, _free(4, 1, 4, 2))) == [0, 0, 0, 0, 1, 2, 2, 2, 2]


def test_more_than_a_card_without_whole_cards_uses_the_fewest_cards() -> None:
    chosen = NODE.ask(6, _free(3, 3, 2, 3))
    assert len(set(_cards(chosen))) == 2


def test_must_include_chips_fill_their_own_card_first() -> None:
    assert NODE.ask(2, must=[9]) == [8, 9]
    assert NODE.ask(3, _free(2, 4, 4, 4), must=[3]) == [2, 3, 4]
    # The must chip's card holds two; the third chip comes from the card the one-chip order prefers.
    assert _cards(NODE.ask(3, _free(2, 4, 3, 4), must=[3])) == [0, 0, 2]


def test_card_ids_decide_units_not_physical_ids() -> None:
    node = atlas_300i(card_ids=(7, 2))
    assert [node.unit(f"Ascend-{phy}").index for phy in (0, 4)] == [7, 2]
    assert node.ask(4, [1, 2, 3, 4, 5, 6, 7]) == [4, 5, 6, 7]
