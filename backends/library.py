"""The device-library interface: the DCMI calls the plugin needs, typed.

Both the cffi binding of Huawei's ``libdcmi.so`` (:mod:`backends.dcmi`) and the
pure-Python fake (:mod:`backends.fake`) implement :class:`DeviceLibrary`, with
DCMI's own semantics: ids are (card_id, device_id) pairs, card ids need not be
0..N-1, and every failure is a :class:`backends.errors.DcmiError` with DCMI's
code. Family rules live above this layer, in :mod:`backends.base`.

Implementations are synchronous and not thread-safe, like DCMI itself; the
plugin calls them from one worker thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

# dcmi_get_device_health: the value for "device does not exist".
HEALTH_ABSENT = 0xFFFFFFFF


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
    raised_at: int  # seconds since the epoch, as the driver stamped it


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

    def subscribe_faults(self, handler: FaultHandler) -> None:
        """``dcmi_subscribe_fault_event`` for every device; ``handler`` runs on a library thread."""
        ...

    def close(self) -> None:
        """Release the library (dlclose); later calls fail until ``init``."""
        ...
