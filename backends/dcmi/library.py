"""DcmiLibrary and DcmiV2Library: the DeviceLibrary over Huawei's libdcmi.so, one method per DCMI call.

Opened by :meth:`init`, never at import. The v2 face (the Ascend 950) shares the handle and the calls both
APIs make alike, the chip named by its logical ``dev_id`` and the function by :data:`V2_NAMES`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Final

from backends.dcmi import decode
from backends.dcmi._dcmi_cffi import ffi
from backends.dcmi.handle import LibraryHandle
from backends.errors import NOT_INITIALISED, DcmiError
from backends.library import (
    OPTIONAL_FUNCTIONS,
    V2_NAMES,
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
    v2_name,
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
_ALL: Final = -1  # card_id and device_id (v2: dev_id) -1 subscribe every chip of the node


class _FaultSubscription:
    """The C callback of a fault subscription: what the handler raises is logged, never sent into C."""

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


class _SharedCalls:
    """The calls both faces make alike: the chip's ids first (v1: card and device; v2: the logical
    ``dev_id``), the function under its v1 name, which the v2 face turns into its v2 name."""

    _V2 = False

    def __init__(self, handle: LibraryHandle) -> None:
        self._handle = handle

    def _name(self, function: str) -> str:
        return v2_name(function) if self._V2 else function

    def _call(self, function: str, *args: Any) -> None:
        self._handle.call(self._name(function), *args)

    def _value(self, function: str, ctype: str, *args: Any) -> int:
        """``function(*args, &out)``, ``out`` one ``ctype`` (see LibraryHandle.read)."""
        return self._handle.read(self._name(function), ctype, *args)

    def _device_info(self, main_cmd: int, sub_cmd: int, buffer: Any, *chip: int) -> None:
        """``dcmi_get_device_info(main_cmd, sub_cmd)`` into the struct at ``buffer``, its size given."""
        self._handle.device_info(self._name("dcmi_get_device_info"), main_cmd, sub_cmd, buffer, *chip)

    def _subscribe(self, handler: FaultHandler, *chips: int) -> None:
        """``dcmi_subscribe_fault_event(*chips, <no filter>, callback)``, ``handler`` behind the callback."""
        subscription = _FaultSubscription(handler)
        name = self._name("dcmi_subscribe_fault_event")
        self._handle.subscribe(name, subscription, subscription.callback, *chips)

    def driver_version(self) -> str:
        buffer = ffi.new("char[]", _VERSION_LEN)
        self._call("dcmi_get_driver_version", buffer, _VERSION_LEN)
        return decode.text(buffer)

    def chip_info(self, *chip: int) -> ChipInfo:
        info = ffi.new("struct dcmi_chip_info_v2 *")
        self._call("dcmi_get_device_chip_info_v2", *chip, info)
        return decode.chip_info(info)

    def total_aicore(self, *chip: int) -> float:
        resource = ffi.new("struct dcmi_soc_total_resource *")
        self._device_info(_VDEV_MNG, _TOTAL_RESOURCE, resource, *chip)
        return float(resource.computing.aic)

    def super_pod_info(self, *chip: int) -> SuperPodInfo:
        info = ffi.new("struct dcmi_spod_info *")
        self._device_info(_CHIP_INF, _SPOD_INFO, info, *chip)
        return decode.super_pod_info(info)

    def health(self, *chip: int) -> int:
        return self._value("dcmi_get_device_health", "unsigned int", *chip)

    def error_codes(self, *chip: int) -> list[int]:
        count = ffi.new("int *")
        codes = ffi.new("unsigned int[]", _ERROR_CODES_LEN)
        self._call("dcmi_get_device_errorcode_v2", *chip, count, codes, _ERROR_CODES_LEN)
        return [int(code) for code in codes[0 : max(0, min(int(count[0]), _ERROR_CODES_LEN))]]

    def hbm_info(self, *chip: int) -> HbmInfo:
        info = ffi.new("struct dcmi_hbm_info *")
        self._call("dcmi_get_device_hbm_info", *chip, info)
        return decode.hbm_info(info)

    def pcie_address(self, *chip: int) -> PcieAddress:
        info = ffi.new("struct dcmi_pcie_info_all *")
        self._call("dcmi_get_device_pcie_info_v2", *chip, info)
        return decode.pcie_address(info)

    def affinity_cpu(self, *chip: int) -> str:
        return self._handle.cpulist(self._name("dcmi_get_affinity_cpu_info_by_device_id"), *chip)

    def temperature(self, *chip: int) -> int:
        return self._value("dcmi_get_device_temperature", "int", *chip)

    def power(self, *chip: int) -> Power:
        return Power(self._value("dcmi_get_device_power_info", "int", *chip))

    def voltage(self, *chip: int) -> Voltage:
        return Voltage(self._value("dcmi_get_device_voltage", "unsigned int", *chip))

    def multi_utilization(self, *chip: int) -> MultiUtilization:
        info = ffi.new("struct dcmi_multi_utilization_info *")
        self._call("dcmi_get_device_multi_utilization_rate", *chip, info)
        return decode.multi_utilization(info)

    def network_health(self, *chip: int) -> int:
        return self._value("dcmi_get_device_network_health", "enum dcmi_rdfx_detect_result", *chip)

    def processes(self, *chip: int) -> list[ProcessMemory]:
        entries = ffi.new("struct dcmi_proc_mem_info[]", _PROCESSES_LEN)
        count = ffi.new("int *")
        self._call("dcmi_get_device_resource_info", *chip, entries, count)
        return decode.processes(entries, max(0, min(int(count[0]), _PROCESSES_LEN)))

    def boot_status(self, *chip: int) -> int:
        return self._value("dcmi_get_device_boot_status", "enum dcmi_boot_status", *chip)


class DcmiLibrary(_SharedCalls):
    """A DeviceLibrary over ``libdcmi.so`` via cffi (ABI mode, opened at :meth:`init`)."""

    def __init__(self, path: Path | None = None, *, allow_untrusted: bool = False) -> None:
        super().__init__(LibraryHandle(path, allow_untrusted))
        self._missing: frozenset[str] = frozenset()

    @property
    def description(self) -> str:
        """The path of the library opened (before :meth:`init`: the one configured, if any)."""
        return self._handle.description

    def _vdev_mng(self, card_id: int, device_id: int, sub_cmd: int, buffer: Any) -> None:
        self._device_info(_VDEV_MNG, sub_cmd, buffer, card_id, device_id)

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

    def card_list(self) -> list[int]:
        count = ffi.new("int *")
        cards = ffi.new("int[]", _CARD_LIST_LEN)
        self._call("dcmi_get_card_list", count, cards, _CARD_LIST_LEN)
        return sorted(int(card) for card in cards[0 : min(int(count[0]), _CARD_LIST_LEN)])

    def device_count(self, card_id: int) -> int:
        return self._value("dcmi_get_device_num_in_card", "int", card_id)

    def logic_id(self, card_id: int, device_id: int) -> int:
        logic = ffi.new("int *")
        self._call("dcmi_get_device_logic_id", logic, card_id, device_id)
        return int(logic[0])

    def phy_id(self, logic_id: int) -> int:
        return self._value("dcmi_get_device_phyid_from_logicid", "unsigned int", logic_id)

    def memory_info(self, card_id: int, device_id: int) -> DdrInfo:
        info = ffi.new("struct dcmi_get_memory_info_stru *")
        self._call("dcmi_get_device_memory_info_v3", card_id, device_id, info)
        return decode.memory_info(info)

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

    def board_power(self, card_id: int) -> Power:
        return Power(self._value("dcmi_mcu_get_power_info", "int", card_id))

    def frequency(self, card_id: int, device_id: int, kind: FrequencyType) -> int:
        return self._value("dcmi_get_device_frequency", "unsigned int", card_id, device_id, int(kind))

    def utilization(self, card_id: int, device_id: int, kind: UtilizationType) -> int:
        return self._value("dcmi_get_device_utilization_rate", "unsigned int", card_id, device_id, int(kind))

    def multi_utilization_period(self, card_id: int, device_id: int, period_s: int) -> MultiUtilization:
        info = ffi.new("struct dcmi_multi_utilization_info *")
        self._call("dcmi_get_device_multi_utilization_rate_period", card_id, device_id, info, period_s)
        return decode.multi_utilization(info)

    def ecc_info(self, card_id: int, device_id: int, kind: EccDeviceType) -> EccInfo:
        info = ffi.new("struct dcmi_ecc_info *")
        self._call("dcmi_get_device_ecc_info", card_id, device_id, int(kind), info)
        return decode.ecc_info(info)

    def die_id(self, card_id: int, device_id: int, kind: DieType) -> DieId:
        die = ffi.new("struct dcmi_die_id *")
        self._call("dcmi_get_device_die_v2", card_id, device_id, int(kind), die)
        return decode.die_id(die)

    def reset(self, card_id: int, device_id: int, channel: ResetChannel) -> None:
        self._call("dcmi_set_device_reset", card_id, device_id, int(channel))

    def brother_card(self, card_id: int, device_id: int) -> int:
        return self._value("dcmi_get_netdev_brother_device", "int", card_id, device_id)

    def outband_channel_state(self, card_id: int, device_id: int) -> int:
        return self._value("dcmi_get_device_outband_channel_state", "int", card_id, device_id)

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
        self._subscribe(handler, _ALL, _ALL)

    def close(self) -> None:
        """Release the library; later calls fail with -8005 until :meth:`init` (see LibraryHandle.close)."""
        self._missing = frozenset()
        self._handle.close()

    def v2(self) -> DeviceLibraryV2:
        return DcmiV2Library(self._handle)


class DcmiV2Library(_SharedCalls):
    """A DeviceLibraryV2 over ``libdcmi.so`` (``dcmi_init`` answers -8255 on a 950), on the handle of the
    v1 library it came from; :meth:`init` opens the library if it is not open yet."""

    _V2 = True

    def __init__(self, handle: LibraryHandle) -> None:
        super().__init__(handle)
        self._missing: frozenset[str] | None = None

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

    def device_list(self) -> list[int]:
        chips = ffi.new("int[]", _CARD_LIST_LEN)  # at most 64 chips
        count = ffi.new("int *")
        self._call("dcmiv2_get_device_list", chips, count, _CARD_LIST_LEN)  # the list first, the count second
        return sorted(int(dev) for dev in chips[0 : max(0, min(int(count[0]), _CARD_LIST_LEN))])

    def phy_id(self, dev_id: int) -> int:
        return self._value("dcmiv2_get_chip_phy_id_by_dev_id", "unsigned int", dev_id)

    def frequency(self, dev_id: int, kind: FrequencyType) -> int:
        return self._value("dcmiv2_get_device_frequency", "unsigned int", dev_id, int(kind))

    def utilization(self, dev_id: int, kind: UtilizationType) -> int:
        return self._value("dcmiv2_get_device_utilization_rate", "unsigned int", dev_id, int(kind))

    def multi_utilization_period(self, dev_id: int, period_s: int) -> MultiUtilization:
        info = ffi.new("struct dcmi_multi_utilization_info *")
        self._call("dcmiv2_get_device_multi_utilization_rate_period", dev_id, info, period_s)
        return decode.multi_utilization(info)

    def ecc_info(self, dev_id: int, kind: EccDeviceType) -> EccInfo:
        info = ffi.new("struct dcmi_ecc_info *")  # 36 bytes: the 950 driver fills the first 28
        self._call("dcmiv2_get_device_ecc_info", dev_id, int(kind), info)
        return decode.ecc_info(info)

    def die_id(self, dev_id: int, kind: DieType) -> DieId:
        die = ffi.new("struct dcmi_die_id *")
        self._call("dcmiv2_get_device_die_id", dev_id, int(kind), die)
        return decode.die_id(die)

    def reset(self, dev_id: int, channel: ResetChannel) -> None:
        self._call("dcmiv2_reset_device", dev_id, int(channel))

    def subscribe_faults(self, handler: FaultHandler) -> None:
        self._subscribe(handler, _ALL)

    def close(self) -> None:
        self._missing = None
        self._handle.close()
