"""ChipBackend: the one face through which the plugin reaches chips, one implementation per chip family.

What most families do is the default here; each family's class (:mod:`backends.families`)
carries its row (:class:`~backends.family_table.FamilyTable`) and overrides what
its chips do differently (ARCHITECTURE.md "The chip families"). An optional DCMI
function the driver lacks is never fatal: it is recorded in :attr:`~ChipBackend.missing`
once, and the fact it gives is None.
"""

from __future__ import annotations

import abc
import enum
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Concatenate, Final, ParamSpec, TypeVar

import backends.library as lib
from backends.chips import CARD_DROPPED_CODE, AiCoreFigure, Chip, HealthReading
from backends.errors import NOT_READY, NOT_SUPPORTED, ChipError, DcmiError, SymbolMissing
from backends.family_table import FamilyTable
from backends.library import HEALTH_ABSENT, ChipInfo
from backends.session import LibrarySession
from backends.topology import ChipFacts, TopologyUnit, UnitKind, assign_units
from backends.vnpu_split import ChipSplits

# -- what a chip's telemetry reads come back as: figures in an operator's units, None where unknown ------

# npu-exporter does not show a value of -1 or 2**32 - 1: DCMI's "no value".
NO_VALUES: Final = frozenset({-1, 0xFFFFFFFF})
# dcmi_get_device_temperature: below this the sensor failed.
MIN_TEMPERATURE: Final = -275


def valid(value: int | None) -> int | None:
    """``value``, or None when DCMI means "no value" by it."""
    return None if value is None or value in NO_VALUES else value


@dataclass(frozen=True)
class Utilization:
    """How busy the chip is, in percent; each None where the driver does not say."""

    aicore: int | None = None  # npu_chip_info_utilization
    vector: int | None = None  # npu_chip_info_vector_utilization
    cube: int | None = None  # npu_chip_info_cube_utilization (910B, A3)
    overall: int | None = None  # npu_chip_info_overall_utilization (910B, A3)


@dataclass(frozen=True)
class MemoryUsage:
    """The chip's device memory in MB: HBM on the 910 families, DDR elsewhere, and HBM's own figures."""

    hbm: bool
    total_mb: int
    used_mb: int
    utilization: int | None = None  # HBM: dcmi_get_device_utilization_rate type 6
    temperature_c: int | None = None  # HBM: dcmi_hbm_info.temp
    bandwidth_utilization: int | None = None  # HBM: dcmi_hbm_info.bandwith_util_rate


# dcmi_get_device_network_health: npu-exporter's npu_chip_info_network_status.
NETWORK_UP: Final = 1  # OK or INIT
NETWORK_DOWN: Final = 0  # any other result
NETWORK_UNKNOWN: Final = -1  # the call failed


log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

ERROR_CODES = "dcmi_get_device_errorcode_v2"
SUBSCRIBE = "dcmi_subscribe_fault_event"
HBM_INFO = "dcmi_get_device_hbm_info"
MEMORY_INFO = "dcmi_get_device_memory_info_v3"
DEVICE_INFO = "dcmi_get_device_info"  # VDEV_MNG: AI cores and static vNPUs
UTILIZATION = "dcmi_get_device_utilization_rate"
NETWORK_HEALTH = "dcmi_get_device_network_health"
VNPU_MAKING = ("dcmi_create_vdevice", "dcmi_set_destroy_vdevice")  # vNPUs made on demand
# The sampling period npu-exporter asks the period multi-rate call for (1-4 s).
UTILIZATION_PERIOD_S = 1
# dcmi_get_device_network_health results npu-exporter counts as a working link.
_NETWORK_OK = frozenset({lib.NetworkHealth.OK, lib.NetworkHealth.INIT})


class MemoryKind(enum.Enum):
    """The device memory a family's chips give their containers, by the DCMI call that reads it."""

    HBM = HBM_INFO  # the 910 families; 910B and A3 have no DDR (memory_info_v3 answers -8255)
    DDR = MEMORY_INFO  # 310, 310B, 310P


