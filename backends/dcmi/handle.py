"""LibraryHandle: ``libdcmi.so`` opened once, and the plumbing of every call its v1 and v2 faces make.

Each function is looked up when first called, so a driver that lacks one fails that call alone
(:class:`SymbolMissing`); every non-zero return is a :class:`DcmiError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Protocol

from backends.dcmi import decode, loader
from backends.dcmi._dcmi_cffi import ffi
from backends.errors import NOT_INITIALISED, DcmiError, SymbolMissing

_AFFINITY_LEN: Final = int(ffi.integer_const("TOPO_INFO_MAX_LENTH"))


class Subscription(Protocol):
    """A fault subscription's callback, which the driver may call for the life of the process."""

    def stop(self) -> None:
        """Drop every later event; the callback itself stays valid."""
        ...


# Libraries that had a fault subscription, with their callbacks. DCMI cannot
# unsubscribe, so the driver's event thread may call the callback at any time:
# unmapping the library or freeing the callback under it would crash the
# process. They stay here for the life of the process.
_KEPT_FOR_SUBSCRIPTIONS: list[tuple[Any, tuple[Subscription, ...]]] = []


class LibraryHandle:
    """The library as loaded (or not yet): its path, the cffi handle, its fault subscriptions."""

    def __init__(self, configured: Path | None, allow_untrusted: bool) -> None:
        self.configured = configured
        self.allow_untrusted = allow_untrusted
        self.path: Path | None = None
        self.lib: Any = None
        self._subscriptions: list[Subscription] = []

    @property
    def description(self) -> str:
        """The path of the library opened (before :meth:`open`: the one configured, if any)."""
        if self.path is not None:
            return str(self.path)
        if self.configured is not None:
            return str(self.configured)
        return f"{loader.LIBRARY_NAME} (searched for at init)"

    def open(self) -> bool:
        """Find, vet and dlopen the library unless it is open; True when this call opened it."""
        if self.lib is not None:
            return False
        path = loader.locate(self.configured)
        if not self.allow_untrusted:
            loader.check_trusted(path)
        self.lib = loader.open_library(path, trusted_only=not self.allow_untrusted)
        self.path = path
        return True

    def function(self, name: str) -> Any:
        if self.lib is None:
            # Nothing loaded yet (or closed): DCMI's own answer to a call before dcmi_init.
            raise DcmiError(name, NOT_INITIALISED)
        try:
            return getattr(self.lib, name)
        except ffi.error as error:  # cffi's "symbol not found in library"
            raise SymbolMissing(name, str(self.path)) from error

    def call(self, name: str, *args: Any) -> None:
        code = int(self.function(name)(*args))
        if code != 0:
            raise DcmiError(name, code)

    def lacks(self, name: str) -> bool:
        """Whether the library has no symbol ``name``: a dlsym, no call."""
        try:
            getattr(self.lib, name)
        except ffi.error:
            return True
        return False

    def read(self, name: str, ctype: str, *args: Any) -> int:
        """Call ``name(*args, &out)`` for a function whose last argument is one ``ctype`` it fills."""
        out = ffi.new(f"{ctype} *")
        self.call(name, *args, out)
        return int(out[0])

    def device_info(self, name: str, main_cmd: int, sub_cmd: int, buffer: Any, *chip: int) -> None:
        """``name(*chip, main_cmd, sub_cmd, buffer, &size)`` into the struct at ``buffer``, its size given."""
        size = ffi.new("unsigned int *", ffi.sizeof(buffer[0]))
        self.call(name, *chip, main_cmd, sub_cmd, buffer, size)

    def cpulist(self, name: str, *chip: int) -> str:
        """``name(*chip, buffer, &length)``: a chip's CPU affinity, at most 31 characters."""
        buffer = ffi.new("char[]", _AFFINITY_LEN)
        length = ffi.new("int *", _AFFINITY_LEN)
        self.call(name, *chip, buffer, length)
        return decode.text(buffer)[: max(0, min(int(length[0]), _AFFINITY_LEN - 1))]

    def subscribe(self, name: str, subscription: Subscription, callback: Any, *chips: int) -> None:
        """``name(*chips, <no filter>, callback)``: every event of ``chips`` (-1: all); both kept."""
        no_filter = ffi.new("struct dcmi_event_filter *")  # all zero: every event
        self.call(name, *chips, no_filter[0], callback)
        self._subscriptions.append(subscription)

    def close(self) -> None:
        """Release the library; later calls fail with -8005 until it is opened again.

        Without a fault subscription it is dlclose'd; with one it stays mapped (DCMI cannot stop the driver's
        event thread) and the callbacks drop every later event.
        """
        lib, self.lib = self.lib, None
        subscriptions, self._subscriptions = self._subscriptions, []
        if lib is None:
            return
        if not subscriptions:
            ffi.dlclose(lib)
            return
        for subscription in subscriptions:
            subscription.stop()
        _KEPT_FOR_SUBSCRIPTIONS.append((lib, tuple(subscriptions)))
