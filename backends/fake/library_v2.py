"""FakeV2Library: the fake's DCMI v2 face, the driver of a 950 node as the scenario describes it.

Each v2 call is the fake's v1 operation on the chip its logical ``dev_id`` names, so errors, hangs and
readings work alike in both APIs.
"""

from __future__ import annotations

from typing import Protocol

from backends.library import (
    ChipInfo,
    DeviceLibrary,
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


class V1Fake(DeviceLibrary, Protocol):
    """What the v2 face needs of :class:`~backends.fake.library.FakeLibrary` besides its v1 calls."""

    def init_v2(self) -> None: ...

    def logic_ids(self) -> list[int]: ...

    def address(self, logic_id: int) -> tuple[int, int]: ...


class FakeV2Library:
    """A DeviceLibraryV2 over a FakeLibrary."""

    def __init__(self, fake: V1Fake) -> None:
        self._fake = fake

    def _at(self, dev_id: int) -> tuple[int, int]:
        return self._fake.address(dev_id)

    @property
    def description(self) -> str:
        return f"{self._fake.description} (DCMI v2)"

    def init(self) -> None:
        self._fake.init_v2()

    def missing_functions(self) -> frozenset[str]:
        return self._fake.missing_functions()

    def driver_version(self) -> str:
        return self._fake.driver_version()

    def device_list(self) -> list[int]:
        return self._fake.logic_ids()

    def phy_id(self, dev_id: int) -> int:
        return self._fake.phy_id(dev_id)

    def chip_info(self, dev_id: int) -> ChipInfo:
        return self._fake.chip_info(*self._at(dev_id))

    def total_aicore(self, dev_id: int) -> float:
        return self._fake.total_aicore(*self._at(dev_id))

    def super_pod_info(self, dev_id: int) -> SuperPodInfo:
        return self._fake.super_pod_info(*self._at(dev_id))

    def health(self, dev_id: int) -> int:
        return self._fake.health(*self._at(dev_id))

    def error_codes(self, dev_id: int) -> list[int]:
        return self._fake.error_codes(*self._at(dev_id))

    def hbm_info(self, dev_id: int) -> HbmInfo:
        return self._fake.hbm_info(*self._at(dev_id))

    def pcie_address(self, dev_id: int) -> PcieAddress:
        return self._fake.pcie_address(*self._at(dev_id))

    def affinity_cpu(self, dev_id: int) -> str:
        return self._fake.affinity_cpu(*self._at(dev_id))

    def temperature(self, dev_id: int) -> int:
        return self._fake.temperature(*self._at(dev_id))

    def power(self, dev_id: int) -> Power:
        return self._fake.power(*self._at(dev_id))

    def voltage(self, dev_id: int) -> Voltage:
        return self._fake.voltage(*self._at(dev_id))

    def frequency(self, dev_id: int, kind: FrequencyType) -> int:
        return self._fake.frequency(*self._at(dev_id), kind)

    def utilization(self, dev_id: int, kind: UtilizationType) -> int:
        return self._fake.utilization(*self._at(dev_id), kind)

    def multi_utilization(self, dev_id: int) -> MultiUtilization:
        return self._fake.multi_utilization(*self._at(dev_id))

    def multi_utilization_period(self, dev_id: int, period_s: int) -> MultiUtilization:
        return self._fake.multi_utilization_period(*self._at(dev_id), period_s)

    def ecc_info(self, dev_id: int, kind: EccDeviceType) -> EccInfo:
        return self._fake.ecc_info(*self._at(dev_id), kind)

    def network_health(self, dev_id: int) -> int:
        return self._fake.network_health(*self._at(dev_id))

    def die_id(self, dev_id: int, kind: DieType) -> DieId:
        return self._fake.die_id(*self._at(dev_id), kind)

    def processes(self, dev_id: int) -> list[ProcessMemory]:
        return self._fake.processes(*self._at(dev_id))

    def reset(self, dev_id: int, channel: ResetChannel) -> None:
        self._fake.reset(*self._at(dev_id), channel)

    def boot_status(self, dev_id: int) -> int:
        return self._fake.boot_status(*self._at(dev_id))

    def subscribe_faults(self, handler: FaultHandler) -> None:
        self._fake.subscribe_faults(handler)

    def close(self) -> None:
        self._fake.close()
