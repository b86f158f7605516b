"""The fake node's scenario: chips, their health and faults, readings, injected errors (JSON).

Every field is in docs/fake-backend.md; the same model feeds the C fake ``libdcmi.so`` of the tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    IPvAnyAddress,
    ValidationError,
    model_validator,
)

from backends.errors import ChipError
from backends.fake.telemetry import (
    A5_FREQUENCIES,
    A5_UTILIZATION,
    DDR_UTILIZATION,
    HBM_UTILIZATION,
    SOC_UTILIZATION,
    DieWords,
    FakeProcess,
    FakeSuperPod,
    FakeTelemetry,
    FakeVdevUsage,
    ScenarioModel,
    default_die,
)
from backends.fake.vnpu_rules import ChipRoom, chip_room
from backends.library import (
    HEALTH_ABSENT,
    DieId,
    DieType,
    FrequencyType,
    PcieAddress,
    UtilizationType,
    VdevInfo,
    v2_name,
)
from backends.pci import InvalidPciAddress, parse_bdf

# The DeviceLibrary operations a scenario can make fail or hang.
Operation = Literal[
    "init",
    "driver_version",
    "card_list",
    "device_count",
    "logic_id",
    "phy_id",
    "chip_info",
    "total_aicore",
    "health",
    "error_codes",
    "hbm_info",
    "memory_info",
    "pcie_address",
    "device_ip",
    "vdev_info",
    "subscribe_faults",
    "temperature",
    "power",
    "board_power",
    "voltage",
    "frequency",
    "utilization",
    "multi_utilization",
    "multi_utilization_period",
    "ecc_info",
    "network_health",
    "die_id",
    "processes",
    "reset",
    "boot_status",
    "brother_card",
    "outband_channel_state",
    "super_pod_info",
    "vdev_activity",
    "create_vdev",
    "destroy_vdev",
    "affinity_cpu",
]

# The DCMI function each operation stands for, so errors read like real ones.
# VDEV_MNG / GET_TOTAL_RESOURCE answers both total_aicore and vdev_ids, so the
# operation "total_aicore" governs both (one query on a real driver too);
# super_pod_info and vdev_activity are dcmi_get_device_info commands as well.
DCMI_FUNCTIONS: Final[dict[Operation, str]] = {
    "init": "dcmi_init",
    "driver_version": "dcmi_get_driver_version",
    "card_list": "dcmi_get_card_list",
    "device_count": "dcmi_get_device_num_in_card",
    "logic_id": "dcmi_get_device_logic_id",
    "phy_id": "dcmi_get_device_phyid_from_logicid",
    "chip_info": "dcmi_get_device_chip_info_v2",
    "total_aicore": "dcmi_get_device_info",
    "health": "dcmi_get_device_health",
    "error_codes": "dcmi_get_device_errorcode_v2",
    "hbm_info": "dcmi_get_device_hbm_info",
    "memory_info": "dcmi_get_device_memory_info_v3",
    "pcie_address": "dcmi_get_device_pcie_info_v2",
    "device_ip": "dcmi_get_device_ip",
    "vdev_info": "dcmi_get_device_info",
    "subscribe_faults": "dcmi_subscribe_fault_event",
    "temperature": "dcmi_get_device_temperature",
    "power": "dcmi_get_device_power_info",
    "board_power": "dcmi_mcu_get_power_info",
    "voltage": "dcmi_get_device_voltage",
    "frequency": "dcmi_get_device_frequency",
    "utilization": "dcmi_get_device_utilization_rate",
    "multi_utilization": "dcmi_get_device_multi_utilization_rate",
    "multi_utilization_period": "dcmi_get_device_multi_utilization_rate_period",
    "ecc_info": "dcmi_get_device_ecc_info",
    "network_health": "dcmi_get_device_network_health",
    "die_id": "dcmi_get_device_die_v2",
    "processes": "dcmi_get_device_resource_info",
    "reset": "dcmi_set_device_reset",
    "boot_status": "dcmi_get_device_boot_status",
    "brother_card": "dcmi_get_netdev_brother_device",
    "outband_channel_state": "dcmi_get_device_outband_channel_state",
    "super_pod_info": "dcmi_get_device_info",
    "vdev_activity": "dcmi_get_device_info",
    "create_vdev": "dcmi_create_vdevice",
    "destroy_vdev": "dcmi_set_destroy_vdevice",
    "affinity_cpu": "dcmi_get_affinity_cpu_info_by_device_id",
}

# What a resetting chip still answers: the ids and facts the driver keeps in its
# own tables, the boot status, and the out-of-band channel. Every other call
# about the chip answers -8012 (not ready) until the reset is over, its chip
# info too: the chip itself says its name and version, and it is booting.
ANSWERED_WHILE_RESETTING: Final[frozenset[Operation]] = frozenset(
    {"logic_id", "phy_id", "pcie_address", "boot_status", "brother_card", "outband_channel_state"}
)

_HEX_CODE = re.compile(r"^(0[xX])?[0-9A-Fa-f]{1,8}$")


def _parse_fault_code(value: object) -> object:
    """Fault codes are hex strings like "80E01801" (a 0x prefix is allowed)."""
    if isinstance(value, str):
        if not _HEX_CODE.match(value):
            raise ValueError(f"fault code {value!r} is not a hex string of at most 8 digits like '80E01801'")
        return int(value, 16)
    return value


FaultCode = Annotated[int, BeforeValidator(_parse_fault_code), Field(ge=0, le=0xFFFFFFFF)]
VdevId = Annotated[int, Field(ge=100, le=1123)]
Template = Annotated[str, Field(pattern=r"^vir\d+[A-Za-z0-9_]*$", max_length=31)]
DcmiCode = Annotated[int, Field(lt=0, description="a negative DCMI return code, e.g. -8012")]

# computing.aic the driver reports per chip name, when the scenario gives none.
_DEFAULT_AICORE = (("310B", 1.0), ("310P", 8.0), ("910B2", 24.0), ("910B", 20.0), ("910", 32.0))
# SoC boards: the NPU is not a PCIe device and has no RoCE port.
_SOC_CHIPS = ("310B",)
# The Ascend 950 (A5): its driver answers DCMI v2 only.
_A5_CHIPS = ("Ascend950",)
_HBM_CHIPS = ("910", "Ascend910", "A2G", *_A5_CHIPS)
_CPULIST = r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$"

_TEMPLATE_CORES = re.compile(r"^vir(?P<cores>\d+)")
_TEMPLATE_GIB = re.compile(r"_(?P<gib>\d+)g(_|$)")


def _canonical_bdf(text: str) -> str:
    try:
        return parse_bdf(text).bdf
    except InvalidPciAddress as error:  # pydantic reports a ValueError as the field's error
        raise ValueError(str(error)) from None


Bdf = Annotated[str, AfterValidator(_canonical_bdf)]


class FakeStep(ScenarioModel):
    """What a fault event says: its code, severity and assertion."""

    code: FaultCode
    severity: int | None = Field(default=None, ge=0, le=3, description="default: the chip's fault_severity")
    assertion: int = Field(default=1, ge=0, le=2, description="0 recovered, 1 raised, 2 one-off")


class FakeEvent(FakeStep):
    """A fault event the driver delivers, whether or not its code is in the chip's fault codes."""

    serial: int = Field(ge=0, le=2**31 - 1, description="event_serial_num; unique per chip")


