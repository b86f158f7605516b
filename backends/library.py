"""The device-library interface: the DCMI calls the plugin needs, typed.

The cffi binding of ``libdcmi.so`` (:mod:`backends.dcmi`) and the fake
(:mod:`backends.fake`) implement :class:`DeviceLibrary` with DCMI's semantics:
(card_id, device_id) ids, card ids that need not be 0..N-1, every failure a
:class:`~backends.errors.DcmiError` with DCMI's code. The Ascend 950 speaks
v2 (:class:`DeviceLibraryV2`). Synchronous and not thread-safe, like DCMI.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType
from typing import Final, Protocol

# dcmi_get_device_health: the value for "device does not exist".
HEALTH_ABSENT = 0xFFFFFFFF

# The DCMI functions the plugin can do without (drivers differ: older ones, some builds), and what it does
# without each (said once at init, by discovery and doctor). A library reports which it lacks right after
# init (missing_functions); any other function is required: its absence is a SymbolMissing at the call.
WITHOUT: Final[Mapping[str, str]] = MappingProxyType(
    {
        "dcmi_get_device_errorcode_v2": "health comes from dcmi_get_device_health alone (fault codes are not "
        "polled; fault events still count)",
        "dcmi_subscribe_fault_event": "no fault events: health comes from polling alone",
        "dcmi_get_device_pcie_info_v2": "no NUMA nodes: placement and the Topology Manager get no NUMA "
        "preference",
        "dcmi_get_device_ip": "device IPs are unknown (Volcano's rank table says -1)",
        "dcmi_get_device_info": "AI cores come from chip info or the family nominal figure; no vNPU is seen",
        "dcmi_get_device_hbm_info": "the device memory of HBM chips (the 910 families) is unknown (no DRA "
        "memory capacity)",
        "dcmi_get_device_memory_info_v3": "the device memory of DDR chips (310, 310B, 310P) is unknown (no "
        "DRA memory capacity)",
        "dcmi_get_device_temperature": "no chip temperature in the telemetry",
        "dcmi_get_device_power_info": "no chip power in the telemetry",
        "dcmi_mcu_get_power_info": "no card power (read by the card's MCU) in the telemetry",
        "dcmi_get_device_voltage": "no chip voltage in the telemetry",
        "dcmi_get_device_frequency": "no AI-core frequency in the telemetry",
        "dcmi_get_device_utilization_rate": "no utilization figures in the telemetry",
        "dcmi_get_device_multi_utilization_rate": "utilization comes from dcmi_get_device_utilization_rate",
        "dcmi_get_device_multi_utilization_rate_period": "utilization comes from the instant multi-rate call",
        "dcmi_get_device_ecc_info": "no ECC counters in the telemetry",
        "dcmi_get_device_network_health": "the RoCE network health comes from fault codes alone",
        "dcmi_get_device_die_v2": "the telemetry's vdie_id label is empty",
        "dcmi_get_device_resource_info": "no process list: hot reset counts every chip as busy",
        "dcmi_set_device_reset": "no hot reset: a faulted chip stays out until it is reset by hand",
        "dcmi_get_device_boot_status": "no hot reset: the end of a reset cannot be seen",
        "dcmi_get_netdev_brother_device": "an A3 reset group has no brother card",
        "dcmi_get_device_outband_channel_state": "no out-of-band reset",
        "dcmi_create_vdevice": "no vNPUs made on demand: chips are offered whole",
        "dcmi_set_destroy_vdevice": "no vNPUs made on demand: chips are offered whole",
        "dcmi_get_affinity_cpu_info_by_device_id": "NUMA nodes come from the PCIe device's numa_node alone",
    }
)
OPTIONAL_FUNCTIONS: Final[frozenset[str]] = frozenset(WITHOUT)

# dcmi_get_device_info(CHIP_INF, SPOD_INFO): a super pod id or server index of
# 0xffffffff means "none" (Huawei writes it as -1).
SPOD_NONE: Final = 0xFFFFFFFF
# Its super_pod_type on a 950: the products whose nodes sit in racks (1D and 2D SuperPoDs).
_PODS_WITH_RACKS: Final = (1, 2)
# dcmi_set_destroy_vdevice: this vNPU id destroys every vNPU of the chip.
ALL_VDEVS: Final = 0xFFFF
# dcmi_create_vdevice: a template name fills at most this many bytes (NUL excluded).
MAX_TEMPLATE_NAME: Final = 31


def template_name_bytes(template: str) -> bytes:
    """``template`` as ``dcmi_create_vdev_res_stru.template_name`` holds it; ValueError where it does not fit
    (whether the driver knows it is the driver's answer, -8001)."""
    try:
        encoded = template.encode("ascii")
    except UnicodeEncodeError:
        encoded = b""
    if not encoded or len(encoded) > MAX_TEMPLATE_NAME or b"\0" in encoded:
        raise ValueError(
            f"vNPU template {template!r} cannot be passed to dcmi_create_vdevice: "
            f"it must be 1 to {MAX_TEMPLATE_NAME} ASCII characters, e.g. 'vir04'"
        )
    return encoded


class FrequencyType(IntEnum):
    """``enum dcmi_freq_type``: which clock ``dcmi_get_device_frequency`` reads (MHz)."""

    DDR = 1
    CTRLCPU = 2
    HBM = 6
    AICORE_CURRENT = 7
    AICORE_MAX = 9
    VECTORCORE_CURRENT = 12


class UtilizationType(IntEnum):
    """``input_type`` of ``dcmi_get_device_utilization_rate`` (the header's DCMI_UTILIZATION_RATE_*; %)."""

    DDR = 1  # the docs call it "memory"
    AICORE = 2
    AICPU = 3
    CTRLCPU = 4
    DDR_BANDWIDTH = 5
    HBM = 6
    HBM_BANDWIDTH = 10
    VECTORCORE = 12
    NPU = 13  # the chip overall
    AICUBE = 14


class EccDeviceType(IntEnum):
    """``enum dcmi_device_type``: whose ECC counters ``dcmi_get_device_ecc_info`` reads."""

    DDR = 0
    SRAM = 1
    HBM = 2
    NPU = 3


class DieType(IntEnum):
    """``enum dcmi_die_type``: VDIE is npu-exporter's ``vdie_id`` (empty on a 950: it answers DDIE only)."""

    NDIE = 0
    VDIE = 1


class ResetChannel(IntEnum):
    """``enum dcmi_reset_channel``: in-band through the driver, out-of-band through the BMC."""

    OUTBAND = 0
    INBAND = 1


class BootStatus(IntEnum):
    """``enum dcmi_boot_status``: a reset is over at SYSTEM_START_FINISH, not at FINISH."""

    UNINIT = 0
    BIOS = 1
    OS = 2
    FINISH = 3
    SYSTEM_START_FINISH = 16


class NetworkHealth(IntEnum):
    """``enum dcmi_rdfx_detect_result`` of ``dcmi_get_device_network_health``: OK and INIT: a working link."""

    OK = 0
    SOCK_FAIL = 1
    RECV_TIMEOUT = 2
    UNREACH = 3
    TIME_EXCEEDED = 4
    FAULT = 5
    INIT = 6
    THREAD_ERR = 7
    IP_SET = 8


@dataclass(frozen=True)
class ChipInfo:
    """``struct dcmi_chip_info_v2``, decoded."""

    chip_type: str
    chip_name: str
    chip_ver: str
    aicore_cnt: int
    npu_name: str = ""


@dataclass(frozen=True)
class MemoryInfo:
    """Device memory in MiB (HBM on 910B/A3, DDR elsewhere)."""

    total_mb: int
    used_mb: int


@dataclass(frozen=True)
class HbmInfo(MemoryInfo):
    """``struct dcmi_hbm_info`` whole: the HBM's size and use (MB; the library converts from KB) and more."""

    freq_mhz: int
    temperature_c: int  # temp
    bandwidth_utilization: int  # bandwith_util_rate (sic), percent


@dataclass(frozen=True)
class DdrInfo(MemoryInfo):
    """``struct dcmi_get_memory_info_stru`` whole: the chip's DDR (MB); used = size - available."""

    available_mb: int  # free, huge pages free included
    freq_mhz: int
    hugepage_size_kb: int
    hugepages_total: int
    hugepages_free: int
    utilization: int  # utiliza, percent


@dataclass(frozen=True)
class Power:
    """A power figure as DCMI gives it: in units of 0.1 W."""

    deciwatts: int

    @property
    def watts(self) -> float:
        return self.deciwatts / 10


@dataclass(frozen=True)
class Voltage:
    """A voltage figure as DCMI gives it: in units of 0.01 V."""

    centivolts: int

    @property
    def volts(self) -> float:
        return self.centivolts / 100


@dataclass(frozen=True)
class MultiUtilization:
    """``struct dcmi_multi_utilization_info``: the four figures of one sample, in percent."""

    aic: int  # aic_util: AI cube (npu-exporter's cube utilization)
    aiv: int  # aiv_util: AI vector (its vector utilization)
    aicore: int  # aicore_util: AI core (its utilization)
    npu: int  # npu_util: the chip overall


@dataclass(frozen=True)
class EccInfo:
    """``struct dcmi_ecc_info`` (the 9-field layout; older drivers leave the last two 0)."""

    enable_flag: int
    single_bit_error_cnt: int
    double_bit_error_cnt: int
    total_single_bit_error_cnt: int
    total_double_bit_error_cnt: int
    single_bit_isolated_pages_cnt: int
    double_bit_isolated_pages_cnt: int
    single_bit_next_isolated_pages_cnt: int
    double_bit_next_isolated_pages_cnt: int


@dataclass(frozen=True)
class DieId:
    """``struct dcmi_die_id``: five 32-bit words."""

    words: tuple[int, int, int, int, int]

    @property
    def text(self) -> str:
        """npu-exporter's spelling: each word as 8 upper-case hex digits, joined by ``-``."""
        return "-".join(f"{word:08X}" for word in self.words)


@dataclass(frozen=True)
class ProcessMemory:
    """One ``struct dcmi_proc_mem_info``: a process using the chip."""

    pid: int  # proc_id: the host's PID
    memory_bytes: int  # proc_mem_usage: device memory it holds, in bytes


@dataclass(frozen=True)
class SuperPodInfo:
    """``struct dcmi_spod_info`` (CHIP_INF / SPOD_INFO): ids -1 where the driver says 0xffffffff (none).
    Newer headers call ``server_id`` ``server_index`` and ``scale_type`` ``super_pod_size``."""

    sdid: int
    scale_type: int
    super_pod_id: int
    server_id: int
    chassis_id: int
    super_pod_type: int
    # A 950's answer: there chassis_id is the rack of a 1D or 2D SuperPoD (A3's means nothing of the kind).
    racks: bool = False

    @property
    def rack_id(self) -> int | None:
        """The rack (``chassis_id``) of a 950 SuperPoD node (``super_pod_type`` 1: 1D, 2: 2D); else None."""
        if self.racks and self.super_pod_type in _PODS_WITH_RACKS and 0 <= self.chassis_id < 1 << 31:
            return self.chassis_id
        return None


@dataclass(frozen=True)
class VdevActivity:
    """One vNPU's activity (VDEV_MNG / GET_VDEV_ACTIVITY): ``query_info.computing``'s vNPU figures."""

    vdev_id: int
    aicore_utilization: int  # vdev_aicore_utilization, percent
    memory_total_kb: int  # vdev_memory_total (npu-exporter publishes it as KB)
    memory_free_kb: int  # vdev_memory_free

    @property
    def memory_used_kb(self) -> int:
        return max(self.memory_total_kb - self.memory_free_kb, 0)


@dataclass(frozen=True)
class CreatedVdev:
    """``struct dcmi_create_vdev_out``: only ``vdev_id`` means something (the PCIe fields are reserved)."""

    vdev_id: int
    vfg_id: int
    pcie_bus: int
    pcie_device: int
    pcie_function: int


@dataclass(frozen=True)
class FaultEvent:
    """One ``struct dcmi_dms_fault_event`` delivered by a fault subscription."""

    logic_id: int
    code: int
    severity: int  # 0 warning, 1 minor, 2 major, 3 critical
    assertion: int  # 0 recovered, 1 raised, 2 one-off
    serial: int = 0  # event_serial_num: the driver's number for this event (0 when it gives none)


@dataclass(frozen=True)
class PcieAddress:
    """Where a chip sits on PCI (``struct dcmi_pcie_info_all``): domain, bus, device, function."""

    domain: int
    bus: int
    device: int
    function: int

    @property
    def bdf(self) -> str:
        """The sysfs spelling, e.g. ``0000:3b:00.0`` (lower-case hex, as /sys/bus/pci/devices names it)."""
        return f"{self.domain:04x}:{self.bus:02x}:{self.device:02x}.{self.function:x}"


@dataclass(frozen=True)
class VdevInfo:
    """One static vNPU (``struct dcmi_vdev_query_stru`` from VDEV_MNG / GET_VDEV_RESOURCE)."""

    vdev_id: int  # 100..1123, node-wide: the N of /dev/vdavinciN
    template: str  # query_info.name, the template it was made from, e.g. "vir02"
    aicore: float  # query_info.computing.aic
    memory_mb: int  # query_info.computing.memory_size
    vfg_id: int  # query_info.vfg_id: the virtual function group it belongs to
    status: int  # query_info.status, as the driver reports it
    in_use: bool  # query_info.is_container_used: a container holds it now


FaultHandler = Callable[[FaultEvent], None]


class DeviceLibrary(Protocol):
    """The DCMI operations the plugin uses. Raises DcmiError on failure."""

    @property
    def description(self) -> str:
        """Where this library comes from (a path, or the scenario file of a fake)."""

    # dcmi_init: must succeed before any other call.
    def init(self) -> None: ...
    # The OPTIONAL_FUNCTIONS it lacks, learnt at init (before it: -8005, like any call).
    def missing_functions(self) -> frozenset[str]: ...
    # dcmi_get_driver_version.
    def driver_version(self) -> str: ...
    # dcmi_get_card_list: the card ids, in ascending order.
    def card_list(self) -> list[int]: ...
    # dcmi_get_device_num_in_card: NPU chips on a card (the MCU excluded).
    def device_count(self, card_id: int) -> int: ...
    # dcmi_get_device_logic_id.
    def logic_id(self, card_id: int, device_id: int) -> int: ...
    # dcmi_get_device_phyid_from_logicid: the N of /dev/davinciN.
    def phy_id(self, logic_id: int) -> int: ...
    # dcmi_get_device_chip_info_v2.
    def chip_info(self, card_id: int, device_id: int) -> ChipInfo: ...
    # dcmi_get_device_info(VDEV_MNG, GET_TOTAL_RESOURCE): computing.aic.
    def total_aicore(self, card_id: int, device_id: int) -> float: ...
    # dcmi_get_device_health: 0 ok, 1 minor, 2 major, 3 critical, HEALTH_ABSENT.
    def health(self, card_id: int, device_id: int) -> int: ...
    # dcmi_get_device_errorcode_v2: the chip's current fault codes.
    def error_codes(self, card_id: int, device_id: int) -> list[int]: ...
    # dcmi_get_device_hbm_info (910 family; -8255 on chips without HBM).
    def hbm_info(self, card_id: int, device_id: int) -> HbmInfo: ...
    # dcmi_get_device_memory_info_v3 (-8255 on 910B and A3, which have no DDR).
    def memory_info(self, card_id: int, device_id: int) -> DdrInfo: ...
    # dcmi_get_device_pcie_info_v2 (-8255 on SoC boards such as 310B).
    def pcie_address(self, card_id: int, device_id: int) -> PcieAddress: ...
    # The chip's static vNPUs: vdev_id[:vdev_num] of VDEV_MNG / GET_TOTAL_RESOURCE (-8255: none).
    def vdev_ids(self, card_id: int, device_id: int) -> list[int]: ...
    # dcmi_get_device_info(VDEV_MNG, GET_VDEV_RESOURCE) for one of vdev_ids.
    def vdev_info(self, card_id: int, device_id: int, vdev_id: int) -> VdevInfo: ...
    # dcmi_get_device_ip of RoCE port 0 as text: IPv4, then IPv6 after a permanent IPv4 failure. Both failing
    # raise the IPv6 error; a link-local answer is the caller's to refuse (Huawei's does).
    def device_ip(self, card_id: int, device_id: int) -> str: ...

    # -- telemetry ---------------------------------------------------------------
    # dcmi_get_device_temperature: degrees Celsius (below -275 means the sensor failed).
    def temperature(self, card_id: int, device_id: int) -> int: ...
    # dcmi_get_device_power_info: the chip's power.
    def power(self, card_id: int, device_id: int) -> Power: ...
    # dcmi_mcu_get_power_info: the whole card's power, read by its MCU (310P boards).
    def board_power(self, card_id: int) -> Power: ...
    # dcmi_get_device_voltage.
    def voltage(self, card_id: int, device_id: int) -> Voltage: ...
    # dcmi_get_device_frequency: MHz of the clock kind.
    def frequency(self, card_id: int, device_id: int, kind: FrequencyType) -> int: ...
    # dcmi_get_device_utilization_rate: percent busy of kind.
    def utilization(self, card_id: int, device_id: int, kind: UtilizationType) -> int: ...
    # dcmi_get_device_multi_utilization_rate: AI cube, vector, core and overall in one sample.
    def multi_utilization(self, card_id: int, device_id: int) -> MultiUtilization: ...
    # dcmi_get_device_multi_utilization_rate_period: the same over period_s (1-4 s).
    def multi_utilization_period(self, card_id: int, device_id: int, period_s: int) -> MultiUtilization: ...
    # dcmi_get_device_ecc_info: the ECC counters of the chip's kind memory.
    def ecc_info(self, card_id: int, device_id: int, kind: EccDeviceType) -> EccInfo: ...
    # dcmi_get_device_network_health: a NetworkHealth; it can block after a card drop.
    def network_health(self, card_id: int, device_id: int) -> int: ...
    # dcmi_get_device_die_v2.
    def die_id(self, card_id: int, device_id: int, kind: DieType) -> DieId: ...
    # dcmi_get_device_resource_info: the processes on the chip (at most 32; host PIDs).
    def processes(self, card_id: int, device_id: int) -> list[ProcessMemory]: ...

    # -- hot reset -----------------------------------------------------------------
    # dcmi_set_device_reset: start a reset ("not ready" until back; a 300I Duo card by device 0).
    def reset(self, card_id: int, device_id: int, channel: ResetChannel) -> None: ...
    # dcmi_get_device_boot_status: a BootStatus value; a reset ends at 16.
    def boot_status(self, card_id: int, device_id: int) -> int: ...
    # dcmi_get_netdev_brother_device: the card an A3 card is reset with (-8255 elsewhere).
    def brother_card(self, card_id: int, device_id: int) -> int: ...
    # dcmi_get_device_outband_channel_state: 1 if an out-of-band reset can be done, 0 if not.
    def outband_channel_state(self, card_id: int, device_id: int) -> int: ...

    # -- identity in a super pod -----------------------------------------------------
    # dcmi_get_device_info(CHIP_INF, SPOD_INFO) (A3; -8255 elsewhere).
    def super_pod_info(self, card_id: int, device_id: int) -> SuperPodInfo: ...

    # -- vNPUs on demand -------------------------------------------------------------
    # dcmi_get_device_info(VDEV_MNG, GET_VDEV_ACTIVITY) for one of vdev_ids.
    def vdev_activity(self, card_id: int, device_id: int, vdev_id: int) -> VdevActivity: ...
    # dcmi_create_vdevice from template (vir04); ids chosen by the driver unless given. -8001 an unknown
    # template, -8020 no room for it; a name too long raises ValueError.
    def create_vdev(
        self,
        card_id: int,
        device_id: int,
        template: str,
        vdev_id: int | None = None,
        vfg_id: int | None = None,
    ) -> CreatedVdev: ...
    # dcmi_set_destroy_vdevice; ALL_VDEVS destroys every vNPU of the chip.
    def destroy_vdev(self, card_id: int, device_id: int, vdev_id: int) -> None: ...
    # dcmi_subscribe_fault_event for every device; handler runs on a library thread.
    def subscribe_faults(self, handler: FaultHandler) -> None: ...
    # dcmi_get_affinity_cpu_info_by_device_id: the CPUs near the chip, a cpulist (0-23).
    def affinity_cpu(self, card_id: int, device_id: int) -> str: ...
    # Release the library (dlclose); later calls fail until init.
    def close(self) -> None: ...
    # The same library through DCMI's v2 API (Ascend 950), not initialised: after dcmiv2_init only the v2
    # calls answer.
    def v2(self) -> DeviceLibraryV2: ...


# Each v1 function the plugin calls and its DCMI v2 counterpart: above the binding functions keep
# their v1 names (``missing``, ``WITHOUT``). The v1 functions without one do not exist on a 950.
V2_NAMES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "dcmi_init": "dcmiv2_init",
        "dcmi_get_driver_version": "dcmiv2_get_driver_version",
        "dcmi_get_card_list": "dcmiv2_get_device_list",
        "dcmi_get_device_phyid_from_logicid": "dcmiv2_get_chip_phy_id_by_dev_id",
        "dcmi_get_device_chip_info_v2": "dcmiv2_get_device_chip_info",
        "dcmi_get_device_info": "dcmiv2_get_device_info",
        "dcmi_get_device_health": "dcmiv2_get_device_health",
        "dcmi_get_device_errorcode_v2": "dcmiv2_get_device_error_code_list",
        "dcmi_get_device_hbm_info": "dcmiv2_get_device_hbm_info",
        "dcmi_get_device_pcie_info_v2": "dcmiv2_get_device_pcie_info",
        "dcmi_get_affinity_cpu_info_by_device_id": "dcmiv2_get_affinity_cpu_info_by_dev_id",
        "dcmi_subscribe_fault_event": "dcmiv2_subscribe_fault_event",
        "dcmi_get_device_temperature": "dcmiv2_get_device_temperature",
        "dcmi_get_device_power_info": "dcmiv2_get_device_power_info",
        "dcmi_get_device_voltage": "dcmiv2_get_device_voltage",
        "dcmi_get_device_frequency": "dcmiv2_get_device_frequency",
        "dcmi_get_device_utilization_rate": "dcmiv2_get_device_utilization_rate",
        "dcmi_get_device_multi_utilization_rate": "dcmiv2_get_device_multi_utilization_rate",
        "dcmi_get_device_multi_utilization_rate_period": "dcmiv2_get_device_multi_utilization_rate_period",
        "dcmi_get_device_ecc_info": "dcmiv2_get_device_ecc_info",
        "dcmi_get_device_network_health": "dcmiv2_get_device_network_health",
        "dcmi_get_device_die_v2": "dcmiv2_get_device_die_id",
        "dcmi_get_device_resource_info": "dcmiv2_get_device_proc_mem_info",
        "dcmi_set_device_reset": "dcmiv2_reset_device",
        "dcmi_get_device_boot_status": "dcmiv2_get_device_boot_status",
    }
)


