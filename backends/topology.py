"""A chip's place in the node's interconnect: the topology unit it shares a fast link with.

Collective operations of a multi-NPU job run well only inside one such unit,
so the preference answer to the kubelet (``ascend_plugin.offers.placement``) keeps a
request inside as few units as it can. There are three kinds of unit:

* **ring**: an HCCS ring of 4 chips by physical id (0-3, 4-7) on a
  first-generation 910 server;
* **card**: the chips sharing one DCMI ``card_id``: the four 310 of an Atlas
  300I, the two 310P3 of an Atlas 300I Duo, the two dies of an A3 module, the
  single chip of a 310B board or a 300I Pro;
* **mesh**: the whole node (910B / Atlas A2, full mesh of 8); a box with more
  than 8 such chips is split into groups of 8 by physical id (``phy_id // 8``).

Which kind a chip gets is data, :data:`UNIT_RULES`: family name plus a
chip-name pattern, first match wins. A chip no rule names (a family added
without rules, a chip name no rule knows) gets its card: a physical grouping
every chip has, and on servers with one chip per card it simply expresses no
preference. Unit sizes depend on the
whole node (chips per card, 16-chip boxes), so :func:`assign_units` takes
every chip of the node at once.
"""

from __future__ import annotations

import collections
import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from backends.chips import Chip

RING_SIZE = 4  # chips per HCCS ring of a first-generation 910 server
MESH_GROUP_SIZE = 8  # chips per full-mesh group of a 910B box


class UnitKind(enum.Enum):
    """How the chips of a unit are linked."""

    RING = "ring"
    CARD = "card"
    MESH = "mesh"


class TopologyError(ValueError):
    """The chip facts given cannot describe one node."""


@dataclass(frozen=True)
class TopologyUnit:
    """One unit of a node: its kind, its number, and how many chips the node has in it.

    ``index`` is the ring number (``phy_id // 4``), the DCMI card id, or the
    mesh group (``phy_id // 8`` on boxes of more than 8, else 0). ``size`` is
    the unit's full size on this node, free or not: placement compares it with
    a unit's free chips to tell a whole free unit from a fragment.
    """

    kind: UnitKind
    index: int
    size: int

    @property
    def label(self) -> str:
        """How logs name the unit, e.g. ``ring 1`` or ``card 3``."""
        return f"{self.kind.value} {self.index}"


@dataclass(frozen=True)
class UnitRule:
    """Chips of ``family`` whose chip name matches ``chip_name`` (in full) form units of ``kind``."""

    family: str
    chip_name: re.Pattern[str]
    kind: UnitKind


# First match wins; the order inside a family matters ("910B" is a first-generation
# chip, "910B3" an A2 one).
UNIT_RULES: tuple[UnitRule, ...] = (
    UnitRule("910", re.compile(r"910A|910B|910ProA|910ProB|910PremiumA"), UnitKind.RING),
    UnitRule("910", re.compile(r"910B\d|A2G\d"), UnitKind.MESH),
    UnitRule("910", re.compile(r"Ascend910.*"), UnitKind.CARD),
)


@dataclass(frozen=True)
class ChipFacts:
    """What unit assignment needs to know of one chip, as DCMI reports it."""

    phy_id: int
    card_id: int
    chip_name: str
    family: str

    @classmethod
    def of(cls, chip: Chip, family: str) -> ChipFacts:
        """The facts of a discovered chip of ``family``."""
        return cls(phy_id=chip.phy_id, card_id=chip.card_id, chip_name=chip.info.chip_name, family=family)


def unit_kind(family: str, chip_name: str) -> UnitKind:
    """The kind of unit a chip of ``family`` named ``chip_name`` belongs to."""
    for rule in UNIT_RULES:
        if rule.family.lower() == family.lower() and rule.chip_name.fullmatch(chip_name):
            return rule.kind
    return UnitKind.CARD


def assign_units(chips: Iterable[ChipFacts]) -> Mapping[int, TopologyUnit]:
    """The unit of every chip of one node, keyed by physical id.

    Raises :class:`TopologyError` when two chips claim one physical id.
    """
    kinds: dict[int, UnitKind] = {}
    cards: dict[int, int] = {}
    for chip in chips:
        if chip.phy_id in kinds:
            raise TopologyError(f"physical id {chip.phy_id} appears twice among the node's chips")
        kinds[chip.phy_id] = unit_kind(chip.family, chip.chip_name)
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
