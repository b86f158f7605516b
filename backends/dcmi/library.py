"""DcmiLibrary: the DeviceLibrary over Huawei's libdcmi.so.

Each method is one DCMI call with DCMI's own ids and semantics; every non-zero
return becomes :meth:`DcmiError.for_code`, so the layers above tell a busy chip
from a gone one by type. The library is found and opened by :meth:`init`, never
at import, and each function is looked up when first called: a driver that lacks
one function fails that call alone (:class:`SymbolMissing`), not the plugin.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Final

from backends.dcmi import decode, loader
from backends.dcmi._dcmi_cffi import ffi
from backends.errors import NOT_INITIALISED, DcmiError, SymbolMissing
from backends.library import ChipInfo, FaultHandler, MemoryInfo

log = logging.getLogger(__name__)

_CARD_LIST_LEN: Final = int(ffi.integer_const("MAX_CARD_NUM"))
_ERROR_CODES_LEN: Final = int(ffi.integer_const("DCMI_ERROR_CODE_MAX_COUNT"))
_VERSION_LEN: Final = int(ffi.integer_const("MAX_LENTH"))
_VDEV_MNG: Final = int(ffi.integer_const("DCMI_MAIN_CMD_VDEV_MNG"))
_TOTAL_RESOURCE: Final = int(ffi.integer_const("DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE"))
_ALL: Final = -1  # card_id and device_id -1 subscribe every device of the node


class _FaultSubscription:
    """The C callback handed to ``dcmi_subscribe_fault_event`` and the handler behind it.

    The driver calls it on a thread of its own. An exception must never travel
    back into C, so anything the handler raises is logged and the event dropped.
    """

    def __init__(self, handler: FaultHandler) -> None:
        self._handler = handler
        self._active = True
        self.callback: Any = ffi.callback("dcmi_fault_event_callback", self._on_event)

    def _on_event(self, event: Any) -> None:
        try:
            if not self._active:
                return
            decoded = decode.fault_event(event)
            if decoded is not None:
                self._handler(decoded)
        except Exception:
            log.exception(
                "handling a DCMI fault event failed; the event is dropped (polling still sees the fault)"
            )

    def stop(self) -> None:
        """Drop every later event; the callback itself stays valid."""
        self._active = False


# Libraries that had a fault subscription, with their callbacks. DCMI cannot
# unsubscribe, so the driver's event thread may call the callback at any time:
# unmapping the library or freeing the callback under it would crash the
# process. They stay here for the life of the process.
_KEPT_FOR_SUBSCRIPTIONS: list[tuple[Any, tuple[_FaultSubscription, ...]]] = []


class DcmiLibrary:
    """A DeviceLibrary over ``libdcmi.so`` via cffi (ABI mode, opened at :meth:`init`)."""

    def __init__(self, path: Path | None = None, *, allow_untrusted: bool = False) -> None:
        self._configured = path
        self._allow_untrusted = allow_untrusted
        self._path: Path | None = None
        self._lib: Any = None
        self._subscriptions: list[_FaultSubscription] = []

    @property
    def description(self) -> str:
        """The path of the library opened (before :meth:`init`: the one configured, if any)."""
        if self._path is not None:
            return str(self._path)
        if self._configured is not None:
            return str(self._configured)
        return f"{loader.LIBRARY_NAME} (searched for at init)"

    # -- plumbing ----------------------------------------------------------------

    def _function(self, name: str) -> Any:
        if self._lib is None:
            # Nothing loaded yet (or closed): DCMI's own answer to a call before dcmi_init.
            raise DcmiError(name, NOT_INITIALISED)
        try:
            return getattr(self._lib, name)
        except ffi.error as error:  # cffi's "symbol not found in library"
            raise SymbolMissing(name, str(self._path)) from error

    def _call(self, name: str, *args: Any) -> None:
        code = int(self._function(name)(*args))
        if code != 0:
            raise DcmiError(name, code)

    # -- DeviceLibrary -----------------------------------------------------------------

    def init(self) -> None:
        if self._lib is None:
            path = loader.locate(self._configured)
            if not self._allow_untrusted:
                loader.check_trusted(path)
            self._lib = loader.open_library(path, trusted_only=not self._allow_untrusted)
            self._path = path
        self._call("dcmi_init")

    def driver_version(self) -> str:
        buffer = ffi.new("char[]", _VERSION_LEN)
        self._call("dcmi_get_driver_version", buffer, _VERSION_LEN)
        return decode.text(buffer)

    def card_list(self) -> list[int]:
        count = ffi.new("int *")
        cards = ffi.new("int[]", _CARD_LIST_LEN)
        self._call("dcmi_get_card_list", count, cards, _CARD_LIST_LEN)
        return sorted(int(card) for card in cards[0 : min(int(count[0]), _CARD_LIST_LEN)])

    def device_count(self, card_id: int) -> int:
        count = ffi.new("int *")
        self._call("dcmi_get_device_num_in_card", card_id, count)
        return int(count[0])

    def logic_id(self, card_id: int, device_id: int) -> int:
        logic = ffi.new("int *")
        self._call("dcmi_get_device_logic_id", logic, card_id, device_id)
        return int(logic[0])

    def phy_id(self, logic_id: int) -> int:
        phy = ffi.new("unsigned int *")
        self._call("dcmi_get_device_phyid_from_logicid", logic_id, phy)
        return int(phy[0])

    def chip_info(self, card_id: int, device_id: int) -> ChipInfo:
        info = ffi.new("struct dcmi_chip_info_v2 *")
        self._call("dcmi_get_device_chip_info_v2", card_id, device_id, info)
        return decode.chip_info(info)

    def total_aicore(self, card_id: int, device_id: int) -> float:
        resource = ffi.new("struct dcmi_soc_total_resource *")
        size = ffi.new("unsigned int *", ffi.sizeof(resource[0]))
        self._call("dcmi_get_device_info", card_id, device_id, _VDEV_MNG, _TOTAL_RESOURCE, resource, size)
        return float(resource.computing.aic)

    def health(self, card_id: int, device_id: int) -> int:
        health = ffi.new("unsigned int *")
        self._call("dcmi_get_device_health", card_id, device_id, health)
        return int(health[0])

    def error_codes(self, card_id: int, device_id: int) -> list[int]:
        count = ffi.new("int *")
        codes = ffi.new("unsigned int[]", _ERROR_CODES_LEN)
        self._call("dcmi_get_device_errorcode_v2", card_id, device_id, count, codes, _ERROR_CODES_LEN)
        return [int(code) for code in codes[0 : max(0, min(int(count[0]), _ERROR_CODES_LEN))]]

    def hbm_info(self, card_id: int, device_id: int) -> MemoryInfo:
        info = ffi.new("struct dcmi_hbm_info *")
        self._call("dcmi_get_device_hbm_info", card_id, device_id, info)
        return decode.hbm_info(info)

    def memory_info(self, card_id: int, device_id: int) -> MemoryInfo:
        info = ffi.new("struct dcmi_get_memory_info_stru *")
        self._call("dcmi_get_device_memory_info_v3", card_id, device_id, info)
        return decode.memory_info(info)

    def subscribe_faults(self, handler: FaultHandler) -> None:
        subscription = _FaultSubscription(handler)
        no_filter = ffi.new("struct dcmi_event_filter *")  # all zero: every event
        self._call("dcmi_subscribe_fault_event", _ALL, _ALL, no_filter[0], subscription.callback)
        self._subscriptions.append(subscription)

    def close(self) -> None:
        """Release the library; later calls fail with -8005 until :meth:`init`.

        Without a fault subscription the library is dlclose'd (``ffi.dlclose``),
        as Huawei's plugin does between bring-up attempts. With one, DCMI offers no
        way to stop the driver's event thread, so the library stays mapped and the
        callbacks alive for the life of the process; they drop every later event.
        """
        lib, self._lib = self._lib, None
        subscriptions, self._subscriptions = self._subscriptions, []
        if lib is None:
            return
        if not subscriptions:
            ffi.dlclose(lib)
            return
        for subscription in subscriptions:
            subscription.stop()
        _KEPT_FOR_SUBSCRIPTIONS.append((lib, tuple(subscriptions)))
