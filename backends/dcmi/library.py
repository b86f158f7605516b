"""DcmiLibrary: the DeviceLibrary over Huawei's libdcmi.so, one method per DCMI call.

Opened by :meth:`init`, never at import; the optional functions it lacks are probed (looked up, never
called) when it is opened (:meth:`DcmiLibrary.missing_functions`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Final

from backends.dcmi import decode
from backends.dcmi._dcmi_cffi import ffi
from backends.dcmi.handle import LibraryHandle
from backends.dcmi.library_v2 import DcmiV2Library
from backends.errors import NOT_INITIALISED, DcmiError
from backends.library import (
    OPTIONAL_FUNCTIONS,
    ChipInfo,
    CreatedVdev,
    DdrInfo,
    DeviceLibraryV2,
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
    VdevActivity,
    VdevInfo,
    Voltage,
    template_name_bytes,
)

log = logging.getLogger(__name__)

_CARD_LIST_LEN: Final = int(ffi.integer_const("MAX_CARD_NUM"))
_ERROR_CODES_LEN: Final = int(ffi.integer_const("DCMI_ERROR_CODE_MAX_COUNT"))
_VERSION_LEN: Final = int(ffi.integer_const("MAX_LENTH"))
_VDEV_MNG: Final = int(ffi.integer_const("DCMI_MAIN_CMD_VDEV_MNG"))
_TOTAL_RESOURCE: Final = int(ffi.integer_const("DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE"))
_VDEV_RESOURCE: Final = int(ffi.integer_const("DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE"))
_VDEV_ACTIVITY: Final = int(ffi.integer_const("DCMI_VMNG_SUB_CMD_GET_VDEV_ACTIVITY"))
_CHIP_INF: Final = int(ffi.integer_const("DCMI_MAIN_CMD_CHIP_INF"))
_SPOD_INFO: Final = int(ffi.integer_const("DCMI_CHIP_INF_SUB_CMD_SPOD_INFO"))
_PROCESSES_LEN: Final = int(ffi.integer_const("DCMI_MAX_PROC_NUM"))
_AUTO_ID: Final = 0xFFFFFFFF  # dcmi_create_vdevice: let the driver choose the vNPU or group id
_ROCE_PORT: Final = int(ffi.integer_const("DCMI_ROCE_PORT"))
_IP_TYPES: Final = {
    4: int(ffi.integer_const("DCMI_IPADDR_TYPE_V4")),
    6: int(ffi.integer_const("DCMI_IPADDR_TYPE_V6")),
}
_ALL: Final = -1  # card_id and device_id -1 subscribe every device of the node


class _FaultSubscription:
    """The C callback of a fault subscription, on the driver's thread: what the handler raises is
    logged and the event dropped, never sent back into C.
    """

    def __init__(self, handler: FaultHandler) -> None:
        self._handler = handler
        self._active = True
        self.callback: Any = ffi.callback("dcmi_fault_event_callback", self._on_event)

    def _on_event(self, event: Any) -> None:
        try:
            if not self._active:
                return
            decoded = decode.fault_event(event)
            if decoded is not None:
                self._handler(decoded)
        except Exception:
            log.exception(
                "handling a DCMI fault event failed; the event is dropped (polling still sees the fault)"
            )

    def stop(self) -> None:
        """Drop every later event; the callback itself stays valid."""
        self._active = False


class DcmiLibrary:
    """A DeviceLibrary over ``libdcmi.so`` via cffi (ABI mode, opened at :meth:`init`)."""

    def __init__(self, path: Path | None = None, *, allow_untrusted: bool = False) -> None:
        self._handle = LibraryHandle(path, allow_untrusted)
        self._missing: frozenset[str] = frozenset()
        self._call = self._handle.call
        self._read = self._handle.read

    @property
    def description(self) -> str:
        """The path of the library opened (before :meth:`init`: the one configured, if any)."""
        return self._handle.description

    def _subscribe(self, name: str, handler: FaultHandler, *chips: int) -> None:
        """``name(*chips, <no filter>, callback)``: v1's or v2's subscription, ``handler`` behind it."""
        subscription = _FaultSubscription(handler)
        self._handle.subscribe(name, subscription, subscription.callback, *chips)

    def _device_info(self, card_id: int, device_id: int, main_cmd: int, sub_cmd: int, buffer: Any) -> None:
        """``dcmi_get_device_info(main_cmd, sub_cmd)`` into the struct at ``buffer``, its size given."""
        self._handle.device_info("dcmi_get_device_info", main_cmd, sub_cmd, buffer, card_id, device_id)

    def _vdev_mng(self, card_id: int, device_id: int, sub_cmd: int, buffer: Any) -> None:
        self._device_info(card_id, device_id, _VDEV_MNG, sub_cmd, buffer)

    # -- DeviceLibrary -----------------------------------------------------------------

    def init(self) -> None:
        handle = self._handle
        if handle.open():
            self._missing = frozenset(name for name in OPTIONAL_FUNCTIONS if handle.lacks(name))
            if self._missing:
                log.info(
                    "the DCMI library lacks optional functions",
                    extra={"library": handle.description, "missing": sorted(self._missing)},
                )
        self._call("dcmi_init")

    def missing_functions(self) -> frozenset[str]:
        if self._handle.lib is None:
            raise DcmiError("missing_functions", NOT_INITIALISED)
        return self._missing

    def driver_version(self) -> str:
        buffer = ffi.new("char[]", _VERSION_LEN)
        self._call("dcmi_get_driver_version", buffer, _VERSION_LEN)
        return decode.text(buffer)

    def card_list(self) -> list[int]:
        count = ffi.new("int *")
        cards = ffi.new("int[]", _CARD_LIST_LEN)
        self._call("dcmi_get_card_list", count, cards, _CARD_LIST_LEN)
        return sorted(int(card) for card in cards[0 : min(int(count[0]), _CARD_LIST_LEN)])

    def device_count(self, card_id: int) -> int:
        count = ffi.new("int *")
        self._call("dcmi_get_device_num_in_card", card_id, count)
        return int(count[0])

    def logic_id(self, card_id: int, device_id: int) -> int:
        logic = ffi.new("int *")
        self._call("dcmi_get_device_logic_id", logic, card_id, device_id)
        return int(logic[0])

    def phy_id(self, logic_id: int) -> int:
        phy = ffi.new("unsigned int *")
        self._call("dcmi_get_device_phyid_from_logicid", logic_id, phy)
        return int(phy[0])

    def chip_info(self, card_id: int, device_id: int) -> ChipInfo:
        info = ffi.new("struct dcmi_chip_info_v2 *")
        self._call("dcmi_get_device_chip_info_v2", card_id, device_id, info)
        return decode.chip_info(info)

    def total_aicore(self, card_id: int, device_id: int) -> float:
        resource = ffi.new("struct dcmi_soc_total_resource *")
        self._vdev_mng(card_id, device_id, _TOTAL_RESOURCE, resource)
        return float(resource.computing.aic)

    def health(self, card_id: int, device_id: int) -> int:
        health = ffi.new("unsigned int *")
        self._call("dcmi_get_device_health", card_id, device_id, health)
        return int(health[0])

    def error_codes(self, card_id: int, device_id: int) -> list[int]:
        count = ffi.new("int *")
        codes = ffi.new("unsigned int[]", _ERROR_CODES_LEN)
        self._call("dcmi_get_device_errorcode_v2", card_id, device_id, count, codes, _ERROR_CODES_LEN)
        return [int(code) for code in codes[0 : max(0, min(int(count[0]), _ERROR_CODES_LEN))]]

    def hbm_info(self, card_id: int, device_id: int) -> HbmInfo:
        info = ffi.new("struct dcmi_hbm_info *")
        self._call("dcmi_get_device_hbm_info", card_id, device_id, info)
        return decode.hbm_info(info)

    def memory_info(self, card_id: int, device_id: int) -> DdrInfo:
        info = ffi.new("struct dcmi_get_memory_info_stru *")
        self._call("dcmi_get_device_memory_info_v3", card_id, device_id, info)
        return decode.memory_info(info)

    def pcie_address(self, card_id: int, device_id: int) -> PcieAddress:
        info = ffi.new("struct dcmi_pcie_info_all *")
        self._call("dcmi_get_device_pcie_info_v2", card_id, device_id, info)
        return decode.pcie_address(info)

    def vdev_ids(self, card_id: int, device_id: int) -> list[int]:
        resource = ffi.new("struct dcmi_soc_total_resource *")
        self._vdev_mng(card_id, device_id, _TOTAL_RESOURCE, resource)
        count = max(0, min(int(resource.vdev_num), len(resource.vdev_id)))
        return [int(vdev) for vdev in resource.vdev_id[0:count]]

    def vdev_info(self, card_id: int, device_id: int, vdev_id: int) -> VdevInfo:
        query = ffi.new("struct dcmi_vdev_query_stru *", {"vdev_id": vdev_id})
        self._vdev_mng(card_id, device_id, _VDEV_RESOURCE, query)
        return decode.vdev_info(query)

    def device_ip(self, card_id: int, device_id: int) -> str:
        try:
            return self._device_ip(card_id, device_id, 4)
        except DcmiError as error:
            if error.temporary:
                raise
            log.debug(
                "%s for IPv4 answered %d (%s) on card %d, device %d: asking for IPv6",
                error.function,
                error.code,
                error.meaning,
                card_id,
                device_id,
                extra={"function": error.function, "card": card_id, "device": device_id, "code": error.code},
            )
        return self._device_ip(card_id, device_id, 6)

    def _device_ip(self, card_id: int, device_id: int, version: int) -> str:
        """One ``dcmi_get_device_ip`` of RoCE port 0, the family asked for in ``ip.ip_type``."""
        ip = ffi.new("struct dcmi_ip_addr *", {"ip_type": _IP_TYPES[version]})
        mask = ffi.new("struct dcmi_ip_addr *", {"ip_type": _IP_TYPES[version]})
        self._call("dcmi_get_device_ip", card_id, device_id, _ROCE_PORT, 0, ip, mask)
        return decode.ip_text(ip, version)

    # -- telemetry ---------------------------------------------------------------

    def temperature(self, card_id: int, device_id: int) -> int:
        return self._read("dcmi_get_device_temperature", "int", card_id, device_id)

    def power(self, card_id: int, device_id: int) -> Power:
        return Power(self._read("dcmi_get_device_power_info", "int", card_id, device_id))

    def board_power(self, card_id: int) -> Power:
        return Power(self._read("dcmi_mcu_get_power_info", "int", card_id))

    def voltage(self, card_id: int, device_id: int) -> Voltage:
        return Voltage(self._read("dcmi_get_device_voltage", "unsigned int", card_id, device_id))

    def frequency(self, card_id: int, device_id: int, kind: FrequencyType) -> int:
        return self._read("dcmi_get_device_frequency", "unsigned int", card_id, device_id, int(kind))

    def utilization(self, card_id: int, device_id: int, kind: UtilizationType) -> int:
        return self._read("dcmi_get_device_utilization_rate", "unsigned int", card_id, device_id, int(kind))

    def multi_utilization(self, card_id: int, device_id: int) -> MultiUtilization:
        info = ffi.new("struct dcmi_multi_utilization_info *")
        self._call("dcmi_get_device_multi_utilization_rate", card_id, device_id, info)
        return decode.multi_utilization(info)

    def multi_utilization_period(self, card_id: int, device_id: int, period_s: int) -> MultiUtilization:
        info = ffi.new("struct dcmi_multi_utilization_info *")
        self._call("dcmi_get_device_multi_utilization_rate_period", card_id, device_id, info, period_s)
        return decode.multi_utilization(info)

    def ecc_info(self, card_id: int, device_id: int, kind: EccDeviceType) -> EccInfo:
        info = ffi.new("struct dcmi_ecc_info *")
        self._call("dcmi_get_device_ecc_info", card_id, device_id, int(kind), info)
        return decode.ecc_info(info)

    def network_health(self, card_id: int, device_id: int) -> int:
        return self._read(
            "dcmi_get_device_network_health", "enum dcmi_rdfx_detect_result", card_id, device_id
        )

    def die_id(self, card_id: int, device_id: int, kind: DieType) -> DieId:
        die = ffi.new("struct dcmi_die_id *")
        self._call("dcmi_get_device_die_v2", card_id, device_id, int(kind), die)
        return decode.die_id(die)

    def processes(self, card_id: int, device_id: int) -> list[ProcessMemory]:
        entries = ffi.new("struct dcmi_proc_mem_info[]", _PROCESSES_LEN)
        count = ffi.new("int *")
        self._call("dcmi_get_device_resource_info", card_id, device_id, entries, count)
        return decode.processes(entries, max(0, min(int(count[0]), _PROCESSES_LEN)))

    # -- hot reset -----------------------------------------------------------------

    def reset(self, card_id: int, device_id: int, channel: ResetChannel) -> None:
        self._call("dcmi_set_device_reset", card_id, device_id, int(channel))

    def boot_status(self, card_id: int, device_id: int) -> int:
        return self._read("dcmi_get_device_boot_status", "enum dcmi_boot_status", card_id, device_id)

    def brother_card(self, card_id: int, device_id: int) -> int:
        return self._read("dcmi_get_netdev_brother_device", "int", card_id, device_id)

    def outband_channel_state(self, card_id: int, device_id: int) -> int:
        return self._read("dcmi_get_device_outband_channel_state", "int", card_id, device_id)

    # -- identity in a super pod -----------------------------------------------------

    def super_pod_info(self, card_id: int, device_id: int) -> SuperPodInfo:
        info = ffi.new("struct dcmi_spod_info *")
        self._device_info(card_id, device_id, _CHIP_INF, _SPOD_INFO, info)
        return decode.super_pod_info(info)

    # -- vNPUs on demand -------------------------------------------------------------

    def vdev_activity(self, card_id: int, device_id: int, vdev_id: int) -> VdevActivity:
        query = ffi.new("struct dcmi_vdev_query_stru *", {"vdev_id": vdev_id})
        self._vdev_mng(card_id, device_id, _VDEV_ACTIVITY, query)
        return decode.vdev_activity(query)

    def create_vdev(
        self,
        card_id: int,
        device_id: int,
        template: str,
        vdev_id: int | None = None,
        vfg_id: int | None = None,
    ) -> CreatedVdev:
        request = ffi.new(
            "struct dcmi_create_vdev_res_stru *",
            {
                "vdev_id": _AUTO_ID if vdev_id is None else vdev_id,
                "vfg_id": _AUTO_ID if vfg_id is None else vfg_id,
                "template_name": template_name_bytes(template),
            },
        )
        out = ffi.new("struct dcmi_create_vdev_out *")
        self._call("dcmi_create_vdevice", card_id, device_id, request, out)
        return decode.created_vdev(out)

    def destroy_vdev(self, card_id: int, device_id: int, vdev_id: int) -> None:
        self._call("dcmi_set_destroy_vdevice", card_id, device_id, vdev_id)

    def subscribe_faults(self, handler: FaultHandler) -> None:
        self._subscribe("dcmi_subscribe_fault_event", handler, _ALL, _ALL)

    def affinity_cpu(self, card_id: int, device_id: int) -> str:
        return self._handle.cpulist("dcmi_get_affinity_cpu_info_by_device_id", card_id, device_id)

    def close(self) -> None:
        """Release the library; later calls fail with -8005 until :meth:`init` (see LibraryHandle.close)."""
        self._missing = frozenset()
        self._handle.close()

    def v2(self) -> DeviceLibraryV2:
        return DcmiV2Library(self._handle, self._subscribe)
