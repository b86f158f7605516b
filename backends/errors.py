"""Typed errors raised by device libraries and chip backends: every DCMI code becomes a :class:`DcmiError`."""

from __future__ import annotations

from typing import Final


class ChipError(Exception):
    """Root of everything a chip library or backend raises about the chips, the library or the node. Not
    here: an argument no caller should pass (a ``ValueError``). ARCHITECTURE.md "Errors"."""


# Meanings of the DCMI return codes (DCMI header, error code table).
DCMI_ERROR_MEANINGS: Final[dict[int, str]] = {
    -8001: "invalid parameter",
    -8002: "operation not permitted",
    -8003: "memory operation failed",
    -8004: "secure function failed",
    -8005: "internal error (or DCMI not initialised)",
    -8006: "timed out",
    -8007: "invalid device id",
    -8008: "device does not exist",
    -8009: "ioctl failed",
    -8010: "send message failed",
    -8011: "receive message failed",
    -8012: "not ready",
    -8013: "not supported in a container",
    -8014: "file operation failed",
    -8015: "reset failed",
    -8016: "operation aborted",
    -8017: "upgrade in progress",
    -8020: "resource occupied",
    -8022: "partition not right",
    -8023: "configuration information does not exist",
    -8255: "not supported",
}

# Codes after which the same call may succeed if retried later.
TEMPORARY_CODES: Final[frozenset[int]] = frozenset({-8006, -8012, -8017, -8020})

NOT_SUPPORTED: Final = -8255
NOT_READY: Final = -8012
INVALID_PARAMETER: Final = -8001
NOT_INITIALISED: Final = -8005


class DcmiError(ChipError):
    """A DCMI function returned a non-zero code."""

    def __init__(self, function: str, code: int) -> None:
        self.function = function
        self.code = code
        self.meaning = DCMI_ERROR_MEANINGS.get(code, "unknown error code")
        super().__init__(f"{function} returned {code} ({self.meaning})")

    @property
    def temporary(self) -> bool:
        """True when retrying later may succeed (not ready, timeout, busy, upgrading)."""
        return self.code in TEMPORARY_CODES


class LibraryUnavailable(ChipError):
    """The device library cannot be found, trusted or loaded."""


class SymbolMissing(ChipError):
    """The loaded library lacks a function; only calls that need it fail."""

    def __init__(self, function: str, path: str) -> None:
        self.function = function
        self.path = path
        super().__init__(f"{path} has no symbol {function} (driver too old or too new for this call)")


class UnknownChipFamily(ChipError):
    """The chip name matches none of the supported families."""

    def __init__(self, chip_name: str) -> None:
        self.chip_name = chip_name
        super().__init__(
            f"chip name {chip_name!r} matches no supported family (310P, 310B, 310, 910B, 910, 950); "
            "set --chip-family to force one"
        )


class NoChips(ChipError):
    """The library answered but reported no NPU chips."""
