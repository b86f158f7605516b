"""LibrarySession: a chip library opened for the node, before anyone knows the chips' family.

The family comes from the chips' names, which come from the library: so the
library is opened and the chips enumerated first, and the family's backend is
built over the session. ``dcmi_init`` first, ``dcmiv2_init`` where that fails
(an Ascend 950); :attr:`~LibrarySession.missing` keeps what the library lacks.
"""

from __future__ import annotations

import logging

from backends.chip_api import ChipApi, v1_api, v2_api
from backends.chips import (
    Chip,
    ChipAddress,
    Unnamed,
    address_chips,
    address_chips_v2,
)
from backends.errors import NOT_SUPPORTED, DcmiError, SymbolMissing
from backends.library import ChipInfo, DeviceLibrary, DeviceLibraryV2, v2_name

log = logging.getLogger(__name__)


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
        """``dcmi_init``, else ``dcmiv2_init``; the optional functions the library lacks (v1 names).

        When both fail, the v1 error is raised unless v2 said something other
        than "not supported" (a 950 whose driver is not ready yet).
        """
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
