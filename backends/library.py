"""The device-library interface: the DCMI calls the plugin needs, typed.

Both the cffi binding of Huawei's ``libdcmi.so`` (:mod:`backends.dcmi`) and the
pure-Python fake (:mod:`backends.fake`) implement :class:`DeviceLibrary`, with
DCMI's own semantics: ids are (card_id, device_id) pairs, card ids need not be
0..N-1, and every failure is a :class:`backends.errors.DcmiError` with DCMI's
code. Family rules are data, in :mod:`backends.families`; the face the plugin uses is :mod:`backends.backend`.

Implementations are synchronous and not thread-safe, like DCMI itself; the
plugin calls them from one worker thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

# dcmi_get_device_health: the value for "device does not exist".
HEALTH_ABSENT = 0xFFFFFFFF

# The DCMI functions the plugin can do without, because drivers differ: older
# ones lack errorcode_v2, memory_info_v3 or the fault subscription; some builds
# lack the PCIe, IP or VDEV_MNG (dcmi_get_device_info) queries. A library
# reports which of these it lacks (missing_functions) right after init, so the
# layers above choose a fallback once instead of failing on every call. Every
# other function the plugin calls is required: its absence stays a
# SymbolMissing at the call.
OPTIONAL_FUNCTIONS: Final[frozenset[str]] = frozenset(
    {
        "dcmi_get_device_errorcode_v2",
        "dcmi_subscribe_fault_event",
        "dcmi_get_device_pcie_info_v2",
        "dcmi_get_device_ip",
        "dcmi_get_device_info",
        "dcmi_get_device_hbm_info",
        "dcmi_get_device_memory_info_v3",
    }
)


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
        ...

    def init(self) -> None:
        """``dcmi_init``: must succeed before any other call."""
        ...

    def missing_functions(self) -> frozenset[str]:
        """The :data:`OPTIONAL_FUNCTIONS` this library lacks, learnt at ``init`` without calling them.

        Calling one of them anyway raises :class:`backends.errors.SymbolMissing`.
        Before ``init`` (or after ``close``) this raises DcmiError -8005, like any call.
        """
        ...

    def driver_version(self) -> str:
        """``dcmi_get_driver_version``."""
        ...

    def card_list(self) -> list[int]:
        """``dcmi_get_card_list``: the card ids, in ascending order."""
        ...

    def device_count(self, card_id: int) -> int:
        """``dcmi_get_device_num_in_card``: NPU chips on a card (the MCU excluded)."""
        ...

    def logic_id(self, card_id: int, device_id: int) -> int:
        """``dcmi_get_device_logic_id``."""
        ...

    def phy_id(self, logic_id: int) -> int:
        """``dcmi_get_device_phyid_from_logicid``: the N of /dev/davinciN."""
        ...

    def chip_info(self, card_id: int, device_id: int) -> ChipInfo:
        """``dcmi_get_device_chip_info_v2``."""
        ...

    def total_aicore(self, card_id: int, device_id: int) -> float:
        """``dcmi_get_device_info(VDEV_MNG, GET_TOTAL_RESOURCE)``: ``computing.aic``."""
        ...

    def health(self, card_id: int, device_id: int) -> int:
        """``dcmi_get_device_health``: 0 ok, 1 minor, 2 major, 3 critical, HEALTH_ABSENT."""
        ...

    def error_codes(self, card_id: int, device_id: int) -> list[int]:
        """``dcmi_get_device_errorcode_v2``: the chip's current fault codes."""
        ...

    def hbm_info(self, card_id: int, device_id: int) -> MemoryInfo:
        """``dcmi_get_device_hbm_info`` (910 family)."""
        ...

    def memory_info(self, card_id: int, device_id: int) -> MemoryInfo:
        """``dcmi_get_device_memory_info_v3`` (-8255 on 910B and A3)."""
        ...

    def pcie_address(self, card_id: int, device_id: int) -> PcieAddress:
        """``dcmi_get_device_pcie_info_v2`` (-8255 on SoC boards such as 310B)."""
        ...

    def vdev_ids(self, card_id: int, device_id: int) -> list[int]:
        """The chip's static vNPUs: ``vdev_id[:vdev_num]`` of VDEV_MNG / GET_TOTAL_RESOURCE.

        Empty on a chip that could be split but is not; -8255 where the driver has no vNPUs.
        """
        ...

    def vdev_info(self, card_id: int, device_id: int, vdev_id: int) -> VdevInfo:
        """``dcmi_get_device_info(VDEV_MNG, GET_VDEV_RESOURCE)`` for one of :meth:`vdev_ids`."""
        ...

    def device_ip(self, card_id: int, device_id: int) -> str:
        """``dcmi_get_device_ip`` of RoCE port 0 as text: IPv4 asked first, then IPv6 (as Huawei's plugin).

        The IPv6 attempt follows only a permanent IPv4 failure (a temporary one is
        raised as is); when both fail, the IPv6 attempt's error is raised. An IPv6
        answer may be link-local (``fe80::...``); whether that counts as an address
        is the caller's decision (Huawei's plugin refuses it).
        """
        ...

    def subscribe_faults(self, handler: FaultHandler) -> None:
        """``dcmi_subscribe_fault_event`` for every device; ``handler`` runs on a library thread."""
        ...

    def close(self) -> None:
        """Release the library (dlclose); later calls fail until ``init``."""
        ...
