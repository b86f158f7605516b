"""Ascend 910: the training chips, in three generations that differ in interconnect and reset groups.

A1 (``910A``, ``910B``, ``910ProA``, ``910ProB``, ``910PremiumA``: two HCCS rings
of 4), A2 (``910B1``-``910B4``, ``A2Gx``: a full mesh of 8) and A3 (``Ascend910``,
model ``93xx``: two dies per card) share one row, fault events, static vNPUs,
HBM and the RoCE port; the chip name picks the generation, and a 910 name neither
A1 nor A2 claims is served as A3, whose unit and reset group assume the least.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar, Final

import backends.vnpu_split as split
from backends.backend import UTILIZATION_PERIOD_S, ChipBackend, MemoryKind, Utilization
from backends.chips import Chip
from backends.errors import ChipError
from backends.family_table import FamilyTable
from backends.library import ChipInfo, FaultHandler, SuperPodInfo, UtilizationType
from backends.topology import MESH_GROUP_SIZE, RING_SIZE, UnitKind, cards, logic_block, whole_node
from backends.vnpu_family import VnpuFamily
from backends.vnpu_split import VnpuTemplate

ASCEND_910 = FamilyTable(
    family="910",
    chip_names=re.compile(r"^(910|A2G\d|Ascend910)"),
    resource_name="huawei.com/Ascend910",
    device_id_prefix="Ascend910",
    accelerator_label="huawei-Ascend910",
    ai_core_min=20,
    ai_core_max=32,
    ai_core_nominal=20,
    network_keys=True,
)

# An A2 box of more than 8 chips (Atlas 200T A2 Box16) resets all 16 together.
_BOX16_RESET = 16


# Huawei's vNPU templates per generation (mind-cluster's table of valid names; the A1 ones as its docs list
# them). The number after "vir" is AI cores, before "g" memory in GB; "_m" / "_nm" with or without DVPP.
A1_TEMPLATES: Final = ("vir02", "vir04", "vir08", "vir16")
A2_TEMPLATES: Final = (
    "vir03_1c_8g", "vir05_1c_8g", "vir05_1c_16g", "vir06_1c_16g", "vir10_3c_16g", "vir10_3c_16g_nm",
    "vir10_3c_32g", "vir10_4c_16g_m", "vir12_3c_32g",
)  # fmt: skip
A3_TEMPLATES: Final = ("vir05_1c_16g", "vir06_1c_16g", "vir10_3c_32g", "vir12_3c_32g")


class Ascend910(VnpuFamily):
    """What every 910 generation shares: fault events, HBM, static vNPUs. Abstract: a generation serves."""

    TABLE = ASCEND_910
    memory_kind: ClassVar[MemoryKind] = MemoryKind.HBM
    # The period utilization call samples over UTILIZATION_PERIOD_S; DCMI does not say whether it returns
    # at once (the driver keeping the figure) or after the period.
    utilization_sampling_s: ClassVar[float] = float(UTILIZATION_PERIOD_S)

    @classmethod
    def for_chip(cls, info: ChipInfo) -> type[ChipBackend]:
        """A1 or A2 where the chip name is one of theirs (in full), else A3."""
        for generation in (Ascend910A1, Ascend910B):
            if generation.CHIP_NAMES.fullmatch(info.chip_name):
                return generation
        return Ascend910A3

    def subscribe_faults(self, handler: FaultHandler) -> bool:
        return self.subscribe_driver_events(handler)

    def has_rank_table(self, chips: Sequence[Chip]) -> bool:
        return True

    # -- telemetry --------------------------------------------------------------------------

    def utilization(self, chip: Chip) -> Utilization:
        return self.multi_rate_utilization(chip)

    def network_status(self, chip: Chip) -> int | None:
        """The training card's RoCE port (``dcmi_get_device_network_health``)."""
        return self.network_health(chip)

    # The generation's template names; A1 overrides vnpu_templates, whose templates give no memory.
    TEMPLATES: ClassVar[tuple[str, ...]] = ()

    def vnpu_templates(self, cores: int, memory_mb: int) -> list[VnpuTemplate]:
        """The generation's templates that divide this chip's AI cores and memory alike, with what each
        takes. Media are counted (in AI-core shares) where the templates come with and without DVPP
        (910B4's ``_m`` / ``_nm``); AI CPUs are left to the driver (Huawei gives no chip totals for them)."""
        names = [name for name in self.TEMPLATES if split.divides_evenly(name, cores, memory_mb)]
        media = any(split.media_variant(name) for name in names)
        found = []
        for name in names:
            aic = split.template_cores(name) or 0
            takes = {split.AICORE: aic, split.MEMORY: (split.named_memory_mb(name) or 0)}
            if media:
                takes[split.DVPP] = split.media_share(name, aic, cores)
            found.append(VnpuTemplate(name, takes))
        return found

    def chip_totals(self, cores: int, memory_mb: int) -> dict[str, int]:
        return super().chip_totals(cores, memory_mb) | {split.DVPP: cores}


