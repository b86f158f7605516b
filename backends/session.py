"""LibrarySession: a chip library opened for the node, before anyone knows the chips' family.

The family comes from the chips' names, and the names come from the library:
so the library is opened (``dcmi_init``) and the chips enumerated first, on a
session of their own, and the family's :class:`~backends.backend.ChipBackend`
is built over the session afterwards. The session also keeps what the library
turned out to lack: the optional functions it reported missing at init, and
any a later call found missing, so every part asks a missing function at most
once.
"""

from __future__ import annotations

from backends.chips import Chip, ChipAddress, Unnamed, address_chips, enumerate_chips
from backends.library import ChipInfo, DeviceLibrary


class LibrarySession:
    """One device library, opened and closed once. Synchronous: callers run it off the event loop."""

    def __init__(self, library: DeviceLibrary) -> None:
        self.library = library
        self.missing: set[str] = set()  # optional DCMI functions found missing

    @property
    def description(self) -> str:
        """Where the chips come from (a library path, or a fake's scenario file)."""
        return self.library.description

    def init(self) -> frozenset[str]:
        """Open the library and ``dcmi_init`` it; return the optional functions it lacks."""
        self.library.init()
        missing = self.library.missing_functions()
        self.missing.update(missing)
        return missing

    def discover(self) -> list[Chip]:
        """Every NPU chip of the node, ordered by physical id."""
        return sorted(enumerate_chips(self.library), key=lambda chip: chip.phy_id)

    def address(self) -> tuple[list[ChipAddress], list[Unnamed]]:
        """The chips the driver names, by physical id; apart, the chips (or cards) it would not name."""
        found, unnamed = address_chips(self.library)
        return sorted(found, key=lambda address: address.phy_id), unnamed

    def chip_info(self, address: ChipAddress) -> ChipInfo:
        """``dcmi_get_device_chip_info_v2`` of the chip at ``address``."""
        return self.library.chip_info(address.card_id, address.device_id)

    def driver_version(self) -> str:
        """``dcmi_get_driver_version``."""
        return self.library.driver_version()

    def close(self) -> None:
        """Release the library."""
        self.library.close()
