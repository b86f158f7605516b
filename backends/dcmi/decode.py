"""DCMI structs -> the plain values of :mod:`backends.library`.

Kept apart from the calls so each conversion can be read against the struct
it decodes (``build_ffi.CDEF``), and so nothing above the binding ever holds
cdata that dies with its buffer.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from backends.dcmi._dcmi_cffi import ffi
from backends.library import ChipInfo, FaultEvent, MemoryInfo, PcieAddress, VdevInfo


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


def hbm_info(info: Any) -> MemoryInfo:
    """``struct dcmi_hbm_info``: the library has already turned KB into MB."""
    return MemoryInfo(total_mb=int(info.memory_size), used_mb=int(info.memory_usage))


def memory_info(info: Any) -> MemoryInfo:
    """``struct dcmi_get_memory_info_stru``: used is what is not available (huge pages count as free)."""
    total = int(info.memory_size)
    return MemoryInfo(total_mb=total, used_mb=max(total - int(info.memory_available), 0))


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
