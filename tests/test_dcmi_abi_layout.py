"""The cdef's struct layouts are DCMI's: every size and offset of dcmi-abi.md section 3.10 (LP64).

cffi's ABI mode computes layouts from the cdef alone and nothing compares it
with the vendor header, so a wrong field type would silently shift every
field after it. These figures were measured with gcc on the DCMI header.
"""

from __future__ import annotations

from enum import IntEnum

import pytest

from backends.dcmi._dcmi_cffi import ffi
from backends.library import (
    BootStatus,
    DieType,
    EccDeviceType,
    FrequencyType,
    NetworkHealth,
    ResetChannel,
    UtilizationType,
)

SIZES = {
    "dcmi_chip_info": 100,
    "dcmi_chip_info_v2": 132,
    "dcmi_board_info": 16,
    "dcmi_die_id": 20,
    "dcmi_pcie_info_all": 64,
    "dcmi_hbm_info": 32,
    "dcmi_get_memory_info_stru": 112,
    "dcmi_ip_addr": 20,
    "dcmi_proc_mem_info": 16,
    "dcmi_multi_utilization_info": 48,
    "dcmi_base_resource": 64,
    "dcmi_computing_resource": 96,
    "dcmi_media_resource": 56,
    "dcmi_create_vdev_res_stru": 104,
    "dcmi_create_vdev_out": 52,
    "dcmi_vdev_query_info": 256,
    "dcmi_vdev_query_stru": 264,
    "dcmi_soc_free_resource": 224,
    "dcmi_soc_total_resource": 360,
    "dcmi_dms_fault_event": 352,
    "dcmi_event": 360,
    "dcmi_event_filter": 48,
    "dcmi_ecc_info": 36,
    "dcmi_spod_info": 48,
}

