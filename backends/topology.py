"""How the node's chips group: the topology unit each shares a fast link with, and what a hot reset takes
down.

Units: an HCCS **ring** of 4 by physical id (first-generation 910), a DCMI **card** (the default: every
chip has one), the **mesh** of a 910B node (groups of 8 by physical id on a box of more). The family says
which (``unit_kind``); sizes depend on the whole node, so :func:`assign_units` takes every chip at once.
Placement keeps a request inside few units (docs/configuration.md "Placement rules"). Reset groups are the
family's choice of the shapes at the end (docs/hot-reset.md "The reset group").
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from backends.chips import Chip
from backends.errors import ChipError

RING_SIZE = 4  # chips per HCCS ring of a first-generation 910 server
MESH_GROUP_SIZE = 8  # chips per full-mesh group of a 910B box


class UnitKind(enum.Enum):
    """How the chips of a unit are linked."""

    RING = "ring"
    CARD = "card"
    MESH = "mesh"


@dataclass(frozen=True)
class TopologyUnit:
    """One unit of a node: its kind, its number (ring, card id, mesh group) and its full size on this node
    (free or not: placement tells a whole free unit from a fragment by it)."""

    kind: UnitKind
    index: int
    size: int

    @property
    def label(self) -> str:
        """How logs name the unit, e.g. ``ring 1`` or ``card 3``."""
        return f"{self.kind.value} {self.index}"


@dataclass(frozen=True)
class ChipFacts:
    """What unit assignment needs to know of one chip: its DCMI ids and the kind of unit its family forms."""

    phy_id: int
    card_id: int
    kind: UnitKind

    @classmethod
    def of(cls, chip: Chip, kind: UnitKind) -> ChipFacts:
        """The facts of a discovered chip whose family forms units of ``kind``."""
        return cls(phy_id=chip.phy_id, card_id=chip.card_id, kind=kind)


def assign_units(chips: Iterable[ChipFacts]) -> Mapping[int, TopologyUnit]:
    """The unit of every chip of one node, keyed by physical id. Raises ChipError when two chips claim one
    physical id."""
    kinds: dict[int, UnitKind] = {}
    cards: dict[int, int] = {}
    for chip in chips:
        if chip.phy_id in kinds:
            raise ChipError(f"physical id {chip.phy_id} appears twice among the node's chips")
        kinds[chip.phy_id] = chip.kind
        cards[chip.phy_id] = chip.card_id
    split_mesh = sum(kind is UnitKind.MESH for kind in kinds.values()) > MESH_GROUP_SIZE

    def index(phy_id: int, kind: UnitKind) -> int:
        if kind is UnitKind.RING:
            return phy_id // RING_SIZE
        if kind is UnitKind.CARD:
            return cards[phy_id]
        return phy_id // MESH_GROUP_SIZE if split_mesh else 0

    keys = {phy_id: (kind, index(phy_id, kind)) for phy_id, kind in kinds.items()}
    sizes = collections.Counter(keys.values())
    return MappingProxyType(
        {
            phy_id: TopologyUnit(kind=kind, index=number, size=sizes[kind, number])
            for phy_id, (kind, number) in sorted(keys.items())
        }
    )


# -- reset groups: the chips a hot reset of one chip takes down with it (docs/hot-reset.md) --------
# Each family names its group with one of these shapes (ChipBackend.reset_group); each takes the chip
# and all the node's chips and answers the group ordered by physical id.


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
