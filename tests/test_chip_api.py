"""Every ChipApi call has its counterpart in both DCMI APIs, the chip named by the ids each API takes."""

from __future__ import annotations

import inspect
from typing import Any, get_type_hints

import pytest

from backends.chips import NO_CARD, Chip
from backends.library import ChipInfo, DeviceLibrary, DeviceLibraryV2, FrequencyType
from backends.session import NODE_WIDE, ChipApi, v1_api, v2_api

CALLS = sorted(
    name for name, member in vars(ChipApi).items() if inspect.isfunction(member) and name[0] != "_"
)
INFO = ChipInfo("Ascend", "910B3", "V1", 20)


def _parameters(protocol: type, name: str) -> list[str]:
    return list(inspect.signature(getattr(protocol, name)).parameters)[1:]  # without self


@pytest.mark.parametrize("name", CALLS)
def test_each_call_takes_the_chip_as_each_api_names_it(name: str) -> None:
    rest = _parameters(ChipApi, name)
    if name in NODE_WIDE:
        assert _parameters(DeviceLibrary, name) == _parameters(DeviceLibraryV2, name) == rest
        return
    assert rest[0] == "chip"
    assert _parameters(DeviceLibrary, name) == ["card_id", "device_id", *rest[1:]]
    assert _parameters(DeviceLibraryV2, name) == ["dev_id", *rest[1:]]
    returns = get_type_hints(getattr(ChipApi, name))["return"]
    assert get_type_hints(getattr(DeviceLibrary, name))["return"] == returns
    assert get_type_hints(getattr(DeviceLibraryV2, name))["return"] == returns


class Recorder:
    """A library that answers every call with what it was asked."""

    def __getattr__(self, function: str) -> Any:
        return lambda *args: (function, args)


def test_v1_names_a_chip_by_card_and_device_and_v2_by_logical_id() -> None:
    chip = Chip(card_id=3, device_id=1, logic_id=6, phy_id=7, info=INFO)
    v1: Any = v1_api(Recorder())  # type: ignore[arg-type]
    v2: Any = v2_api(Recorder())  # type: ignore[arg-type]
    assert v1.frequency(chip, FrequencyType.AICORE_CURRENT) == (
        "frequency",
        (3, 1, FrequencyType.AICORE_CURRENT),
    )
    assert v2.health(Chip(NO_CARD, NO_CARD, 6, 7, INFO)) == ("health", (6,))
    assert v1.subscribe_faults(print) == v2.subscribe_faults(print) == ("subscribe_faults", (print,))
    assert (v1.name, v2.name) == ("DCMI v1", "DCMI v2")