OFFSETS = [
    ("dcmi_chip_info", "aicore_cnt", 96),
    ("dcmi_chip_info_v2", "npu_name", 100),
    ("dcmi_hbm_info", "freq", 8),
    ("dcmi_hbm_info", "memory_usage", 16),
    ("dcmi_hbm_info", "temp", 24),
    ("dcmi_hbm_info", "bandwith_util_rate", 28),
    ("dcmi_get_memory_info_stru", "memory_available", 8),
    ("dcmi_get_memory_info_stru", "freq", 16),
    ("dcmi_get_memory_info_stru", "hugepagesize", 24),
    ("dcmi_get_memory_info_stru", "hugepages_total", 32),
    ("dcmi_get_memory_info_stru", "hugepages_free", 40),
    ("dcmi_get_memory_info_stru", "utiliza", 48),
    ("dcmi_get_memory_info_stru", "reserve", 52),
    ("dcmi_pcie_info_all", "domain", 16),
    ("dcmi_pcie_info_all", "bdf_busid", 20),
    ("dcmi_pcie_info_all", "bdf_deviceid", 24),
    ("dcmi_pcie_info_all", "bdf_funcid", 28),
    ("dcmi_pcie_info_all", "reserve", 32),
    ("dcmi_ip_addr", "u_addr", 0),
    ("dcmi_ip_addr", "ip_type", 16),
    ("dcmi_proc_mem_info", "proc_mem_usage", 8),
    ("dcmi_computing_resource", "aic", 0),
    ("dcmi_computing_resource", "aiv", 4),
    ("dcmi_computing_resource", "memory_size", 24),
    ("dcmi_computing_resource", "event_id", 32),
    ("dcmi_computing_resource", "topic_schedule_aicpu", 48),
    ("dcmi_computing_resource", "vdev_aicore_utilization", 60),
    ("dcmi_computing_resource", "vdev_memory_total", 64),
    ("dcmi_computing_resource", "vdev_memory_free", 72),
    ("dcmi_computing_resource", "reserved", 80),
    ("dcmi_vdev_query_info", "name", 0),
    ("dcmi_vdev_query_info", "status", 16),
    ("dcmi_vdev_query_info", "is_container_used", 20),
    ("dcmi_vdev_query_info", "vfid", 24),
    ("dcmi_vdev_query_info", "vfg_id", 28),
    ("dcmi_vdev_query_info", "container_id", 32),
    ("dcmi_vdev_query_info", "base", 40),
    ("dcmi_vdev_query_info", "computing", 104),
    ("dcmi_vdev_query_info", "media", 200),
    ("dcmi_vdev_query_stru", "query_info", 8),
    ("dcmi_soc_free_resource", "base", 8),
    ("dcmi_soc_free_resource", "computing", 72),
    ("dcmi_soc_free_resource", "media", 168),
    ("dcmi_soc_total_resource", "vdev_id", 4),
    ("dcmi_soc_total_resource", "vfg_num", 132),
    ("dcmi_soc_total_resource", "base", 144),
    ("dcmi_soc_total_resource", "computing", 208),
    ("dcmi_soc_total_resource", "media", 304),
    ("dcmi_dms_fault_event", "deviceid", 4),
    ("dcmi_dms_fault_event", "severity", 10),
    ("dcmi_dms_fault_event", "assertion", 11),
    ("dcmi_dms_fault_event", "event_serial_num", 12),
    ("dcmi_dms_fault_event", "alarm_raised_time", 24),
    ("dcmi_dms_fault_event", "event_name", 32),
    ("dcmi_dms_fault_event", "additional_info", 288),
    ("dcmi_dms_fault_event", "resv", 320),
    ("dcmi_event", "event_t", 8),
    ("dcmi_event_filter", "event_id", 8),
    ("dcmi_event_filter", "severity", 12),
    ("dcmi_event_filter", "node_type", 13),
    ("dcmi_event_filter", "resv", 14),
    ("dcmi_multi_utilization_info", "aiv_util", 4),
    ("dcmi_multi_utilization_info", "aicore_util", 8),
    ("dcmi_multi_utilization_info", "npu_util", 12),
    ("dcmi_multi_utilization_info", "reserved", 16),
    ("dcmi_ecc_info", "single_bit_error_cnt", 4),
    ("dcmi_ecc_info", "double_bit_isolated_pages_cnt", 24),
    ("dcmi_ecc_info", "double_bit_next_isolated_pages_cnt", 32),
    ("dcmi_spod_info", "scale_type", 4),
    ("dcmi_spod_info", "super_pod_id", 8),
    ("dcmi_spod_info", "server_id", 12),
    ("dcmi_spod_info", "chassis_id", 16),
    ("dcmi_spod_info", "super_pod_type", 20),
    ("dcmi_spod_info", "reserve", 24),
    ("dcmi_create_vdev_res_stru", "vfg_id", 4),
    ("dcmi_create_vdev_res_stru", "template_name", 8),
    ("dcmi_create_vdev_res_stru", "reserved", 40),
    ("dcmi_create_vdev_out", "pcie_bus", 4),
    ("dcmi_create_vdev_out", "vfg_id", 16),
    ("dcmi_create_vdev_out", "reserved", 20),
]


@pytest.mark.parametrize(("struct", "size"), SIZES.items())
def test_struct_size(struct: str, size: int) -> None:
    assert ffi.sizeof(f"struct {struct}") == size


@pytest.mark.parametrize(("struct", "field", "offset"), OFFSETS)
def test_field_offset(struct: str, field: str, offset: int) -> None:
    assert ffi.offsetof(f"struct {struct}", field) == offset


def test_the_total_resource_ai_core_figure_is_a_float_at_byte_208() -> None:
    # The one field the plugin reads from VDEV_MNG: computing.aic, a float.
    assert ffi.offsetof("struct dcmi_soc_total_resource", "computing", "aic") == 208
    assert ffi.typeof("struct dcmi_computing_resource").fields[0][1].type is ffi.typeof("float")