class FakeStorm(ScenarioModel):
    """A driver flooding one chip: ``count`` events, ``rate`` a second, cycling ``steps``.

    Event ``i`` is ``steps[i % len(steps)]``, numbered ``serial + i``; it plays once from the moment the
    subscription sees it (another serial starts over), at most 1000 events per look, one after the other.
    """

    serial: int = Field(ge=0, le=2**31 - 1, description="tells storms apart; numbers their events")
    rate: float = Field(gt=0, le=1_000_000, description="events a second")
    count: int = Field(ge=1, le=2**31 - 1)
    steps: tuple[FakeStep, ...] = Field(min_length=1, max_length=16)

    @model_validator(mode="after")
    def _serials_fit(self) -> FakeStorm:
        if self.serial + self.count - 1 > 2**31 - 1:
            raise ValueError(
                f"storm serial {self.serial} + count {self.count} - 1 exceeds 2147483647, "
                "the largest event_serial_num"
            )
        return self

    def due(self, elapsed: float) -> int:
        """How many of its events are due ``elapsed`` seconds after it began (the first at once)."""
        return min(self.count, 1 + int(elapsed * self.rate))


class FakeVdev(ScenarioModel):
    """A static vNPU, as ``npu-smi set -t create-vnpu`` leaves it."""

    vdev_id: int = Field(ge=100, le=1123)
    template: str = Field(pattern=r"^[A-Za-z0-9_]{1,15}$", description="e.g. vir02, vir10_3c_32g")
    aicore: float = Field(gt=0, description="default: the NN of virNN")
    memory_mb: int = Field(ge=0, description="default: N GiB of a _Ng in the template")
    vfg_id: int | None = Field(default=None, ge=0, description="default: its position on the chip")
    status: int = Field(default=0, ge=0)
    in_use: bool = False

    @model_validator(mode="before")
    @classmethod
    def _figures_from_template(cls, data: Any) -> Any:
        """Fill aicore and memory_mb from the template name where it states them."""
        if not isinstance(data, dict) or not isinstance(data.get("template"), str):
            return data
        template, filled = data["template"], dict(data)
        if filled.get("aicore") is None:
            cores = _TEMPLATE_CORES.match(template)
            if cores is None:
                raise ValueError(f"template {template!r} does not start with virNN: give the vNPU's aicore")
            filled["aicore"] = float(cores["cores"])
        if filled.get("memory_mb") is None:
            gib = _TEMPLATE_GIB.search(template)
            if gib is None:
                raise ValueError(f"template {template!r} names no memory (_<N>g): give the vNPU's memory_mb")
            filled["memory_mb"] = int(gib["gib"]) * 1024
        return filled

    def info(self, position: int) -> VdevInfo:
        """What VDEV_MNG / GET_VDEV_RESOURCE answers for this vNPU, ``position`` on its chip."""
        return VdevInfo(
            vdev_id=self.vdev_id,
            template=self.template,
            aicore=self.aicore,
            memory_mb=self.memory_mb,
            vfg_id=self.vfg_id if self.vfg_id is not None else position,
            status=self.status,
            in_use=self.in_use,
        )


