"""What a fake chip measures: the scenario's ``telemetry`` and the answers of the telemetry calls.

Values in an operator's units, answered in DCMI's (0.1 W, 0.01 V); -8255 where the driver reports none.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from backends.library import DieId, EccDeviceType, EccInfo, FrequencyType, MultiUtilization, UtilizationType

Percent = Annotated[int, Field(ge=0, le=100)]
Mhz = Annotated[int, Field(ge=0, le=100_000)]
EccKind = Literal["ddr", "sram", "hbm", "npu"]

# Utilization input types a 310B (Atlas 200I A2) answers, per its DCMI reference.
SOC_UTILIZATION: Final = frozenset(
    {
        UtilizationType.DDR,
        UtilizationType.AICORE,
        UtilizationType.AICPU,
        UtilizationType.CTRLCPU,
        UtilizationType.DDR_BANDWIDTH,
        UtilizationType.VECTORCORE,
    }
)
HBM_UTILIZATION: Final = frozenset({UtilizationType.HBM, UtilizationType.HBM_BANDWIDTH})
DDR_UTILIZATION: Final = frozenset({UtilizationType.DDR, UtilizationType.DDR_BANDWIDTH})
# What the 950's driver answers, per its DCMI reference: these utilization types and clocks only.
A5_UTILIZATION: Final = frozenset(UtilizationType) - DDR_UTILIZATION
A5_FREQUENCIES: Final = frozenset(
    {FrequencyType.CTRLCPU, FrequencyType.HBM, FrequencyType.AICORE_CURRENT, FrequencyType.AICORE_MAX}
)


def _laid_over(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``top``'s keys, objects in both merged the same way."""
    merged = dict(base)
    for key, value in top.items():
        below = merged.get(key)
        merged[key] = (
            _laid_over(below, value) if isinstance(below, Mapping) and isinstance(value, Mapping) else value
        )
    return merged


class ScenarioModel(BaseModel):
    """Part of a scenario file: an unknown field is refused, and nothing changes once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class _PerKind(ScenarioModel):
    """A figure per member of a DCMI enum, each field named as its member in lower case."""

    def of(self, kind: IntEnum) -> int:
        value: int = getattr(self, kind.name.lower())
        return value


class FakeFrequencies(_PerKind):
    """Clocks in MHz, one per ``enum dcmi_freq_type``."""

    ddr: Mhz = 2133
    ctrlcpu: Mhz = 1900
    hbm: Mhz = 1600
    aicore_current: Mhz = 1000
    aicore_max: Mhz = 1000
    vectorcore_current: Mhz = 1000


class FakeUtilization(_PerKind):
    """Percent busy, one per ``dcmi_get_device_utilization_rate`` input type."""

    ddr: Percent = 0
    aicore: Percent = 0
    aicpu: Percent = 0
    ctrlcpu: Percent = 0
    ddr_bandwidth: Percent = 0
    hbm: Percent = 0
    hbm_bandwidth: Percent = 0
    vectorcore: Percent = 0
    npu: Percent = 0
    aicube: Percent = 0

    def multi(self) -> MultiUtilization:
        """The multi-rate sample: AI cube, vector, core and overall from the single figures."""
        return MultiUtilization(aic=self.aicube, aiv=self.vectorcore, aicore=self.aicore, npu=self.npu)


Count = Annotated[int, Field(ge=0, le=0xFFFFFFFF)]


class FakeEcc(ScenarioModel):
    """``struct dcmi_ecc_info`` of one memory kind."""

    enable_flag: int = 1
    single_bit_error_cnt: Count = 0
    double_bit_error_cnt: Count = 0
    total_single_bit_error_cnt: Count = 0
    total_double_bit_error_cnt: Count = 0
    single_bit_isolated_pages_cnt: Count = 0
    double_bit_isolated_pages_cnt: Count = 0
    single_bit_next_isolated_pages_cnt: Count = 0
    double_bit_next_isolated_pages_cnt: Count = 0

    def info(self) -> EccInfo:
        return EccInfo(**self.model_dump())


class FakeTelemetry(ScenarioModel):
    """A chip's readings. Unset fields take the node's value, then these defaults."""

    temperature_c: int = Field(default=45, ge=-300, le=300, description="below -275: a failed sensor")
    power_w: float = Field(default=65.0, ge=0, le=100_000)
    board_power_w: float | None = Field(
        default=None, ge=0, le=100_000, description="the card's (MCU); default: its chips' power summed"
    )
    voltage_v: float = Field(default=0.8, ge=0, le=100)
    frequency_mhz: FakeFrequencies = FakeFrequencies()
    utilization_pct: FakeUtilization = FakeUtilization()
    memory_used_mb: int = Field(default=0, ge=0, description="HBM or DDR in use; at most the chip's memory")
    hbm_temperature_c: int = Field(default=40, ge=-300, le=300)
    hbm_bandwidth_pct: Percent = 0
    ecc: dict[EccKind, FakeEcc] | None = Field(
        default=None, description="per memory kind; default: the chip's own memory, enabled, no errors"
    )
    network_health: int | None = Field(
        default=None, ge=0, le=255, description="dcmi_rdfx_detect_result; default: 0 on 910 families"
    )

    def under(self, chip: Mapping[str, Any]) -> FakeTelemetry:
        """A chip's readings: its ``telemetry`` object laid over these."""
        return FakeTelemetry.model_validate(_laid_over(self.model_dump(), chip))

    def ecc_of(self, kind: EccDeviceType, own_memory: EccKind) -> EccInfo | None:
        """The ECC counters of ``kind``; None where the chip has no such memory to report on."""
        table = self.ecc if self.ecc is not None else {own_memory: FakeEcc()}
        entry = table.get(kind.name.lower())  # type: ignore[call-overload]  # a Literal key from the enum name
        return entry.info() if entry is not None else None


