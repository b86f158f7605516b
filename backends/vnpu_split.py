"""What a chip can be split into on demand: its resources, and what a vNPU of each template takes of them.

:class:`ChipSplits` is the driver's rule (-8020) as data, so a scheduler never asks for what it refuses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

AICORE: Final = "aicore"
MEMORY: Final = "memory"  # MiB
AICPU: Final = "aicpu"
# The 310P's media engines, as Huawei's virtualization table names them.
VPC: Final = "vpc"
JPEGD: Final = "jpegd"
JPEGE: Final = "jpege"
VENC: Final = "venc"
VDEC: Final = "vdec"
# The 910B's media (DVPP) as one counter, in AI-core shares: a template takes its AI cores' share
# of the chip's media, one with all media (``_m``) the whole, one without (``_nm``) none.
DVPP: Final = "dvpp"

_CORES = re.compile(r"^vir(?P<n>\d+)(_|$)")
_MEMORY_GB = re.compile(r"_(?P<n>\d+)g(_|$)")
_ALL_MEDIA = re.compile(r"_(m|dvpp)$")
_NO_MEDIA = re.compile(r"_(nm|ndvpp)$")


@dataclass(frozen=True)
class VnpuTemplate:
    """One of Huawei's vNPU templates on one chip, e.g. ``vir02_1c``, and what a vNPU of it takes."""

    name: str
    takes: Mapping[str, int]

    @property
    def ai_cores(self) -> int:
        return self.takes[AICORE]

    @property
    def memory_mb(self) -> int:
        return self.takes.get(MEMORY, 0)


@dataclass(frozen=True)
class ChipSplits:
    """A chip's resources and the templates it can be split by (in the family's order, smallest first).

    ``places``: how many partitions of each template are offered at most (0: as many as fit).
    """

    totals: Mapping[str, int]
    templates: tuple[VnpuTemplate, ...]
    places: int = 0

    def template(self, name: str) -> VnpuTemplate | None:
        return next((template for template in self.templates if template.name == name), None)

    def offered(self, template: VnpuTemplate) -> int:
        """How many partitions of ``template`` are offered: as many as fit, at most ``places``."""
        return min(self.most(template), self.places) if self.places else self.most(template)

    def most(self, template: VnpuTemplate) -> int:
        """How many vNPUs of ``template`` the chip holds at most, by every resource counted."""
        return min(
            (self.totals[resource] // amount for resource, amount in template.takes.items() if amount > 0),
            default=0,
        )


def template_cores(name: str) -> int | None:
    """The AI cores a template's name says: ``vir10_3c_32g`` -> 10; None for a name not ``virNN...``."""
    found = _CORES.match(name)
    return int(found["n"]) if found else None


def named_memory_mb(name: str) -> int | None:
    """The memory a template's name says, in MiB: ``vir10_3c_32g`` -> 32768; None without ``_<N>g``."""
    found = _MEMORY_GB.search(name)
    return int(found["n"]) * 1024 if found else None


def media_share(name: str, cores: int, chip_cores: int) -> int:
    """A 910B template's share of the chip's media, in AI cores: all (``_m``), none (``_nm``), its own."""
    if _ALL_MEDIA.search(name):
        return chip_cores
    if _NO_MEDIA.search(name):
        return 0
    return cores


def media_variant(name: str) -> bool:
    """Whether a template comes with all media (``_m``, ``_dvpp``) or none (``_nm``, ``_ndvpp``)."""
    return bool(_ALL_MEDIA.search(name) or _NO_MEDIA.search(name))


def divides_evenly(name: str, chip_cores: int, chip_memory_mb: int) -> bool:
    """Whether a template splits the chip the same way by AI cores and by memory (within an eighth).
    Huawei's 910B and A3 templates are made per chip bin: ``vir05_1c_16g`` is a quarter of a 20-core 64 GB
    chip, ``vir05_1c_8g`` of a 20-core 32 GB one."""
    cores, memory = template_cores(name), named_memory_mb(name)
    if not cores or not memory or chip_cores % cores:
        return False
    expected = memory * (chip_cores // cores)
    return math.isclose(expected, chip_memory_mb, rel_tol=0.125)
