"""Reset groups: the chips a hot reset of one chip takes down with it, in the shapes the families name.

Each family names its group with one of these (:meth:`backends.backend.ChipBackend.reset_group`);
the groups per family are in docs/hot-reset.md "The reset group". Each function
takes the chip and all the node's chips and answers the group ordered by physical id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from backends.chips import Chip
from backends.errors import ChipError


def _ordered(chips: Iterable[Chip]) -> tuple[Chip, ...]:
    return tuple(sorted(chips, key=lambda chip: chip.phy_id))


def _checked(chip: Chip, chips: Sequence[Chip]) -> None:
    if chip not in chips:
        raise ChipError(
            f"{chip.label} is not among the node's chips (physical ids "
            f"{', '.join(str(each.phy_id) for each in chips) or 'none'})"
        )


def alone(chip: Chip, chips: Sequence[Chip]) -> tuple[Chip, ...]:
    """The chip by itself: nothing else restarts with it."""
    _checked(chip, chips)
    return (chip,)


def same_card(chip: Chip, chips: Sequence[Chip]) -> tuple[Chip, ...]:
    """Every chip sharing the chip's DCMI card id."""
    return cards(chip, chips, ())


def cards(chip: Chip, chips: Sequence[Chip], card_ids: Iterable[int]) -> tuple[Chip, ...]:
    """Every chip on one of ``card_ids`` (the chip's own card among them)."""
    _checked(chip, chips)
    wanted = {chip.card_id, *card_ids}
    return _ordered(each for each in chips if each.card_id in wanted)


def logic_block(chip: Chip, chips: Sequence[Chip], size: int) -> tuple[Chip, ...]:
    """The chips whose logic ids fall in the chip's block of ``size``: ``logic_id // size`` alike."""
    _checked(chip, chips)
    return _ordered(each for each in chips if each.logic_id // size == chip.logic_id // size)


def whole_node(chip: Chip, chips: Sequence[Chip]) -> tuple[Chip, ...]:
    _checked(chip, chips)
    return _ordered(chips)