class FakeChip(ScenarioModel):
    """One NPU chip of the fake node."""

    phy_id: int = Field(ge=0, le=255)
    health: int = Field(default=0, description="dcmi health: 0 ok, 1 minor, 2 major, 3 critical")
    fault_codes: tuple[FaultCode, ...] = ()
    card_id: int | None = Field(default=None, ge=0)
    device_id: int | None = Field(default=None, ge=0, le=3)
    logic_id: int | None = Field(default=None, ge=0)
    chip_name: str | None = None
    aicore: float | None = None
    memory_mb: int | None = Field(default=None, ge=0)
    fault_severity: int = Field(default=2, ge=0, le=3, description="severity of this chip's fault events")
    events: tuple[FakeEvent, ...] = Field(default=(), max_length=64)
    storm: FakeStorm | None = None
    pcie: Bdf | None = Field(default=None, description="PCI address; default from phy_id, none on 310B")
    device_ip: IPvAnyAddress | None = Field(default=None, description="RoCE port address")
    vdevs: tuple[FakeVdev, ...] = Field(default=(), max_length=32)
    vdev_usage: dict[VdevId, FakeVdevUsage] = Field(
        default_factory=dict, description="per vNPU id (static or made through DCMI): in use, activity"
    )
    aicpu: int | None = Field(
        default=None, ge=0, le=64, description="AI CPUs vNPUs can take; default: family"
    )
    telemetry: dict[str, Any] = Field(
        default_factory=dict, description="a FakeTelemetry object laid over the node's, key by key"
    )
    processes: tuple[FakeProcess, ...] = Field(default=(), max_length=32)
    vdie_id: DieWords | None = None
    ndie_id: DieWords | None = None
    cpu_affinity: str | None = Field(
        default=None,
        pattern=_CPULIST,
        max_length=255,
        description="the cpulist dcmi_get_affinity_cpu_info_by_device_id answers (the driver keeps 31 "
        "characters); absent: -8255",
    )
    reset_seconds: float | None = Field(default=None, ge=0, le=86_400, description="default: the node's")
    reset_clears_faults: bool = Field(default=True, description="a reset repairs the chip's faults")
    brother_card: int | None = Field(default=None, description="default: A3's rule (card +/- 4)")
    outband_channel: Literal[0, 1] | None = Field(default=None, description="absent: not supported")
    errors: dict[Operation, DcmiCode] = Field(default_factory=dict)
    hang: tuple[Operation, ...] = ()

    @model_validator(mode="after")
    def _health_is_dcmi_value(self) -> FakeChip:
        if self.health not in (0, 1, 2, 3, HEALTH_ABSENT):
            raise ValueError(
                f"health {self.health} is not a DCMI health value; allowed: 0, 1, 2, 3, 4294967295"
            )
        return self

    @model_validator(mode="after")
    def _event_serials_unique(self) -> FakeChip:
        repeated = _repeated(str(event.serial) for event in self.events)
        if repeated:
            raise ValueError(f"chip {self.phy_id}: event serial numbers must be unique; repeated: {repeated}")
        return self

    def event_severity(self, event: FakeStep) -> int:
        """The severity ``event`` is delivered with."""
        return event.severity if event.severity is not None else self.fault_severity


