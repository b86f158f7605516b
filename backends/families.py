"""The four chip families and how a chip name picks one.

Each family is a :class:`ChipBackend` subclass carrying its table. Detection
follows Huawei's order (310P, then 310B, then 310, then 910), because a
"310B1" also contains "310" and a "310P3" too.
"""

from __future__ import annotations

import re
from types import MappingProxyType

from backends.base import ChipBackend, FamilyTable
from backends.errors import UnknownChipFamily
from backends.library import ChipInfo

_DEFAULT_SHARED = ("/dev/hisi_hdc", "/dev/devmm_svm", "/dev/dvpp_cmdlist")

# The 310B SoC's media and system nodes, each handed over when present.
_310B_EXTRA_NODES = (
    "/dev/pngd", "/dev/venc", "/dev/upgrade", "/dev/sys", "/dev/svm0", "/dev/vdec", "/dev/vpc",
    "/dev/ts_aisle", "/dev/log_drv", "/dev/acodec", "/dev/ai", "/dev/ao", "/dev/vo", "/dev/hdmi",
)  # fmt: skip


class Ascend310PBackend(ChipBackend):
    """Atlas 300I Pro / Duo / 300V cards: 310P1, 310P3 (China edition: I2)."""

    CHIP_NAME = re.compile(r"^(310P\d?|I2\d?)")
    TABLE = FamilyTable(
        family="310P",
        resource_name="huawei.com/Ascend310P",
        device_id_prefix="Ascend310P",
        accelerator_label="huawei-Ascend310P",
        ai_core_min=8,
        ai_core_max=10,
        ai_core_nominal=8,
    )


class Ascend310BBackend(ChipBackend):
    """Atlas 200I A2 / 200I DK A2 / 500 A2 boards: one 310B1 or 310B4 SoC with one AI core.

    Huawei reports 310B as 310, so existing pods ask for huawei.com/Ascend310.
    """

    CHIP_NAME = re.compile(r"310B")
    TABLE = FamilyTable(
        family="310B",
        resource_name="huawei.com/Ascend310",
        device_id_prefix="Ascend310",
        accelerator_label="huawei-Ascend310",
        ai_core_min=1,
        ai_core_max=1,
        ai_core_nominal=1,
        manager_nodes=("/dev/davinci_manager_docker", "/dev/davinci_manager"),
        shared_nodes=_DEFAULT_SHARED + _310B_EXTRA_NODES,
        runtime_env=MappingProxyType({"ASCEND_ALLOW_LINK": "True"}),
    )


class Ascend310Backend(ChipBackend):
    """Atlas 300I (model 3000/3010) cards: four Ascend 310 chips each."""

    CHIP_NAME = re.compile(r"310")
    TABLE = FamilyTable(
        family="310",
        resource_name="huawei.com/Ascend310",
        device_id_prefix="Ascend310",
        accelerator_label="huawei-Ascend310",
        ai_core_min=2,
        ai_core_max=2,
        ai_core_nominal=2,
    )


class Ascend910Backend(ChipBackend):
    """Training chips: 910 (A1), 910B1-4 / A2Gx (A2), Ascend910 93xx (A3)."""

    CHIP_NAME = re.compile(r"^(910|A2G\d|Ascend910)")
    TABLE = FamilyTable(
        family="910",
        resource_name="huawei.com/Ascend910",
        device_id_prefix="Ascend910",
        accelerator_label="huawei-Ascend910",
        ai_core_min=20,
        ai_core_max=32,
        ai_core_nominal=20,
        memory_query="hbm",
        fault_subscription=True,
    )


# Detection order matters: see the module docstring.
FAMILIES: tuple[type[ChipBackend], ...] = (
    Ascend310PBackend,
    Ascend310BBackend,
    Ascend310Backend,
    Ascend910Backend,
)

FAMILY_NAMES: tuple[str, ...] = tuple(family.TABLE.family for family in FAMILIES)


def family_for(info: ChipInfo) -> type[ChipBackend]:
    """The family a chip belongs to, from its chip name."""
    for family in FAMILIES:
        if family.claims(info):
            return family
    raise UnknownChipFamily(info.chip_name)


def family_named(name: str) -> type[ChipBackend]:
    """The family called ``name`` ("310", "310B", "310P" or "910")."""
    for family in FAMILIES:
        if family.TABLE.family.lower() == name.lower():
            return family
    raise ValueError(f"unknown chip family {name!r}; allowed: {', '.join(FAMILY_NAMES)}")