class Ascend910A1(Ascend910):
    """First-generation 910: HCCS rings of 4 by physical id; a reset takes 4 consecutive logic ids.

    Its driver has no multi-rate utilization and no vector figure: only the AI core's is read."""

    # In full: "910B" alone is a first-generation chip, "910B3" an A2 one.
    CHIP_NAMES: ClassVar[re.Pattern[str]] = re.compile(r"910A|910B|910ProA|910ProB|910PremiumA")
    unit_kind: ClassVar[UnitKind] = UnitKind.RING

    utilization_sampling_s: ClassVar[float] = 0.0

    def utilization(self, chip: Chip) -> Utilization:
        return Utilization(self.rate(chip, UtilizationType.AICORE))

    def reset_group(self, chip: Chip, chips: Sequence[Chip]) -> tuple[Chip, ...]:
        return logic_block(chip, chips, RING_SIZE)

    def vnpu_templates(self, cores: int, memory_mb: int) -> list[VnpuTemplate]:
        """vir02 to vir16: AI cores and their share of the memory (Huawei's counts are what AI cores allow;
        Volcano's AI CPU figures would allow fewer)."""
        found = []
        for name in A1_TEMPLATES:
            aic = split.template_cores(name) or 0
            if 0 < aic <= cores:
                found.append(VnpuTemplate(name, {split.AICORE: aic, split.MEMORY: memory_mb * aic // cores}))
        return found


class Ascend910B(Ascend910):
    """910B (Atlas A2): a full mesh of 8; a reset takes the 8 by logic id, or all 16 of a 16-chip box. The
    A2 inference boards Huawei resets chip by chip are not told apart (no board id is read): a wider group
    only waits longer for its chips to be free."""

    CHIP_NAMES: ClassVar[re.Pattern[str]] = re.compile(r"910B\d|A2G\d")
    unit_kind: ClassVar[UnitKind] = UnitKind.MESH
    TEMPLATES: ClassVar[tuple[str, ...]] = A2_TEMPLATES

    def reset_group(self, chip: Chip, chips: Sequence[Chip]) -> tuple[Chip, ...]:
        size = _BOX16_RESET if len(chips) > MESH_GROUP_SIZE else MESH_GROUP_SIZE
        return logic_block(chip, chips, size)


class Ascend910A3(Ascend910):
    """A3 (``Ascend910``, model 93xx): two dies per card, the card their unit; a reset takes two cards. The
    chip's card and the brother card the driver names; the whole node where it cannot name one."""

    TEMPLATES: ClassVar[tuple[str, ...]] = A3_TEMPLATES

    def reset_group(self, chip: Chip, chips: Sequence[Chip]) -> tuple[Chip, ...]:
        brother = self._brother(chip)
        if brother is None:
            return whole_node(chip, chips)
        return cards(chip, chips, {chip.card_id, brother})

    def associated_card(self, chip: Chip) -> int:
        brother = self._brother(chip)
        return -1 if brother is None else brother

    def super_pod(self, chip: Chip) -> SuperPodInfo | None:
        """``dcmi_get_device_info(CHIP_INF, SPOD_INFO)``: -1 where the driver says 0xffffffff (none)."""
        return self.api.super_pod_info(chip)

    def _brother(self, chip: Chip) -> int | None:
        """The brother card the driver names, or None where it cannot."""
        try:
            return self.library.brother_card(chip.card_id, chip.device_id)
        except ChipError:
            return None