class PlacedChip(BaseModel):
    """A chip with its DCMI address resolved."""

    model_config = ConfigDict(frozen=True)

    chip: FakeChip
    card_id: int
    device_id: int
    logic_id: int


class FakeScenario(ScenarioModel):
    """The whole fake node."""

    chip_name: str = Field(min_length=1, max_length=31)
    chip_type: str = "Ascend"
    chip_ver: str = "V1"
    npu_name: str = ""
    driver_version: str = "24.1.rc1"
    aicore: float | None = Field(default=None, description="computing.aic of VDEV_MNG; default by chip name")
    aicore_cnt: int = Field(default=0, ge=0, description="chip-info aicore_cnt")
    memory_mb: int = Field(default=8192, ge=0)
    subscribe: bool | None = Field(
        default=None, description="fault subscription supported; default: 910 only"
    )
    latency_ms: float = Field(default=0.0, ge=0, le=60_000)
    missing: tuple[Operation, ...] = Field(
        default=(), description="operations whose function the driver lacks"
    )
    telemetry: FakeTelemetry = Field(default_factory=FakeTelemetry, description="every chip's readings")
    super_pod: FakeSuperPod | None = Field(default=None, description="default: none on A3, -8255 elsewhere")
    reset_seconds: float = Field(default=3.0, ge=0, le=86_400, description="how long a reset takes")
    vnpu_templates: tuple[Template, ...] | None = Field(
        default=None, description="templates the driver accepts; default: the family's"
    )
    aicpu: int | None = Field(default=None, ge=0, le=64, description="AI CPUs per chip for vNPUs")
    vdev_node_dir: Path | None = Field(
        default=None, description="where the driver makes vdavinci<N> for the vNPUs it creates"
    )
    errors: dict[Operation, DcmiCode] = Field(default_factory=dict)
    hang: tuple[Operation, ...] = ()
    chips: tuple[FakeChip, ...] = Field(min_length=0, max_length=1024)

    @model_validator(mode="after")
    def _ids_unique(self) -> FakeScenario:
        placed = self.placed
        keys: tuple[tuple[str, list[str]], ...] = (
            ("phy_id", [str(p.chip.phy_id) for p in placed]),
            ("logic_id", [str(p.logic_id) for p in placed]),
            ("(card_id, device_id)", [f"({p.card_id}, {p.device_id})" for p in placed]),
            ("pcie", [address.bdf for p in placed if (address := self.pcie_of(p.chip)) is not None]),
            ("device_ip", [str(p.chip.device_ip) for p in placed if p.chip.device_ip is not None]),
            ("vdev_id (node-wide)", [str(vdev.vdev_id) for p in placed for vdev in p.chip.vdevs]),
        )
        for what, values in keys:
            duplicates = _repeated(values)
            if duplicates:
                raise ValueError(f"{what} must be unique across chips; repeated: {duplicates}")
        return self

    @model_validator(mode="after")
    def _readings_valid(self) -> FakeScenario:
        for chip in self.chips:
            try:
                self.telemetry.under(chip.telemetry)
            except ValidationError as error:
                problems = "; ".join(
                    f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}" for item in error.errors()
                )
                raise ValueError(f"chip {chip.phy_id}: telemetry: {problems}") from None
        return self

    @model_validator(mode="after")
    def _chips_can_have_what_they_have(self) -> FakeScenario:
        for chip in self.chips:
            name = self.chip_name_of(chip)
            if chip.device_ip is not None and self.is_soc(chip):
                raise ValueError(
                    f"chip {chip.phy_id} ({name}): SoC boards have no RoCE port, so no device_ip"
                )
            if not chip.vdevs:
                continue
            total = self.aicore_of(chip)
            if total is None or self.is_soc(chip):
                raise ValueError(f"chip {chip.phy_id} ({name}) has no vNPU support, so no vdevs")
            vdevs = self.vdevs_of(chip)
            cores = sum(vdev.aicore for vdev in vdevs)
            memory = sum(vdev.memory_mb for vdev in vdevs)
            if cores > total:
                raise ValueError(
                    f"chip {chip.phy_id}: its vdevs take {cores:g} AI cores, the chip has {total:g}"
                )
            if memory > self.memory_mb_of(chip):
                raise ValueError(
                    f"chip {chip.phy_id}: its vdevs take {memory} MB, "
                    f"the chip has {self.memory_mb_of(chip)} MB (memory_mb)"
                )
        return self

    @cached_property
    def placed(self) -> list[PlacedChip]:
        """Chips with card (default: alone on card ``<index>``), device and logic ids, in list order."""
        per_card: dict[int, int] = {}
        result = []
        for index, chip in enumerate(self.chips):
            card = chip.card_id if chip.card_id is not None else index
            device = chip.device_id if chip.device_id is not None else per_card.get(card, 0)
            per_card[card] = max(per_card.get(card, 0), device + 1)
            logic = chip.logic_id if chip.logic_id is not None else index
            result.append(PlacedChip(chip=chip, card_id=card, device_id=device, logic_id=logic))
        return result

    @cached_property
    def by_address(self) -> dict[tuple[int, int], PlacedChip]:
        """Chips by (card_id, device_id): every DCMI call names one."""
        return {(placed.card_id, placed.device_id): placed for placed in self.placed}

    def chip_name_of(self, chip: FakeChip) -> str:
        """The chip name reported for ``chip``."""
        return chip.chip_name or self.chip_name

    def aicore_of(self, chip: FakeChip) -> float | None:
        """computing.aic for ``chip``; None means the driver does not support the query."""
        if chip.aicore is not None:
            return chip.aicore
        if self.aicore is not None:
            return self.aicore
        name = self.chip_name_of(chip)
        return next((value for prefix, value in _DEFAULT_AICORE if name.startswith(prefix)), None)

    def memory_mb_of(self, chip: FakeChip) -> int:
        """The device memory reported for ``chip``, in MB."""
        return chip.memory_mb if chip.memory_mb is not None else self.memory_mb

    def is_soc(self, chip: FakeChip) -> bool:
        """Whether ``chip`` is a SoC board's NPU (310B): no PCIe address, no RoCE port, no vNPUs."""
        return self.chip_name_of(chip).startswith(_SOC_CHIPS)

    def pcie_of(self, chip: FakeChip) -> PcieAddress | None:
        """``chip``'s PCI address; None where the driver answers "not supported" (SoC boards)."""
        if chip.pcie is not None:
            return parse_bdf(chip.pcie)
        if self.is_soc(chip):
            return None
        number = chip.phy_id + 1
        return PcieAddress(domain=number // 256, bus=number % 256, device=0, function=0)

    def vdevs_of(self, chip: FakeChip) -> tuple[VdevInfo, ...]:
        """``chip``'s static vNPUs, every figure resolved."""
        return tuple(vdev.info(position) for position, vdev in enumerate(chip.vdevs))

    def has_hbm(self, chip: FakeChip) -> bool:
        """Whether ``chip`` has HBM (the 910 families, the 950): the HBM queries answer only there."""
        return self.chip_name_of(chip).startswith(_HBM_CHIPS)

    def has_ddr(self, chip: FakeChip) -> bool:
        """Whether ``chip`` has DDR: 910B, A3 and the 950 have none (memory_info_v3 answers -8255)."""
        return not self.chip_name_of(chip).startswith(("910B", "Ascend910", "A2G", *_A5_CHIPS))

    def is_a5(self, chip: FakeChip) -> bool:
        """An Ascend 950 (``Ascend950PR``, ``Ascend950DT``): its driver answers DCMI v2 only."""
        return self.chip_name_of(chip).startswith(_A5_CHIPS)

    @property
    def speaks_v2(self) -> bool:
        """The node's driver answers ``dcmiv2_init`` and -8255 to ``dcmi_init`` (a 950 node)."""
        return self.chip_name.startswith(_A5_CHIPS)

    def utilization_types(self, chip: FakeChip) -> frozenset[UtilizationType]:
        """The input types ``dcmi_get_device_utilization_rate`` answers on ``chip`` (the others: -8255)."""
        if self.is_a5(chip):
            return A5_UTILIZATION
        return frozenset(
            kind
            for kind in UtilizationType
            if not (kind in HBM_UTILIZATION and not self.has_hbm(chip))
            and not (kind in DDR_UTILIZATION and not self.has_ddr(chip))
            and not (self.is_soc(chip) and kind not in SOC_UTILIZATION)
        )

    def frequency_types(self, chip: FakeChip) -> frozenset[FrequencyType]:
        """The clocks ``dcmi_get_device_frequency`` answers on ``chip`` (no HBM clock without HBM ...)."""
        if self.is_a5(chip):
            return A5_FREQUENCIES
        absent = set() if self.has_hbm(chip) else {FrequencyType.HBM}
        absent |= set() if self.has_ddr(chip) else {FrequencyType.DDR}
        return frozenset(FrequencyType) - absent

    def die_types(self, chip: FakeChip) -> frozenset[DieType]:
        """The die ids ``chip``'s driver answers: NDIE and VDIE, none on a 950 (whose DDIE is not read)."""
        return frozenset() if self.is_a5(chip) else frozenset(DieType)

    def is_a3(self, chip: FakeChip) -> bool:
        """An Atlas A3 die (the driver names it Ascend910, with npu_name 93xx)."""
        return self.chip_name_of(chip).startswith("Ascend910")

    @cached_property
    def readings_by_phy(self) -> dict[int, FakeTelemetry]:
        return {chip.phy_id: self.telemetry.under(chip.telemetry) for chip in self.chips}

    def telemetry_of(self, chip: FakeChip) -> FakeTelemetry:
        """``chip``'s readings: its ``telemetry`` over the node's (worked out once per scenario)."""
        return self.readings_by_phy[chip.phy_id]

    def network_health_of(self, chip: FakeChip) -> int | None:
        """What dcmi_get_device_network_health answers; None: not supported (no RoCE port)."""
        value = self.telemetry_of(chip).network_health
        if value is not None:
            return value
        return 0 if self.has_hbm(chip) else None

    def board_power_w(self, card_id: int) -> float:
        """The card's power as its MCU reads it: a chip's ``board_power_w``, else its chips' power summed."""
        on_card = [self.telemetry_of(p.chip) for p in self.placed if p.card_id == card_id]
        given = next((t.board_power_w for t in on_card if t.board_power_w is not None), None)
        return given if given is not None else sum(t.power_w for t in on_card)

    def die_of(self, chip: FakeChip, kind: DieType) -> DieId:
        """``chip``'s die id of ``kind`` (one of :meth:`die_types`)."""
        given = {DieType.VDIE: chip.vdie_id, DieType.NDIE: chip.ndie_id}.get(kind)
        return DieId(given) if given is not None else default_die(chip.phy_id, int(kind))

    def super_pod_of(self, chip: FakeChip) -> FakeSuperPod | None:
        """What CHIP_INF / SPOD_INFO answers; None: not supported (neither an A3 nor a 950)."""
        if self.super_pod is not None:
            return self.super_pod
        return FakeSuperPod() if self.is_a3(chip) or self.is_a5(chip) else None

    def reset_seconds_of(self, chip: FakeChip) -> float:
        return chip.reset_seconds if chip.reset_seconds is not None else self.reset_seconds

    def room_of(self, chip: FakeChip) -> ChipRoom | None:
        """What ``chip`` can be split into; None where its driver makes no vNPUs."""
        if self.is_soc(chip):
            return None
        return chip_room(
            self.chip_name_of(chip),
            chip.phy_id,
            self.aicore_of(chip),
            memory_mb=self.memory_mb_of(chip),
            aicpu=chip.aicpu if chip.aicpu is not None else self.aicpu,
            templates=self.vnpu_templates,
        )

    def missing_functions(self) -> frozenset[str]:
        """The DCMI functions the driver of this scenario lacks (optional or not), as its API names them."""
        name = v2_name if self.speaks_v2 else str
        return frozenset(name(DCMI_FUNCTIONS[operation]) for operation in self.missing)

    def subscription_supported(self) -> bool:
        """Whether the fault subscription works (Huawei: the 910 families and the 950 only)."""
        if self.subscribe is not None:
            return self.subscribe
        return self.chip_name.startswith(_HBM_CHIPS)


def _repeated(values: Iterable[str]) -> str:
    """The values that occur more than once, sorted and comma-joined ("" when none do)."""
    items = list(values)
    return ", ".join(sorted({value for value in items if items.count(value) > 1}))


class ScenarioError(ChipError):
    """A scenario file that cannot be read or is invalid."""


def parse_scenario(text: str, source: str) -> FakeScenario:
    """Parse scenario JSON; errors name the source, the field and the problem."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ScenarioError(f"{source}: not valid JSON: {error}") from error
    try:
        return FakeScenario.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '(top level)'}: {item['msg']}"
            f" (got {item.get('input')!r})"
            for item in error.errors()
        )
        raise ScenarioError(f"{source}: invalid scenario: {problems}") from error


def load_scenario(path: Path) -> FakeScenario:
    """Read and validate a scenario file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ScenarioError(f"cannot read scenario {path}: {error.strerror}") from error
    return parse_scenario(text, str(path))
