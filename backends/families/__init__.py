"""The chip families: a :class:`~backends.backend.ChipBackend` implementation each, and how a chip picks one.

Adding a family is one module with one row and one small class, listed in
:data:`FAMILIES` (ARCHITECTURE.md "How to add a chip family"). Detection follows
Huawei's order (310P, 310B, 310, then 910; the 950's names match no other): a
"310B1" also contains "310". Within a family the chip name may pick a
sub-family (:meth:`~backends.backend.ChipBackend.for_chip`: the 910 generations).
"""

from __future__ import annotations

from backends.backend import ChipBackend
from backends.errors import UnknownChipFamily
from backends.families.ascend310 import ASCEND_310, Ascend310
from backends.families.ascend310b import ASCEND_310B, Ascend310B
from backends.families.ascend310p import ASCEND_310P, Ascend310P
from backends.families.ascend910 import ASCEND_910, Ascend910, Ascend910A1, Ascend910A3, Ascend910B
from backends.families.ascend950 import ASCEND_950, Ascend950
from backends.family_table import FamilyTable, HostFile
from backends.library import ChipInfo
from backends.vnpu_family import VnpuFamily

# Detection order matters: see the module docstring.
FAMILIES: tuple[type[ChipBackend], ...] = (Ascend310P, Ascend310B, Ascend310, Ascend910, Ascend950)

FAMILY_NAMES: tuple[str, ...] = tuple(family.TABLE.family for family in FAMILIES)


def family_for(info: ChipInfo, families: tuple[type[ChipBackend], ...] = FAMILIES) -> type[ChipBackend]:
    """The family a chip belongs to, from its chip name (call ``for_chip`` on it for the sub-family)."""
    for family in families:
        if family.claims(info):
            return family
    raise UnknownChipFamily(info.chip_name)


def sharing_families() -> str:
    """The families whose driver shares a chip between containers, e.g. ``310P, 310B``."""
    return ", ".join(family.TABLE.family for family in FAMILIES if family.shares_chips)


def vnpu_families() -> str:
    """The families whose chips can be split into vNPUs, e.g. ``310P, 910``."""
    return ", ".join(family.TABLE.family for family in FAMILIES if issubclass(family, VnpuFamily))


def family_named(name: str, families: tuple[type[ChipBackend], ...] = FAMILIES) -> type[ChipBackend]:
    """The family called ``name`` ("310", "310B", "310P", "910" or "950"), case-insensitively."""
    for family in families:
        if family.TABLE.family.lower() == name.lower():
            return family
    raise ValueError(
        f"unknown chip family {name!r}; allowed: {', '.join(family.TABLE.family for family in families)}"
    )


__all__ = [
    "ASCEND_310",
    "ASCEND_310B",
    "ASCEND_310P",
    "ASCEND_910",
    "ASCEND_950",
    "FAMILIES",
    "FAMILY_NAMES",
    "Ascend310",
    "Ascend310B",
    "Ascend310P",
    "Ascend910",
    "Ascend910A1",
    "Ascend910A3",
    "Ascend910B",
    "Ascend950",
    "FamilyTable",
    "HostFile",
    "family_for",
    "family_named",
    "sharing_families",
    "vnpu_families",
]