def test_the_vnpu_figures_the_plugin_reads() -> None:
    # GET_VDEV_RESOURCE: the template name and the vNPU's AI cores (a float) and memory (MB).
    assert ffi.offsetof("struct dcmi_vdev_query_stru", "query_info", "name") == 8
    assert ffi.sizeof(ffi.typeof("struct dcmi_vdev_query_info").fields[0][1].type) == 16
    assert ffi.offsetof("struct dcmi_vdev_query_stru", "query_info", "computing", "aic") == 112
    assert ffi.offsetof("struct dcmi_vdev_query_stru", "query_info", "computing", "memory_size") == 136
    # GET_TOTAL_RESOURCE: up to 32 vNPU ids (DCMI_SOC_SPLIT_MAX).
    assert ffi.typeof("struct dcmi_soc_total_resource").fields[1][1].type.length == 32


def test_enums_are_four_bytes() -> None:
    for enum in (
        "enum dcmi_main_cmd",
        "enum dcmi_event_type",
        "enum dcmi_ip_addr_type",
        "enum dcmi_port_type",
        "DCMI_VDEV_MNG_SUB_CMD",
        "DCMI_CHIP_INFO_SUB_CMD",
        "enum dcmi_freq_type",
        "enum dcmi_device_type",
        "enum dcmi_die_type",
        "enum dcmi_reset_channel",
        "enum dcmi_boot_status",
        "enum dcmi_rdfx_detect_result",
    ):
        assert ffi.sizeof(enum) == 4, enum


def test_the_proc_and_ecc_fields_the_telemetry_reads() -> None:
    # proc_mem_usage is an unsigned long (8 bytes on LP64), counted in bytes.
    assert ffi.sizeof(ffi.typeof("struct dcmi_proc_mem_info").fields[1][1].type) == 8
    assert ffi.integer_const("DCMI_MAX_PROC_NUM") == 32
    assert ffi.integer_const("TEMPLATE_NAME_LEN") == 32


# The library's enums are DCMI's: the binding passes their values straight through. ``renamed``
# gives the header's full name where it is not the prefix and the member's name.
ENUM_VALUES = [
    (FrequencyType, "DCMI_FREQ_", {"AICORE_CURRENT": "DCMI_FREQ_AICORE_CURRENT_"}),
    (UtilizationType, "DCMI_UTILIZATION_RATE_", {}),
    (EccDeviceType, "DCMI_DEVICE_TYPE_", {}),
    (ResetChannel, "", {"OUTBAND": "OUTBAND_CHANNEL", "INBAND": "INBAND_CHANNEL"}),
    (DieType, "", {}),
    (NetworkHealth, "DCMI_RDFX_DETECT_", {}),
    (BootStatus, "DCMI_BOOT_STATUS_", {"SYSTEM_START_FINISH": "DCMI_SYSTEM_START_FINISH"}),
]


@pytest.mark.parametrize(("enum", "prefix", "renamed"), ENUM_VALUES, ids=[e[0].__name__ for e in ENUM_VALUES])
def test_the_library_enums_have_dcmi_s_values(
    enum: type[IntEnum], prefix: str, renamed: dict[str, str]
) -> None:
    for member in enum:
        constant = renamed.get(member.name, prefix + member.name)
        assert ffi.integer_const(constant) == member.value, constant


def test_the_super_pod_query_is_chip_inf_sub_command_1() -> None:
    assert ffi.integer_const("DCMI_MAIN_CMD_CHIP_INF") == 12
    assert ffi.integer_const("DCMI_CHIP_INF_SUB_CMD_SPOD_INFO") == 1
    assert ffi.integer_const("DCMI_VMNG_SUB_CMD_GET_VDEV_ACTIVITY") == 5


def test_the_port_and_address_types_have_dcmi_s_values() -> None:
    assert [
        ffi.integer_const(name) for name in ("DCMI_VNIC_PORT", "DCMI_ROCE_PORT", "DCMI_INVALID_PORT")
    ] == [0, 1, 2]
    assert [ffi.integer_const(f"DCMI_IPADDR_TYPE_{kind}") for kind in ("V4", "V6", "ANY")] == [0, 1, 2]
    assert ffi.integer_const("DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE") == 0
