"""Reset groups: the chips a hot reset of one chip takes down with it, by the node's topology.

A hot reset (``dcmi_set_device_reset`` on the faulty chip) restarts more than
that chip on most boards: the dies of one card, an HCCS ring, a full-mesh box.
A reset may only start when every chip of the group is free, and each of them
must be waited for until it has booted again, so each family names its group
(:meth:`backends.backend.ChipBackend.reset_group`) with one of the shapes
below. The groups are Huawei's, with two deliberate widenings where a fact
the group depends on is not read yet (a group too wide only waits longer for
its chips to be free; one too narrow would reset a chip under a running job):

=====================  ==========================================================
family                 group
=====================  ==========================================================
910 (A1)               4 consecutive logic ids: ``logic_id // 4``
910B (A2)              8 by logic id; 16 on a node of more than 8 chips (Huawei
                       resets the inference boards without HCCS alone, known by
                       their board id, which is not read: they get the 8 too)
A3                     the chip, its sibling die and both dies of the brother
                       card (``dcmi_get_netdev_brother_device``); the whole
                       node where the driver cannot name the brother, as
                       Huawei's training mode takes it
310P                   the chip's card (both chips of an Atlas 300I Duo)
310, 310B              the chip alone
=====================  ==========================================================

Every function takes the chip and all the node's chips (it among them) and
answers the group ordered by physical id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from backends.chips import Chip
from backends.errors import ChipError


class ResetGroupError(ChipError):
    """The chip asked about is not one of the node's chips given."""


def _ordered(chips: Iterable[Chip]) -> tuple[Chip, ...]:
    return tuple(sorted(chips, key=lambda chip: chip.phy_id))


def _checked(chip: Chip, chips: Sequence[Chip]) -> None:
    if chip not in chips:
        raise ResetGroupError(
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
    """Every chip of the node."""
    _checked(chip, chips)
    return _ordered(chips)
