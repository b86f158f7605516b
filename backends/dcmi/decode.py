"""DCMI structs -> the plain values of :mod:`backends.library`: nothing above the binding holds cdata."""

from __future__ import annotations

import ipaddress
from typing import Any

from backends.dcmi._dcmi_cffi import ffi
from backends.library import (
    SPOD_NONE,
    ChipInfo,
    CreatedVdev,
    DdrInfo,
    DieId,
    EccInfo,
    FaultEvent,
    HbmInfo,
    MultiUtilization,
    PcieAddress,
    ProcessMemory,
    SuperPodInfo,
    VdevActivity,
    VdevInfo,
)


def text(field: Any) -> str:
    """A NUL-terminated string in a fixed ``unsigned char[N]`` array (the driver stops at the first 0)."""
    raw: bytes = ffi.buffer(field)[:]
    return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace")


def chip_info(info: Any) -> ChipInfo:
    """``struct dcmi_chip_info_v2``."""
    return ChipInfo(
        chip_type=text(info.chip_type),
        chip_name=text(info.chip_name),
        chip_ver=text(info.chip_ver),
        aicore_cnt=int(info.aicore_cnt),
        npu_name=text(info.npu_name),
    )


def hbm_info(info: Any) -> HbmInfo:
    """``struct dcmi_hbm_info``: the library has already turned KB into MB."""
    return HbmInfo(
        total_mb=int(info.memory_size),
        used_mb=int(info.memory_usage),
        freq_mhz=int(info.freq),
        temperature_c=int(info.temp),
        bandwidth_utilization=int(info.bandwith_util_rate),
    )


def memory_info(info: Any) -> DdrInfo:
    """``struct dcmi_get_memory_info_stru``: used is what is not available (huge pages count as free)."""
    total, available = int(info.memory_size), int(info.memory_available)
    return DdrInfo(
        total_mb=total,
        used_mb=max(total - available, 0),
        available_mb=available,
        freq_mhz=int(info.freq),
        hugepage_size_kb=int(info.hugepagesize),
        hugepages_total=int(info.hugepages_total),
        hugepages_free=int(info.hugepages_free),
        utilization=int(info.utiliza),
    )


def multi_utilization(info: Any) -> MultiUtilization:
    """``struct dcmi_multi_utilization_info`` (the reserved words are not read)."""
    return MultiUtilization(
        aic=int(info.aic_util), aiv=int(info.aiv_util), aicore=int(info.aicore_util), npu=int(info.npu_util)
    )


def ecc_info(info: Any) -> EccInfo:
    """``struct dcmi_ecc_info``, every field by name."""
    return EccInfo(**{name: int(getattr(info, name)) for name in EccInfo.__dataclass_fields__})


def die_id(die: Any) -> DieId:
    """``struct dcmi_die_id``: its five words."""
    words = [int(word) for word in die.soc_die]
    return DieId((words[0], words[1], words[2], words[3], words[4]))


def processes(entries: Any, count: int) -> list[ProcessMemory]:
    """The first ``count`` of the ``struct dcmi_proc_mem_info`` array."""
    return [
        ProcessMemory(pid=int(entry.proc_id), memory_bytes=int(entry.proc_mem_usage))
        for entry in entries[0:count]
    ]


def _signed_spod(value: int) -> int:
    return -1 if value == SPOD_NONE else value


def super_pod_info(info: Any) -> SuperPodInfo:
    """``struct dcmi_spod_info``; 0xffffffff in the pod id or server index becomes -1."""
    return SuperPodInfo(
        sdid=int(info.sdid),
        scale_type=int(info.scale_type),
        super_pod_id=_signed_spod(int(info.super_pod_id)),
        server_id=_signed_spod(int(info.server_id)),
        chassis_id=int(info.chassis_id),
        super_pod_type=int(info.super_pod_type),
    )


def vdev_activity(query: Any) -> VdevActivity:
    """``struct dcmi_vdev_query_stru`` as GET_VDEV_ACTIVITY filled it."""
    computing = query.query_info.computing
    return VdevActivity(
        vdev_id=int(query.vdev_id),
        aicore_utilization=int(computing.vdev_aicore_utilization),
        memory_total_kb=int(computing.vdev_memory_total),
        memory_free_kb=int(computing.vdev_memory_free),
    )


def created_vdev(out: Any) -> CreatedVdev:
    """``struct dcmi_create_vdev_out``."""
    return CreatedVdev(
        vdev_id=int(out.vdev_id),
        vfg_id=int(out.vfg_id),
        pcie_bus=int(out.pcie_bus),
        pcie_device=int(out.pcie_device),
        pcie_function=int(out.pcie_func),
    )


def fault_event(event: Any) -> FaultEvent | None:
    """``struct dcmi_event``; None for event types other than a DMS fault."""
    if int(event.type) != int(ffi.integer_const("DCMI_DMS_FAULT_EVENT")):
        return None
    fault = event.event_t.dms_event
    return FaultEvent(
        logic_id=int(fault.deviceid),
        code=int(fault.event_id),
        severity=int(fault.severity),
        assertion=int(fault.assertion),
        serial=int(fault.event_serial_num),
    )


def pcie_address(info: Any) -> PcieAddress:
    """``struct dcmi_pcie_info_all``: the address fields (the vendor and device ids are not needed)."""
    return PcieAddress(
        domain=int(info.domain),
        bus=int(info.bdf_busid),
        device=int(info.bdf_deviceid),
        function=int(info.bdf_funcid),
    )


def vdev_info(query: Any) -> VdevInfo:
    """``struct dcmi_vdev_query_stru`` as GET_VDEV_RESOURCE filled it."""
    info = query.query_info
    return VdevInfo(
        vdev_id=int(query.vdev_id),
        template=text(info.name),
        aicore=float(info.computing.aic),
        memory_mb=int(info.computing.memory_size),
        vfg_id=int(info.vfg_id),
        status=int(info.status),
        in_use=bool(info.is_container_used),
    )


def ip_text(address: Any, version: int) -> str:
    """``struct dcmi_ip_addr`` of the family asked for (4 or 6), as text (IPv6 compressed)."""
    if version == 4:
        return str(ipaddress.IPv4Address(bytes(ffi.buffer(address.u_addr.ip4))))
    return str(ipaddress.IPv6Address(bytes(ffi.buffer(address.u_addr.ip6))))