class FakeProcess(ScenarioModel):
    """A process using a chip, as ``dcmi_get_device_resource_info`` lists it."""

    pid: int = Field(ge=1, le=2**31 - 1, description="the host's PID")
    memory_bytes: int = Field(default=0, ge=0, le=2**63 - 1)


class FakeSuperPod(ScenarioModel):
    """``struct dcmi_spod_info`` of an A3 node (-1: no super pod, the driver's 0xffffffff)."""

    super_pod_id: int = Field(default=-1, ge=-1, le=0xFFFFFFFE)
    server_id: int = Field(default=-1, ge=-1, le=0xFFFFFFFE)
    scale_type: int = Field(default=0, ge=0, le=0xFFFFFFFF)
    chassis_id: int = Field(default=0, ge=0, le=0xFFFFFFFF)
    super_pod_type: int = Field(default=0, ge=0, le=0xFFFFFFFF)


class FakeVdevUsage(ScenarioModel):
    """What a container does with one vNPU (a static one or one made through DCMI)."""

    in_use: bool = Field(default=False, description="is_container_used; destroying it answers -8020")
    aicore_utilization: Percent = 0
    memory_used_mb: int = Field(default=0, ge=0)


def _die_words(value: object) -> object:
    """A die id as npu-exporter prints it: five 8-digit hex words joined by ``-``."""
    if isinstance(value, str):
        words = value.split("-")
        if len(words) != 5 or not all(len(word) <= 8 for word in words):
            raise ValueError(f"die id {value!r} is not five hex words joined by '-', e.g. '00000A01-0-0-0-1'")
        try:
            return tuple(int(word, 16) for word in words)
        except ValueError as error:
            raise ValueError(f"die id {value!r} has a word that is not hex") from error
    return value


DieWords = Annotated[
    tuple[Count, Count, Count, Count, Count], BeforeValidator(_die_words), Field(description="e.g. 0-0-0-0-1")
]


def default_die(phy_id: int, kind_offset: int) -> DieId:
    """A die id of its own for every chip and die kind, when the scenario gives none."""
    return DieId((0x0A5C0000 + kind_offset, 0x00100000, 0, 0, phy_id))
