"""LibrarySession: a chip library opened for the node, before anyone knows the chips' family.

``dcmi_init`` first, ``dcmiv2_init`` where that fails (an Ascend 950); the family's backend is built over it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, cast

import backends.library as lib
from backends.chips import Chip, ChipAddress, Unnamed, address_chips, address_chips_v2
from backends.errors import NOT_SUPPORTED, DcmiError, SymbolMissing
from backends.library import ChipInfo, DeviceLibrary, DeviceLibraryV2, v2_name

log = logging.getLogger(__name__)


class ChipApi(Protocol):
    """The calls of :class:`~backends.library.DeviceLibrary` of the same names, a chip at a time."""

    name: str  # "DCMI v1" or "DCMI v2"

    def total_aicore(self, chip: Chip) -> float: ...
    def super_pod_info(self, chip: Chip) -> lib.SuperPodInfo: ...
    def health(self, chip: Chip) -> int: ...
    def error_codes(self, chip: Chip) -> list[int]: ...
    def hbm_info(self, chip: Chip) -> lib.HbmInfo: ...
    def pcie_address(self, chip: Chip) -> lib.PcieAddress: ...
    def affinity_cpu(self, chip: Chip) -> str: ...
    def temperature(self, chip: Chip) -> int: ...
    def power(self, chip: Chip) -> lib.Power: ...
    def voltage(self, chip: Chip) -> lib.Voltage: ...
    def frequency(self, chip: Chip, kind: lib.FrequencyType) -> int: ...
    def utilization(self, chip: Chip, kind: lib.UtilizationType) -> int: ...
    def multi_utilization(self, chip: Chip) -> lib.MultiUtilization: ...
    def multi_utilization_period(self, chip: Chip, period_s: int) -> lib.MultiUtilization: ...
    def ecc_info(self, chip: Chip, kind: lib.EccDeviceType) -> lib.EccInfo: ...
    def network_health(self, chip: Chip) -> int: ...
    def die_id(self, chip: Chip, kind: lib.DieType) -> lib.DieId: ...
    def processes(self, chip: Chip) -> list[lib.ProcessMemory]: ...
    def reset(self, chip: Chip, channel: lib.ResetChannel) -> None: ...
    def boot_status(self, chip: Chip) -> int: ...
    def subscribe_faults(self, handler: lib.FaultHandler) -> None: ...


# The calls that name no chip: passed to the library as they are.
NODE_WIDE = frozenset({"subscribe_faults"})


class _ByIds:
    """Each :class:`ChipApi` call of a library, the chip named by its API's ids (``tests/test_chip_api.py``
    holds the two APIs to the protocol)."""

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


class LibrarySession:
    """One device library, opened and closed once. Synchronous: callers run it off the event loop."""

    def __init__(self, library: DeviceLibrary) -> None:
        self.library = library
        self.v2: DeviceLibraryV2 | None = None  # set when the driver answers DCMI v2 only (a 950)
        self.api: ChipApi = v1_api(library)
        self.missing: set[str] = set()  # optional DCMI functions found missing, by their v1 names

    @property
    def description(self) -> str:
        """Where the chips come from (a library path, or a fake's scenario file), and the API if v2."""
        return self.library.description if self.v2 is None else self.v2.description

    def init(self) -> frozenset[str]:
        """``dcmi_init``, else ``dcmiv2_init``; the optional functions the library lacks (v1 names). When
        both fail, the v1 error is raised unless v2 said something other than "not supported" (a 950 whose
        driver is not ready yet)."""
        try:
            self.library.init()
        except DcmiError as v1_error:
            self._init_v2(v1_error)
            assert self.v2 is not None
            missing = self.v2.missing_functions()
        else:
            missing = self.library.missing_functions()
        self.missing.update(missing)
        return missing

    def _init_v2(self, v1_error: DcmiError) -> None:
        v2 = self.library.v2()
        try:
            v2.init()
        except SymbolMissing:  # a driver older than DCMI v2
            raise v1_error from None
        except DcmiError as v2_error:
            if v2_error.code == NOT_SUPPORTED:  # not a 950: the v1 error is the one that counts
                raise v1_error from None
            raise v2_error from v1_error
        log.info(
            "dcmi_init answered %d (%s): the driver speaks DCMI v2 (dcmiv2_init), as on an Ascend 950",
            v1_error.code,
            v1_error.meaning,
            extra={"api": "DCMI v2", "dcmi_init": v1_error.code},
        )
        self.v2, self.api = v2, v2_api(v2)

    def function_name(self, function: str) -> str:
        """``function`` (a v1 name) as the library in use calls it."""
        return function if self.v2 is None else v2_name(function)

    def discover(self) -> list[Chip]:
        """Every NPU chip of the node, by physical id; one the driver will not name raises its error."""
        found, unnamed = self.address()
        if unnamed:
            raise unnamed[0].error
        return [address.chip(self.chip_info(address)) for address in found]

    def address(self) -> tuple[list[ChipAddress], list[Unnamed]]:
        """The chips the driver names, by physical id; apart, the chips (or cards) it would not name."""
        found, unnamed = address_chips(self.library) if self.v2 is None else address_chips_v2(self.v2)
        return sorted(found, key=lambda address: address.phy_id), unnamed

    def chip_info(self, address: ChipAddress) -> ChipInfo:
        """``dcmi_get_device_chip_info_v2`` (``dcmiv2_get_chip_info``) of the chip at ``address``."""
        if self.v2 is None:
            return self.library.chip_info(address.card_id, address.device_id)
        return self.v2.chip_info(address.logic_id)

    def driver_version(self) -> str:
        """``dcmi_get_driver_version`` (``dcmiv2_get_driver_version``)."""
        return self.library.driver_version() if self.v2 is None else self.v2.driver_version()

    def close(self) -> None:
        if self.v2 is not None:
            self.v2.close()
        else:
            self.library.close()
