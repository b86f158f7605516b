"""910B / Atlas A2: a full mesh of 8; 16-chip boxes are two groups of 8, split evenly beyond 9 chips."""

from __future__ import annotations

import pytest
from placement_nodes import mesh_910b

from backends.topology import UnitKind

EIGHT = mesh_910b(8)
SIXTEEN = mesh_910b(16)


def _groups(chips: list[int]) -> tuple[int, int]:
    """How many chips of each group of 8."""
    return sum(phy < 8 for phy in chips), sum(phy >= 8 for phy in chips)


@pytest.mark.parametrize("size", range(1, 9))
def test_an_eight_chip_box_answers_any_size_from_its_free_chips(size: int) -> None:
    free = list(range(8)) if size == 8 else [0, 2, 3, 4, 5, 6, 7]
    chosen = EIGHT.ask(size, free)
    assert len(chosen) == size
    assert set(chosen) <= set(free)


def test_an_eight_chip_box_is_one_unit() -> None:
    assert {EIGHT.unit(device_id) for device_id in EIGHT.all_ids} == {EIGHT.unit("Ascend-0")}
    assert EIGHT.unit("Ascend-0").kind is UnitKind.MESH


@pytest.mark.parametrize("size", range(1, 9))
def test_up_to_eight_chips_stay_in_one_group(size: int) -> None:
    assert 0 in _groups(SIXTEEN.ask(size))


def test_up_to_eight_chips_go_to_the_group_with_the_fewest_free_that_fits() -> None:
    free = [*range(5), *range(8, 16)]  # group 0 has 5 free, group 1 all 8
    assert _groups(SIXTEEN.ask(4, free)) == (4, 0)
    assert _groups(SIXTEEN.ask(5, free)) == (5, 0)
    assert _groups(SIXTEEN.ask(6, free)) == (0, 6)
    assert _groups(SIXTEEN.ask(8, free)) == (0, 8)


@pytest.mark.parametrize(
    ("size", "split"),
    [
        (9, (5, 4)),
        (10, (5, 5)),
        (11, (6, 5)),
        (12, (6, 6)),
        (13, (7, 6)),
        (14, (7, 7)),
        (15, (8, 7)),
        (16, (8, 8)),
    ],
)
def test_nine_to_sixteen_chips_split_evenly_over_the_groups(size: int, split: tuple[int, int]) -> None:
    assert _groups(SIXTEEN.ask(size)) == split


def test_an_even_split_gives_a_short_group_everything_it_has() -> None:
    free = [*range(8), *range(8, 13)]  # group 1 has 5 free
    assert _groups(SIXTEEN.ask(12, free)) == (7, 5)
    # The odd chip goes where it empties a group.
    assert _groups(SIXTEEN.ask(9, [*range(8), *range(8, 13)])) == (4, 5)


def test_a_request_no_group_can_hold_splits_evenly() -> None:
    free = [0, 1, 2, 3, 8, 9, 10, 11]
    assert _groups(SIXTEEN.ask(6, free)) == (3, 3)


def test_must_include_chips_keep_the_split_even() -> None:
    assert _groups(SIXTEEN.ask(12, must=[0, 1, 2, 3, 4, 5, 6])) == (7, 5)
    assert _groups(SIXTEEN.ask(10, must=[15])) == (5, 5)
    assert _groups(SIXTEEN.ask(4, must=[15])) == (0, 4)
    assert _groups(SIXTEEN.ask(4, must=[0, 15])) == (2, 2)


def test_a_box_of_twelve_has_a_group_of_8_and_one_of_4() -> None:
    node = mesh_910b(12)
    assert [node.unit(f"Ascend-{phy}").size for phy in (0, 8)] == [8, 4]
    assert _groups(node.ask(3)) == (0, 3)
