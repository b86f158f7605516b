"""ChipApi: the DCMI calls about one chip that both of DCMI's APIs have, asked by the chip.

A family's backend asks ``api.health(chip)``; the node's API names the chip as
it must: DCMI v1 by ``(card_id, device_id)``, DCMI v2 (the Ascend 950) by its
logical ``dev_id``, never by its physical id. Calls only v1 has (DDR, the RoCE
IP, vNPUs, the MCU, the brother card) stay on the v1 library.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

from backends.chips import Chip
from backends.library import (
    DeviceLibrary,
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
    Voltage,
)


class ChipApi(Protocol):
    """The calls of :class:`~backends.library.DeviceLibrary` of the same names, a chip at a time."""

    name: str  # "DCMI v1" or "DCMI v2"

    def total_aicore(self, chip: Chip) -> float: ...
    def super_pod_info(self, chip: Chip) -> SuperPodInfo: ...
    def health(self, chip: Chip) -> int: ...
    def error_codes(self, chip: Chip) -> list[int]: ...
    def hbm_info(self, chip: Chip) -> HbmInfo: ...
    def pcie_address(self, chip: Chip) -> PcieAddress: ...
    def affinity_cpu(self, chip: Chip) -> str: ...
    def temperature(self, chip: Chip) -> int: ...
    def power(self, chip: Chip) -> Power: ...
    def voltage(self, chip: Chip) -> Voltage: ...
    def frequency(self, chip: Chip, kind: FrequencyType) -> int: ...
    def utilization(self, chip: Chip, kind: UtilizationType) -> int: ...
    def multi_utilization(self, chip: Chip) -> MultiUtilization: ...
    def multi_utilization_period(self, chip: Chip, period_s: int) -> MultiUtilization: ...
    def ecc_info(self, chip: Chip, kind: EccDeviceType) -> EccInfo: ...
    def network_health(self, chip: Chip) -> int: ...
    def die_id(self, chip: Chip, kind: DieType) -> DieId: ...
    def processes(self, chip: Chip) -> list[ProcessMemory]: ...
    def reset(self, chip: Chip, channel: ResetChannel) -> None: ...
    def boot_status(self, chip: Chip) -> int: ...
    def subscribe_faults(self, handler: FaultHandler) -> None: ...


# The calls that name no chip: passed to the library as they are.
NODE_WIDE = frozenset({"subscribe_faults"})


class _ByIds:
    """Each :class:`ChipApi` call of a library, the chip named by the ids that library's API takes.

    The signatures are the protocol's; that every call has its counterpart in both
    libraries is checked by ``tests/test_chip_api.py``.
    """

    def __init__(self, name: str, library: object, ids: Callable[[Chip], tuple[int, ...]]) -> None:
        self.name = name
        self._library = library
        self._ids = ids

    def __getattr__(self, function: str) -> Callable[..., Any]:
        call: Callable[..., Any] = getattr(self._library, function)
        if function in NODE_WIDE:
            return call
        return lambda chip, *args: call(*self._ids(chip), *args)


def v1_api(library: DeviceLibrary) -> ChipApi:
    """DCMI v1: each chip by its (card_id, device_id)."""
    return cast(ChipApi, _ByIds("DCMI v1", library, lambda chip: (chip.card_id, chip.device_id)))


def v2_api(library: DeviceLibraryV2) -> ChipApi:
    """DCMI v2 (Ascend 950): each chip by its logical id, the ``dev_id`` every v2 call takes."""
    return cast(ChipApi, _ByIds("DCMI v2", library, lambda chip: (chip.logic_id,)))
