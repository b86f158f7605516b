"""How a fake chip splits into vNPUs: the driver's templates, what each takes, what a chip holds.

Huawei's figures where published (the template names each driver accepts; the 310P's per-template cores,
AI CPUs, memory and its 7 vNPUs); elsewhere the template name says it (``vir10_3c_32g``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from backends.library import VdevInfo

# The media engines the 310P counts, in this order: VPC, JPEGD, JPEGE, VENC, VDEC.
MEDIA_310P: Final = (12, 16, 8, 3, 12)

# 310P templates: AI cores, AI CPUs, media engines (Huawei's virtualization table).
_310P: Final[dict[str, tuple[int, int, tuple[int, int, int, int, int]]]] = {
    "vir01": (1, 1, (1, 2, 1, 0, 1)),
    "vir02": (2, 2, (3, 4, 2, 1, 3)),
    "vir02_1c": (2, 1, (3, 4, 2, 0, 3)),
    "vir04": (4, 4, (6, 8, 4, 2, 6)),
    "vir04_3c": (4, 3, (6, 8, 4, 1, 6)),
    "vir04_3c_ndvpp": (4, 3, (0, 0, 0, 0, 0)),
    "vir04_4c_dvpp": (4, 4, (12, 16, 8, 3, 12)),
}
# 910 (A1) templates and their AI CPUs.
_910_AICPU: Final = {"vir02": 1, "vir04": 1, "vir08": 3, "vir16": 7}
# 910B templates per chip bin, as the driver checks them (the chip name stands for the bin here).
_910B_BY_BIN: Final = {
    "24": ("vir06_1c_16g", "vir12_3c_32g"),  # 910B1, 910B2
    "20": ("vir05_1c_16g", "vir10_3c_32g"),  # 910B3
    "20-32g": ("vir05_1c_8g", "vir10_3c_16g", "vir10_3c_16g_nm", "vir10_4c_16g_m"),  # 910B4
}
_A3: Final = ("vir05_1c_16g", "vir06_1c_16g", "vir10_3c_32g", "vir12_3c_32g")

MAX_VDEVS_310P: Final = 7
_IDS_PER_CHIP_310P: Final = 8
_IDS_PER_CHIP: Final = 16
_FIRST_ID: Final = 100

_CORES = re.compile(r"^vir(?P<n>\d+)")
_AICPUS = re.compile(r"_(?P<n>\d+)c(_|$)")
_GIB = re.compile(r"_(?P<n>\d+)g(_|$)")


@dataclass(frozen=True)
class Cost:
    """What one vNPU takes from its chip."""

    aicore: float
    aicpu: int
    memory_mb: int
    media: tuple[int, ...] = ()  # MEDIA_310P's engines; empty where the chip does not count them


@dataclass(frozen=True)
class ChipRoom:
    """Everything a chip has to split, and how its vNPUs are numbered."""

    aicore: float
    aicpu: int
    memory_mb: int
    media: tuple[int, ...]
    max_vdevs: int
    first_id: int
    last_id: int
    templates: dict[str, Cost]

    def cost_of(self, vdev: VdevInfo) -> Cost:
        """What an existing vNPU takes: its template's cost, else its own figures."""
        known = self.templates.get(vdev.template)
        if known is not None:
            return known
        return Cost(aicore=vdev.aicore, aicpu=0, memory_mb=vdev.memory_mb)

    def fits(self, existing: Sequence[VdevInfo], cost: Cost) -> bool:
        """Whether a vNPU costing ``cost`` fits beside ``existing`` (count, cores, CPUs, memory, media)."""
        if len(existing) >= self.max_vdevs:
            return False
        taken = [self.cost_of(vdev) for vdev in existing] + [cost]
        if sum(c.aicore for c in taken) > self.aicore + 1e-6:
            return False
        if sum(c.aicpu for c in taken) > self.aicpu or sum(c.memory_mb for c in taken) > self.memory_mb:
            return False
        return all(
            sum(c.media[index] for c in taken if c.media) <= total for index, total in enumerate(self.media)
        )

    def free_id(self, taken: Iterable[int]) -> int | None:
        """The lowest vNPU id of this chip's range nobody on the node uses."""
        used = set(taken)
        return next((n for n in range(self.first_id, self.last_id + 1) if n not in used), None)


def _named_cost(template: str, chip_aicore: float, chip_memory_mb: int, aicpu: int | None) -> Cost:
    cores = float(_CORES.match(template)["n"])  # type: ignore[index]  # every table name starts virNN
    cpus = _AICPUS.search(template)
    gib = _GIB.search(template)
    memory = int(gib["n"]) * 1024 if gib else int(chip_memory_mb * cores / chip_aicore) if chip_aicore else 0
    return Cost(aicore=cores, aicpu=int(cpus["n"]) if cpus else (aicpu or 1), memory_mb=memory)


def _910b_bin(chip_name: str, aicore: float) -> str:
    digit = chip_name[-1:]
    if digit == "4":
        return "20-32g"
    if digit in ("1", "2") or aicore >= 24:
        return "24"
    return "20"


def chip_room(
    chip_name: str,
    phy_id: int,
    aicore: float | None,
    *,
    memory_mb: int,
    aicpu: int | None = None,
    templates: Sequence[str] | None = None,
) -> ChipRoom | None:
    """The room of a chip called ``chip_name`` (None: its driver makes no vNPUs); ``aicpu`` and
    ``templates`` override the family's.
    """
    if aicore is None or chip_name.startswith("310B") or chip_name == "310":
        return None
    first = _FIRST_ID + phy_id * _IDS_PER_CHIP
    if chip_name.startswith("310P"):
        table = {
            name: Cost(float(cores), cpus, memory_mb * cores // 8, media)
            for name, (cores, cpus, media) in _310P.items()
        }
        room_aicpu, max_vdevs, last = 7, MAX_VDEVS_310P, first + _IDS_PER_CHIP_310P - 1
        media: tuple[int, ...] = MEDIA_310P
    else:
        if chip_name.startswith(("910B", "A2G")):
            names: Sequence[str] = _910B_BY_BIN[_910b_bin(chip_name, aicore)]
        elif chip_name.startswith("Ascend910"):
            names = _A3
        else:
            names = tuple(_910_AICPU)
        table = {name: _named_cost(name, aicore, memory_mb, _910_AICPU.get(name)) for name in names}
        room_aicpu = (
            14 if not chip_name.startswith(("910B", "A2G", "Ascend910")) else (6 if aicore >= 24 else 7)
        )
        media, max_vdevs, last = (), _IDS_PER_CHIP, first + _IDS_PER_CHIP - 1
    if templates is not None:
        table = {
            name: table.get(name) or _named_cost(name, aicore, memory_mb, None)
            for name in templates
            if _CORES.match(name)
        }
    return ChipRoom(
        aicore=aicore,
        aicpu=aicpu if aicpu is not None else room_aicpu,
        memory_mb=memory_mb,
        media=media,
        max_vdevs=max_vdevs,
        first_id=first,
        last_id=last,
        templates=table,
    )