class ChipBackend(abc.ABC):
    """One chip family over one chip library. Synchronous: callers run it off the event loop. The class
    attributes are the family's facts, read here; the other layers ask the methods."""

    TABLE: ClassVar[FamilyTable]  # the family's own row, before the operator's overrides
    # The unit its chips share a fast link with (backends.topology); without a faster link, the card.
    unit_kind: ClassVar[UnitKind] = UnitKind.CARD
    memory_kind: ClassVar[MemoryKind] = MemoryKind.DDR
    # The driver's device-share mode lets several containers open one chip: share_count applies.
    shares_chips: ClassVar[bool] = False
    # Seconds utilization() may spend sampling (a period call), beyond an ordinary call's time.
    utilization_sampling_s: ClassVar[float] = 0.0

    def __init__(self, session: LibrarySession, table: FamilyTable | None = None) -> None:
        self.session = session
        self.library = session.library  # DCMI v1: the calls only v1 has (DDR, RoCE IP, vNPUs, MCU)
        self.api = session.api  # the calls both APIs have, each chip named as the node's API names it
        # The row this node is served by: the family's, with the operator's overrides.
        self.table = table or self.TABLE
        # (function, physical id) of the telemetry calls a chip answered "not supported": not asked again.
        self.unsupported: set[tuple[str, int]] = set()

    @classmethod
    def claims(cls, info: ChipInfo) -> bool:
        """True when a chip with this info belongs to the family (its row's chip names)."""
        return cls.TABLE.claims(info)

    @classmethod
    def for_chip(cls, info: ChipInfo) -> type[ChipBackend]:
        """The implementation serving chips like ``info``: the family's own, or the sub-family it names."""
        return cls

    @property
    def missing(self) -> set[str]:
        """The optional DCMI functions the library lacks, as found so far (v1 names)."""
        return self.session.missing

    def lacking(self, *functions: str) -> list[str]:
        """Those of ``functions`` (v1 names) the driver lacks, as found so far, in the order given."""
        return [function for function in functions if function in self.session.missing]

    @property
    def description(self) -> str:
        """Where the chips come from (a library path, or a fake's scenario file)."""
        return self.session.description

    def close(self) -> None:
        self.session.close()

    # -- what every chip is asked ----------------------------------------------------------

    def read_health(self, chip: Chip) -> HealthReading:
        """Poll one chip: health value plus current fault codes (the value alone without errorcode_v2).
        "Not ready" (-8012) is a card off the bus: absent, with the synthetic card-drop code."""
        try:
            value = self.api.health(chip)
        except DcmiError as error:
            if error.code == NOT_READY:
                return HealthReading(HEALTH_ABSENT, (CARD_DROPPED_CODE,))
            raise
        if value == HEALTH_ABSENT:
            return HealthReading(HEALTH_ABSENT, (CARD_DROPPED_CODE,))
        if ERROR_CODES in self.missing:
            return HealthReading(value, (), codes_known=False)
        try:
            codes = tuple(self.api.error_codes(chip))
        except SymbolMissing:
            self.missing.add(ERROR_CODES)
            return HealthReading(value, (), codes_known=False)
        return HealthReading(value, codes)

    def pcie_address(self, chip: Chip) -> lib.PcieAddress | None:
        """Where the chip sits on PCI; None where the driver does not say (SoC boards, old drivers)."""
        return self.optional("dcmi_get_device_pcie_info_v2", chip, self.api.pcie_address)

    def memory(self, chip: Chip) -> lib.MemoryInfo | None:
        """The chip's device memory, of the family's :attr:`memory_kind`; None where it has none."""
        read = self.api.hbm_info if self.memory_kind is MemoryKind.HBM else self._ddr
        info: lib.MemoryInfo | None = self.optional(self.memory_kind.value, chip, read)
        return info if info is not None and info.total_mb > 0 else None

    def device_ip(self, chip: Chip) -> str | None:
        """The chip's RoCE address (IPv4, else IPv6); None where the driver has none or no such function."""
        return self.optional(
            "dcmi_get_device_ip", chip, lambda chip: self.library.device_ip(chip.card_id, chip.device_id)
        )

    def ai_cores(self, chip: Chip) -> AiCoreFigure:
        """The chip's AI-core count: VDEV_MNG total resource, else chip info, else the family's nominal.
        ChipError where none says (a family whose nominal figure is 0 has none published)."""
        aic = self.optional(DEVICE_INFO, chip, self.api.total_aicore) or 0.0
        if aic > 0:
            return AiCoreFigure(aic, "vdev_total_resource")
        if chip.info.aicore_cnt > 0:
            return AiCoreFigure(float(chip.info.aicore_cnt), "chip_info")
        if self.table.ai_core_nominal <= 0:
            raise ChipError(
                f"{chip.label} reports no AI-core count (neither VDEV_MNG nor chip info), and the "
                f"{self.table.family} family has no published figure to stand in"
            )
        return AiCoreFigure(self.table.ai_core_nominal, "family_nominal")

    # -- telemetry: what a chip measures; None where the driver does not say ---------------

    def temperature(self, chip: Chip) -> int | None:
        """Degrees Celsius; None where the sensor failed (below -275)."""
        value = self.optional("dcmi_get_device_temperature", chip, self.api.temperature)
        return value if value is not None and value >= MIN_TEMPERATURE else None

    def power(self, chip: Chip) -> float | None:
        """Watts (the driver counts 0.1 W)."""
        reading = self.optional("dcmi_get_device_power_info", chip, self.api.power)
        return reading.watts if reading is not None and valid(reading.deciwatts) is not None else None

    def voltage(self, chip: Chip) -> float | None:
        """Volts (the driver counts 0.01 V)."""
        reading = self.optional("dcmi_get_device_voltage", chip, self.api.voltage)
        return reading.volts if reading is not None and valid(reading.centivolts) is not None else None

    def aicore_frequency(self, chip: Chip) -> int | None:
        """The AI cores' current clock, MHz."""
        current = lib.FrequencyType.AICORE_CURRENT
        return valid(self.optional("dcmi_get_device_frequency", chip, self.api.frequency, current))

    def utilization(self, chip: Chip) -> Utilization:
        """AI core and vector utilization (rate types 2 and 12), as npu-exporter reads most families."""
        return Utilization(
            self.rate(chip, lib.UtilizationType.AICORE), self.rate(chip, lib.UtilizationType.VECTORCORE)
        )

    def memory_usage(self, chip: Chip) -> MemoryUsage | None:
        """Device memory in use, of the family's :attr:`memory_kind`: DDR's size - available; HBM's use,
        temperature, bandwidth use and utilization (rate type 6)."""
        info = self.memory(chip)
        if isinstance(info, lib.DdrInfo):
            return MemoryUsage(False, info.total_mb, info.total_mb - info.available_mb)
        if isinstance(info, lib.HbmInfo):
            return MemoryUsage(
                True,
                info.total_mb,
                info.used_mb,
                utilization=self.rate(chip, lib.UtilizationType.HBM),
                temperature_c=valid(info.temperature_c),
                bandwidth_utilization=valid(info.bandwidth_utilization),
            )
        return None

    def network_status(self, chip: Chip) -> int | None:
        """The RoCE port's connectivity (NETWORK_UP, NETWORK_DOWN, NETWORK_UNKNOWN), the health monitor's
        second source of a link down; None on a family without one."""
        return None

    def exported_network_status(self, chip: Chip) -> int | None:
        """What npu-exporter's ``network_status`` shows: the RoCE port's connectivity on most families."""
        return self.network_status(chip)

    def hbm_ecc(self, chip: Chip) -> lib.EccInfo | None:
        """The HBM's ECC counters (``dcmi_get_device_ecc_info``, HBM); None on a family without HBM."""
        if self.memory_kind is not MemoryKind.HBM:
            return None
        return self.optional("dcmi_get_device_ecc_info", chip, self.api.ecc_info, lib.EccDeviceType.HBM)

    def vdie_id(self, chip: Chip) -> str:
        """The chip's VDIE id as npu-exporter's ``vdie_id`` label spells it; empty where unknown."""
        die = self.optional("dcmi_get_device_die_v2", chip, self.api.die_id, lib.DieType.VDIE)
        return die.text if die is not None else ""

    def vnpu_activity(self, chip: Chip, vdev_ids: Sequence[int]) -> list[lib.VdevActivity]:
        """How busy each of the chip's vNPUs is: nothing, on a family without vNPU telemetry."""
        return []

    def rate(self, chip: Chip, kind: lib.UtilizationType) -> int | None:
        """``dcmi_get_device_utilization_rate`` of ``kind``, where the chip answers it."""
        return valid(self.optional(f"{UTILIZATION}({kind.name})", chip, self.api.utilization, kind))

    def multi_rate_utilization(self, chip: Chip) -> Utilization:
        """AI core, vector, cube and overall in one sample, as npu-exporter reads 910B, A3 and the 950: the
        period call (1 s), else the instant one, else the rate types 2 and 12."""
        period = UTILIZATION_PERIOD_S
        sample = self.optional(
            "dcmi_get_device_multi_utilization_rate_period", chip, self.api.multi_utilization_period, period
        )
        if sample is None:
            sample = self.optional("dcmi_get_device_multi_utilization_rate", chip, self.api.multi_utilization)
        if sample is None:
            return ChipBackend.utilization(self, chip)
        return Utilization(valid(sample.aicore), valid(sample.aiv), valid(sample.aic), valid(sample.npu))

    def network_health(self, chip: Chip) -> int | None:
        """``dcmi_get_device_network_health``: up (OK, INIT), down, unknown when the call fails, None for
        a chip without such a port (it answers "not supported": the A2 inference boards, the Atlas 350)."""
        result = self.optional(NETWORK_HEALTH, chip, self.api.network_health)
        if result is not None:
            return NETWORK_UP if result in _NETWORK_OK else NETWORK_DOWN
        if NETWORK_HEALTH in self.missing or (NETWORK_HEALTH, chip.phy_id) in self.unsupported:
            return None
        return NETWORK_UNKNOWN

    def cpu_affinity(self, chip: Chip) -> str | None:
        """The CPUs near the chip as the driver says (a cpulist such as ``0-23``); None where it does not
        (only 910B, A3 A+X boards, Atlas 350 cards and 950 servers say)."""
        return self.optional("dcmi_get_affinity_cpu_info_by_device_id", chip, self.api.affinity_cpu) or None

    def _ddr(self, chip: Chip) -> lib.DdrInfo:
        """``dcmi_get_device_memory_info_v3``: DDR, a v1 call."""
        return self.library.memory_info(chip.card_id, chip.device_id)

    def optional(
        self,
        function: str,
        chip: Chip,
        read: Callable[Concatenate[Chip, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T | None:
        """``read(chip, ...)`` of one fact; None when it cannot be had. A function the driver lacks is
        recorded once (and said at init); one a chip answers "not supported" is not asked of it again;
        another DCMI error leaves the fact out this time."""
        name = function.split("(", 1)[0]
        if name in self.missing or (function, chip.phy_id) in self.unsupported:
            return None
        try:
            return read(chip, *args, **kwargs)
        except SymbolMissing:
            self.missing.add(name)
        except DcmiError as error:
            if error.code == NOT_SUPPORTED:
                self.unsupported.add((function, chip.phy_id))
            log.debug(
                "%s answered %d (%s) for %s: left unknown",
                error.function,
                error.code,
                error.meaning,
                chip.label,
                extra={"function": error.function, "chip": chip.phy_id, "code": error.code},
            )
        return None

    # -- what differs by family ------------------------------------------------------------

    def subscribe_faults(self, handler: lib.FaultHandler) -> bool:
        """Deliver every chip's fault events to ``handler`` (on a library thread); False where none come.
        Only 910 and 950 drivers send them (DCMI answers -8255 on 310; Huawei polls 310, 310B and 310P):
        those families override this with :meth:`subscribe_driver_events`."""
        return False

    def subscribe_driver_events(self, handler: lib.FaultHandler) -> bool:
        """Subscribe ``handler`` to every chip's fault events through the node's API; False without the
        call. A driver found without it raises :class:`~backends.errors.SymbolMissing` the first time."""
        if SUBSCRIBE in self.missing:
            return False
        try:
            self.api.subscribe_faults(handler)
        except SymbolMissing:
            self.missing.add(SUBSCRIBE)
            raise
        return True

    def share_count(self, wanted: int) -> int:
        """Devices per chip for ``share_count`` = ``wanted``: 1 unless the family's driver shares chips."""
        return wanted if self.shares_chips else 1

    def vnpu_absence(self) -> str:
        """Why this family's chips are never split into vNPUs, in an operator's words; empty: they are."""
        return f"chips of the {self.TABLE.family} family have no vNPUs"

    def lists_vnpus(self) -> bool:
        """Whether the chips' static vNPUs can be read: a family whose chips split, a driver with VDEV_MNG."""
        return False

    def vnpus(self, chip: Chip) -> list[lib.VdevInfo]:
        """The chip's static vNPUs by id: none, on a family whose chips cannot be split."""
        return []

    def splits(self, chip: Chip, ai_cores: float | None, memory_mb: int | None) -> ChipSplits | None:
        """What ``chip`` can be split into on demand: nothing, on a family whose chips cannot be split."""
        return None

    def create_vnpu(self, chip: Chip, template: str) -> int:
        """Make a vNPU of ``template`` on ``chip``; its id. ChipError where chips cannot be split."""
        raise ChipError(f"cannot make a vNPU on {chip.label}: {self.vnpu_absence()}")

    def destroy_vnpu(self, chip: Chip, vdev_id: int) -> None:
        """Destroy vNPU ``vdev_id`` of ``chip``. ChipError on a family whose chips cannot be split."""
        raise ChipError(f"cannot destroy vNPU {vdev_id} on {chip.label}: {self.vnpu_absence()}")

    def has_rank_table(self, chips: Sequence[Chip]) -> bool:
        """Whether Volcano's pods on a node of ``chips`` get the HCCL rank-table annotation."""
        return False

    def units(self, chips: Sequence[Chip]) -> Mapping[int, TopologyUnit]:
        """The topology unit of every chip of the node, keyed by physical id (units of :attr:`unit_kind`)."""
        return assign_units(ChipFacts.of(chip, self.unit_kind) for chip in chips)

    @abc.abstractmethod
    def reset_group(self, chip: Chip, chips: Sequence[Chip]) -> tuple[Chip, ...]:
        """The chips a hot reset of ``chip`` restarts with it, ordered by physical id (``chips``: the
        node's). Each must be free before the reset and is waited for after it (the shapes of
        :mod:`backends.topology`). A family may ask the driver: call it off the event loop."""

    def card_count(self, chips: Sequence[Chip]) -> int | None:
        """npu-exporter's ``machine_card_nums``: the node's DCMI cards; None where it shows none."""
        return len({chip.card_id for chip in chips})

    def associated_card(self, chip: Chip) -> int:
        """The other card a reset of ``chip`` takes with it (Huawei's ``AssociatedCardId``); -1 for none."""
        return -1

    def super_pod(self, chip: Chip) -> lib.SuperPodInfo | None:
        """Where ``chip``'s node sits in a super pod (Huawei's SuperPodID, ServerIndex); None: nowhere.
        Only A3 and 950 nodes ask the driver (a failure raises its ChipError); the device-info ConfigMap
        says -2 for the others."""
        return None

    # -- a hot reset -------------------------------------------------------------------------

    def processes(self, chip: Chip) -> list[lib.ProcessMemory]:
        """The processes on the chip (host PIDs); SymbolMissing without the call: count the chip busy."""
        return self.api.processes(chip)

    def hot_reset(self, chip: Chip) -> None:
        """Start an in-band reset of ``chip``, its reset group with it; returns at once (see boot_status)."""
        self.api.reset(chip, lib.ResetChannel.INBAND)

    def boot_status(self, chip: Chip) -> int:
        """``dcmi_get_device_boot_status``: a :class:`~backends.library.BootStatus`; a reset ends at 16."""
        return self.api.boot_status(chip)
