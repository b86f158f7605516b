"""FakeV2Library: the fake's DCMI v2 face, each call the v1 operation on the chip its ``dev_id`` names.

So errors, hangs and readings work alike in both APIs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final, Protocol

from backends.library import DeviceLibrary, DeviceLibraryV2

# The v2 calls that take what their v1 counterpart takes (``phy_id``: the logical id in both).
_AS_IN_V1: Final = frozenset({"missing_functions", "driver_version", "phy_id", "subscribe_faults", "close"})
_V2_CALLS: Final = frozenset(name for name in vars(DeviceLibraryV2) if not name.startswith("_"))


class V1Fake(DeviceLibrary, Protocol):
    """What the v2 face needs of :class:`~backends.fake.library.FakeLibrary` besides its v1 calls."""

    def init_v2(self) -> None: ...

    def logic_ids(self) -> list[int]: ...

    def address(self, logic_id: int) -> tuple[int, int]: ...


class FakeV2Library:
    """A DeviceLibraryV2 over a FakeLibrary: a call not written out here is the v1 call of its name."""

    def __init__(self, fake: V1Fake) -> None:
        self._fake = fake

    @property
    def description(self) -> str:
        return f"{self._fake.description} (DCMI v2)"

    def init(self) -> None:
        self._fake.init_v2()

    def device_list(self) -> list[int]:
        return self._fake.logic_ids()

    def __getattr__(self, function: str) -> Callable[..., Any]:
        if function not in _V2_CALLS:
            raise AttributeError(function)
        call: Callable[..., Any] = getattr(self._fake, function)
        if function in _AS_IN_V1:
            return call

        @functools.wraps(call)
        def on_chip(dev_id: int, *args: Any) -> Any:
            return call(*self._fake.address(dev_id), *args)

        return on_chip