def v2_name(function: str) -> str:
    """The v2 name of a v1 function (itself when it has none)."""
    return V2_NAMES.get(function, function)


class DeviceLibraryV2(Protocol):
    """DCMI's v2 API, as the Ascend 950 answers it. Raises DcmiError on failure. ``dev_id`` is the logical
    id (:meth:`device_list`), never the physical id (:meth:`phy_id`, the N of ``npu-<N>``); values are
    those of the v1 calls of the same name."""

    @property
    def description(self) -> str: ...

    # dcmiv2_init: -8255 on any chip but a 950.
    def init(self) -> None: ...
    # The v2 counterparts of OPTIONAL_FUNCTIONS the library lacks, by their v1 names.
    def missing_functions(self) -> frozenset[str]: ...
    def driver_version(self) -> str: ...
    # dcmiv2_get_device_list: the logical ids, ascending.
    def device_list(self) -> list[int]: ...
    # dcmiv2_get_chip_phy_id_by_dev_id.
    def phy_id(self, dev_id: int) -> int: ...
    def chip_info(self, dev_id: int) -> ChipInfo: ...
    def total_aicore(self, dev_id: int) -> float: ...
    def super_pod_info(self, dev_id: int) -> SuperPodInfo: ...
    def health(self, dev_id: int) -> int: ...
    def error_codes(self, dev_id: int) -> list[int]: ...
    def hbm_info(self, dev_id: int) -> HbmInfo: ...
    def pcie_address(self, dev_id: int) -> PcieAddress: ...
    def affinity_cpu(self, dev_id: int) -> str: ...
    def temperature(self, dev_id: int) -> int: ...
    def power(self, dev_id: int) -> Power: ...
    def voltage(self, dev_id: int) -> Voltage: ...
    def frequency(self, dev_id: int, kind: FrequencyType) -> int: ...
    def utilization(self, dev_id: int, kind: UtilizationType) -> int: ...
    def multi_utilization(self, dev_id: int) -> MultiUtilization: ...
    def multi_utilization_period(self, dev_id: int, period_s: int) -> MultiUtilization: ...
    def ecc_info(self, dev_id: int, kind: EccDeviceType) -> EccInfo: ...
    def network_health(self, dev_id: int) -> int: ...
    def die_id(self, dev_id: int, kind: DieType) -> DieId: ...
    def processes(self, dev_id: int) -> list[ProcessMemory]: ...
    # dcmiv2_reset_device: in-band only on a 950 (out-of-band is -8255).
    def reset(self, dev_id: int, channel: ResetChannel) -> None: ...
    def boot_status(self, dev_id: int) -> int: ...
    # dcmiv2_subscribe_fault_event(-1, ...): every chip; events carry the logical id.
    def subscribe_faults(self, handler: FaultHandler) -> None: ...
    def close(self) -> None: ...
