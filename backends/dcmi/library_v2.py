"""DcmiV2Library: DCMI's v2 API as the Ascend 950 answers it (``dcmi_init`` there answers -8255).

It shares the handle of the v1 library it came from; every call takes the chip's logical ``dev_id``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from backends.dcmi import decode
from backends.dcmi._dcmi_cffi import ffi
from backends.dcmi.handle import LibraryHandle
from backends.errors import NOT_INITIALISED, DcmiError
from backends.library import (
    OPTIONAL_FUNCTIONS,
    V2_NAMES,
    ChipInfo,
    DieId,
    DieType,
    EccDeviceType,
    EccInfo,
    FaultHandler,
    FrequencyType,
    HbmInfo,
    MultiUtilization,
    PcieAddress,
    Power,
    ProcessMemory,
    ResetChannel,
    SuperPodInfo,
    UtilizationType,
    Voltage,
)

log = logging.getLogger(__name__)

_LIST_LEN: Final = int(ffi.integer_const("MAX_CARD_NUM"))  # dcmiv2_get_device_list: at most 64 chips
_ERROR_CODES_LEN: Final = int(ffi.integer_const("DCMI_ERROR_CODE_MAX_COUNT"))
_VERSION_LEN: Final = int(ffi.integer_const("MAX_LENTH"))
_PROCESSES_LEN: Final = int(ffi.integer_const("DCMI_MAX_PROC_NUM"))
_VDEV_MNG: Final = int(ffi.integer_const("DCMI_MAIN_CMD_VDEV_MNG"))
_TOTAL_RESOURCE: Final = int(ffi.integer_const("DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE"))
_CHIP_INF: Final = int(ffi.integer_const("DCMI_MAIN_CMD_CHIP_INF"))
_SPOD_INFO: Final = int(ffi.integer_const("DCMI_CHIP_INF_SUB_CMD_SPOD_INFO"))
_ALL: Final = -1  # dev_id -1 subscribes every chip of the node

# Subscribes a handler through a subscription function: (function, handler, *chips).
Subscriber = Callable[..., None]


class DcmiV2Library:
    """A DeviceLibraryV2 over ``libdcmi.so``; :meth:`init` opens the library if it is not open yet."""

    def __init__(self, handle: LibraryHandle, subscribe: Subscriber) -> None:
        self._handle = handle
        self._subscribe = subscribe  # the v1 library's: one kind of fault callback for both APIs
        self._missing: frozenset[str] | None = None
        self._call = handle.call
        self._read = handle.read

    @property
    def description(self) -> str:
        return f"{self._handle.description} (DCMI v2)"

    def init(self) -> None:
        handle = self._handle
        handle.open()
        if self._missing is None:
            self._missing = frozenset(
                name for name in OPTIONAL_FUNCTIONS if name in V2_NAMES and handle.lacks(V2_NAMES[name])
            )
            if self._missing:
                lacking = sorted(V2_NAMES[name] for name in self._missing)
                log.info(
                    "the DCMI library lacks optional v2 functions",
                    extra={"library": handle.description, "missing": lacking},
                )
        self._call("dcmiv2_init")

    def missing_functions(self) -> frozenset[str]:
        if self._handle.lib is None or self._missing is None:
            raise DcmiError("missing_functions", NOT_INITIALISED)
        return self._missing

    def driver_version(self) -> str:
        buffer = ffi.new("char[]", _VERSION_LEN)
        self._call("dcmiv2_get_driver_version", buffer, _VERSION_LEN)
        return decode.text(buffer)

    def device_list(self) -> list[int]:
        chips = ffi.new("int[]", _LIST_LEN)
        count = ffi.new("int *")
        self._call("dcmiv2_get_device_list", chips, count, _LIST_LEN)  # the list first, the count second
        return sorted(int(dev) for dev in chips[0 : max(0, min(int(count[0]), _LIST_LEN))])

    def phy_id(self, dev_id: int) -> int:
        return self._read("dcmiv2_get_chip_phy_id_by_dev_id", "unsigned int", dev_id)

    def chip_info(self, dev_id: int) -> ChipInfo:
        info = ffi.new("struct dcmi_chip_info_v2 *")
        self._call("dcmiv2_get_device_chip_info", dev_id, info)
        return decode.chip_info(info)

    def total_aicore(self, dev_id: int) -> float:
        resource = ffi.new("struct dcmi_soc_total_resource *")
        self._handle.device_info("dcmiv2_get_device_info", _VDEV_MNG, _TOTAL_RESOURCE, resource, dev_id)
        return float(resource.computing.aic)

    def super_pod_info(self, dev_id: int) -> SuperPodInfo:
        info = ffi.new("struct dcmi_spod_info *")
        self._handle.device_info("dcmiv2_get_device_info", _CHIP_INF, _SPOD_INFO, info, dev_id)
        return decode.super_pod_info(info)

    def health(self, dev_id: int) -> int:
        return self._read("dcmiv2_get_device_health", "unsigned int", dev_id)

    def error_codes(self, dev_id: int) -> list[int]:
        count = ffi.new("int *")
        codes = ffi.new("unsigned int[]", _ERROR_CODES_LEN)
        self._call("dcmiv2_get_device_error_code_list", dev_id, count, codes, _ERROR_CODES_LEN)
        return [int(code) for code in codes[0 : max(0, min(int(count[0]), _ERROR_CODES_LEN))]]

    def hbm_info(self, dev_id: int) -> HbmInfo:
        info = ffi.new("struct dcmi_hbm_info *")
        self._call("dcmiv2_get_device_hbm_info", dev_id, info)
        return decode.hbm_info(info)

    def pcie_address(self, dev_id: int) -> PcieAddress:
        info = ffi.new("struct dcmi_pcie_info_all *")
        self._call("dcmiv2_get_device_pcie_info", dev_id, info)
        return decode.pcie_address(info)

    def affinity_cpu(self, dev_id: int) -> str:
        return self._handle.cpulist("dcmiv2_get_affinity_cpu_info_by_dev_id", dev_id)

    def temperature(self, dev_id: int) -> int:
        return self._read("dcmiv2_get_device_temperature", "int", dev_id)

    def power(self, dev_id: int) -> Power:
        return Power(self._read("dcmiv2_get_device_power_info", "int", dev_id))

    def voltage(self, dev_id: int) -> Voltage:
        return Voltage(self._read("dcmiv2_get_device_voltage", "unsigned int", dev_id))

    def frequency(self, dev_id: int, kind: FrequencyType) -> int:
        return self._read("dcmiv2_get_device_frequency", "unsigned int", dev_id, int(kind))

    def utilization(self, dev_id: int, kind: UtilizationType) -> int:
        return self._read("dcmiv2_get_device_utilization_rate", "unsigned int", dev_id, int(kind))

    def multi_utilization(self, dev_id: int) -> MultiUtilization:
        info = ffi.new("struct dcmi_multi_utilization_info *")
        self._call("dcmiv2_get_device_multi_utilization_rate", dev_id, info)
        return decode.multi_utilization(info)

    def multi_utilization_period(self, dev_id: int, period_s: int) -> MultiUtilization:
        info = ffi.new("struct dcmi_multi_utilization_info *")
        self._call("dcmiv2_get_device_multi_utilization_rate_period", dev_id, info, period_s)
        return decode.multi_utilization(info)

    def ecc_info(self, dev_id: int, kind: EccDeviceType) -> EccInfo:
        info = ffi.new("struct dcmi_ecc_info *")  # 36 bytes: the 950 driver fills the first 28
        self._call("dcmiv2_get_device_ecc_info", dev_id, int(kind), info)
        return decode.ecc_info(info)

    def network_health(self, dev_id: int) -> int:
        return self._read("dcmiv2_get_device_network_health", "enum dcmi_rdfx_detect_result", dev_id)

    def die_id(self, dev_id: int, kind: DieType) -> DieId:
        die = ffi.new("struct dcmi_die_id *")
        self._call("dcmiv2_get_device_die_id", dev_id, int(kind), die)
        return decode.die_id(die)

    def processes(self, dev_id: int) -> list[ProcessMemory]:
        entries = ffi.new("struct dcmi_proc_mem_info[]", _PROCESSES_LEN)
        count = ffi.new("int *")
        self._call("dcmiv2_get_device_proc_mem_info", dev_id, entries, count)
        return decode.processes(entries, max(0, min(int(count[0]), _PROCESSES_LEN)))

    def reset(self, dev_id: int, channel: ResetChannel) -> None:
        self._call("dcmiv2_reset_device", dev_id, int(channel))

    def boot_status(self, dev_id: int) -> int:
        return self._read("dcmiv2_get_device_boot_status", "enum dcmi_boot_status", dev_id)

    def subscribe_faults(self, handler: FaultHandler) -> None:
        self._subscribe("dcmiv2_subscribe_fault_event", handler, _ALL)

    def close(self) -> None:
        self._missing = None
        self._handle.close()
