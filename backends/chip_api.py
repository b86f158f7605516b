"""ChipApi: the DCMI calls about one chip that both of DCMI's APIs have, asked by the chip.

A family's backend asks ``api.health(chip)``; the node's API names the chip as
it must: DCMI v1 by ``(card_id, device_id)`` (:class:`V1Api`), DCMI v2 (the
Ascend 950) by the chip's logical ``dev_id`` (:class:`V2Api`), never by its
physical id. The session picks the API once (:class:`~backends.session.LibrarySession`).
Calls only v1 has (DDR memory, the RoCE IP, vNPUs, the MCU, the brother card)
stay on the v1 library, asked by the families whose drivers answer them.
"""

from __future__ import annotations

from typing import Protocol

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


class V1Api:
    """DCMI v1: each chip by its (card_id, device_id)."""

    name = "DCMI v1"

    def __init__(self, library: DeviceLibrary) -> None:
        self.library = library

    def total_aicore(self, chip: Chip) -> float:
        return self.library.total_aicore(chip.card_id, chip.device_id)

    def super_pod_info(self, chip: Chip) -> SuperPodInfo:
        return self.library.super_pod_info(chip.card_id, chip.device_id)

    def health(self, chip: Chip) -> int:
        return self.library.health(chip.card_id, chip.device_id)

    def error_codes(self, chip: Chip) -> list[int]:
        return self.library.error_codes(chip.card_id, chip.device_id)

    def hbm_info(self, chip: Chip) -> HbmInfo:
        return self.library.hbm_info(chip.card_id, chip.device_id)

    def pcie_address(self, chip: Chip) -> PcieAddress:
        return self.library.pcie_address(chip.card_id, chip.device_id)

    def affinity_cpu(self, chip: Chip) -> str:
        return self.library.affinity_cpu(chip.card_id, chip.device_id)

    def temperature(self, chip: Chip) -> int:
        return self.library.temperature(chip.card_id, chip.device_id)

    def power(self, chip: Chip) -> Power:
        return self.library.power(chip.card_id, chip.device_id)

    def voltage(self, chip: Chip) -> Voltage:
        return self.library.voltage(chip.card_id, chip.device_id)

    def frequency(self, chip: Chip, kind: FrequencyType) -> int:
        return self.library.frequency(chip.card_id, chip.device_id, kind)

    def utilization(self, chip: Chip, kind: UtilizationType) -> int:
        return self.library.utilization(chip.card_id, chip.device_id, kind)

    def multi_utilization(self, chip: Chip) -> MultiUtilization:
        return self.library.multi_utilization(chip.card_id, chip.device_id)

    def multi_utilization_period(self, chip: Chip, period_s: int) -> MultiUtilization:
        return self.library.multi_utilization_period(chip.card_id, chip.device_id, period_s)

    def ecc_info(self, chip: Chip, kind: EccDeviceType) -> EccInfo:
        return self.library.ecc_info(chip.card_id, chip.device_id, kind)

    def network_health(self, chip: Chip) -> int:
        return self.library.network_health(chip.card_id, chip.device_id)

    def die_id(self, chip: Chip, kind: DieType) -> DieId:
        return self.library.die_id(chip.card_id, chip.device_id, kind)

    def processes(self, chip: Chip) -> list[ProcessMemory]:
        return self.library.processes(chip.card_id, chip.device_id)

    def reset(self, chip: Chip, channel: ResetChannel) -> None:
        self.library.reset(chip.card_id, chip.device_id, channel)

    def boot_status(self, chip: Chip) -> int:
        return self.library.boot_status(chip.card_id, chip.device_id)

    def subscribe_faults(self, handler: FaultHandler) -> None:
        self.library.subscribe_faults(handler)


class V2Api:
    """DCMI v2 (Ascend 950): each chip by its logical id, the ``dev_id`` every v2 call takes."""

    name = "DCMI v2"

    def __init__(self, library: DeviceLibraryV2) -> None:
        self.library = library

    def total_aicore(self, chip: Chip) -> float:
        return self.library.total_aicore(chip.logic_id)

    def super_pod_info(self, chip: Chip) -> SuperPodInfo:
        return self.library.super_pod_info(chip.logic_id)

    def health(self, chip: Chip) -> int:
        return self.library.health(chip.logic_id)

    def error_codes(self, chip: Chip) -> list[int]:
        return self.library.error_codes(chip.logic_id)

    def hbm_info(self, chip: Chip) -> HbmInfo:
        return self.library.hbm_info(chip.logic_id)

    def pcie_address(self, chip: Chip) -> PcieAddress:
        return self.library.pcie_address(chip.logic_id)

    def affinity_cpu(self, chip: Chip) -> str:
        return self.library.affinity_cpu(chip.logic_id)

    def temperature(self, chip: Chip) -> int:
        return self.library.temperature(chip.logic_id)

    def power(self, chip: Chip) -> Power:
        return self.library.power(chip.logic_id)

    def voltage(self, chip: Chip) -> Voltage:
        return self.library.voltage(chip.logic_id)

    def frequency(self, chip: Chip, kind: FrequencyType) -> int:
        return self.library.frequency(chip.logic_id, kind)

    def utilization(self, chip: Chip, kind: UtilizationType) -> int:
        return self.library.utilization(chip.logic_id, kind)

    def multi_utilization(self, chip: Chip) -> MultiUtilization:
        return self.library.multi_utilization(chip.logic_id)

    def multi_utilization_period(self, chip: Chip, period_s: int) -> MultiUtilization:
        return self.library.multi_utilization_period(chip.logic_id, period_s)

    def ecc_info(self, chip: Chip, kind: EccDeviceType) -> EccInfo:
        return self.library.ecc_info(chip.logic_id, kind)

    def network_health(self, chip: Chip) -> int:
        return self.library.network_health(chip.logic_id)

    def die_id(self, chip: Chip, kind: DieType) -> DieId:
        return self.library.die_id(chip.logic_id, kind)

    def processes(self, chip: Chip) -> list[ProcessMemory]:
        return self.library.processes(chip.logic_id)

    def reset(self, chip: Chip, channel: ResetChannel) -> None:
        self.library.reset(chip.logic_id, channel)

    def boot_status(self, chip: Chip) -> int:
        return self.library.boot_status(chip.logic_id)

    def subscribe_faults(self, handler: FaultHandler) -> None:
        self.library.subscribe_faults(handler)
