"""A reset through DCMI: the chip goes away for its reset time, boots, and comes back repaired.

``dcmi_set_device_reset`` starts it; meanwhile the boot status walks through
the states before 16 and every call about the chip but the driver's own tables
answers -8012 (not ready); then the boot status is 16 and the chip answers
health 0 without fault codes, until the scenario is next written. Both fakes
keep the reset in the driver-state file, so another process sees it too. The
facts a hot reset needs around it (the brother card of an A3, the out-of-band
channel, the Atlas 300I Duo's card-wide reset) are checked here as well.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer

from backends.errors import DcmiError
from backends.fake import FakeScenario
from backends.fake.driver_state import DriverStateFile
from backends.library import BootStatus, DeviceLibrary, FaultEvent, ResetChannel

WAIT = 15.0
INBAND = ResetChannel.INBAND


def _node(reset_seconds: float, **chip: Any) -> FakeScenario:
    """Two 910B3 chips on cards 0 and 1; chip 0 faulted, with ``chip``'s fields."""
    faulted = {"phy_id": 0, "card_id": 0, "health": 2, "fault_codes": ["80E01801"]} | chip
    return FakeScenario.model_validate(
        {
            "chip_name": "910B3",
            "reset_seconds": reset_seconds,
            "chips": [faulted, {"phy_id": 1, "card_id": 1}],
        }
    )


def _code(call: Callable[..., Any], *args: Any) -> int:
    with pytest.raises(DcmiError) as raised:
        call(*args)
    return raised.value.code


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


def _boots_seen(library: DeviceLibrary, card: int) -> list[int]:
    """Every distinct boot status of the chip until it reads 16, in order."""
    seen: list[int] = []

    def back() -> bool:
        status = library.boot_status(card, 0)
        if not seen or seen[-1] != status:
            seen.append(status)
        return status == BootStatus.SYSTEM_START_FINISH

    _until(back, "the chip to finish booting")
    return seen


def test_a_resetting_chip_is_not_ready_but_for_the_driver_s_own_tables(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_node(reset_seconds=3600))
    assert library.boot_status(0, 0) == BootStatus.SYSTEM_START_FINISH  # never reset: booted
    library.reset(0, 0, INBAND)
    assert library.boot_status(0, 0) in {BootStatus.UNINIT, BootStatus.BIOS}
    for call in (
        library.health,
        library.error_codes,
        library.temperature,
        library.processes,
        library.vdev_ids,
        library.chip_info,  # the chip says its own name and version: not while it boots
    ):
        assert _code(call, 0, 0) == -8012
    assert library.logic_id(0, 0) == 0
    assert library.pcie_address(0, 0).bus == 1
    assert _code(library.reset, 0, 0, INBAND) == -8012  # one reset at a time
    assert library.health(1, 0) == 0  # the other chip is untouched


def test_the_chip_boots_then_answers_repaired(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_node(reset_seconds=0.4))
    assert (library.health(0, 0), library.error_codes(0, 0)) == (2, [0x80E01801])
    library.reset(0, 0, INBAND)
    seen = _boots_seen(library, 0)
    assert seen[-1] == BootStatus.SYSTEM_START_FINISH
    assert seen[:-1] == sorted(seen[:-1])
    assert set(seen[:-1]) <= {BootStatus.UNINIT, BootStatus.BIOS, BootStatus.OS, BootStatus.FINISH}
    assert (library.health(0, 0), library.error_codes(0, 0)) == (0, [])


def test_the_next_scenario_written_says_again_what_the_chip_has(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_node(reset_seconds=0))
    library.reset(0, 0, INBAND)
    assert library.health(0, 0) == 0
    any_fake.update(_node(reset_seconds=0))  # the same fault, written again: it came back
    assert (library.health(0, 0), library.error_codes(0, 0)) == (2, [0x80E01801])


def test_a_reset_that_does_not_repair(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_node(reset_seconds=0, reset_clears_faults=False))
    library.reset(0, 0, INBAND)
    assert library.boot_status(0, 0) == BootStatus.SYSTEM_START_FINISH
    assert (library.health(0, 0), library.error_codes(0, 0)) == (2, [0x80E01801])


def test_another_library_on_the_node_sees_the_reset(any_fake: ScenarioPlayer[Any]) -> None:
    first = any_fake.open(_node(reset_seconds=3600))
    second = any_fake.open()
    first.reset(0, 0, INBAND)
    assert _code(second.health, 0, 0) == -8012
    assert second.boot_status(0, 0) != BootStatus.SYSTEM_START_FINISH


def test_the_driver_state_counts_each_chip_s_resets(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_node(reset_seconds=0))
    library.reset(0, 0, INBAND)
    library.reset(0, 0, INBAND)
    library.reset(1, 0, INBAND)
    state = DriverStateFile.beside(any_fake.scenario_path).read()
    assert {reset.phy_id: reset.count for reset in state.resets} == {0: 2, 1: 1}


def test_a_repaired_chip_clears_its_faults_to_subscribers(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_node(reset_seconds=0.2))
    events: list[FaultEvent] = []
    arrived = threading.Condition()

    def handler(event: FaultEvent) -> None:
        with arrived:
            events.append(event)
            arrived.notify_all()

    library.subscribe_faults(handler)
    library.reset(0, 0, INBAND)
    with arrived:
        assert arrived.wait_for(lambda: any(e.assertion == 0 for e in events), WAIT)
    assert [(e.logic_id, e.code, e.assertion) for e in events] == [(0, 0x80E01801, 0)]


def test_an_atlas_300i_duo_resets_as_a_card(any_fake: ScenarioPlayer[Any]) -> None:
    duo = FakeScenario.model_validate(
        {
            "chip_name": "310P3",
            "reset_seconds": 3600,
            "chips": [{"phy_id": 0, "card_id": 0}, {"phy_id": 1, "card_id": 0}],
        }
    )
    library = any_fake.open(duo)
    assert _code(library.reset, 0, 1, INBAND) == -8255  # only device 0 may be named
    library.reset(0, 0, INBAND)
    assert _code(library.health, 0, 0) == -8012
    assert _code(library.health, 0, 1) == -8012


def test_out_of_band_needs_a_working_channel(any_fake: ScenarioPlayer[Any]) -> None:
    node = FakeScenario.model_validate(
        {
            "chip_name": "910B3",
            "reset_seconds": 0,
            "chips": [
                {"phy_id": 0, "outband_channel": 1},
                {"phy_id": 1, "outband_channel": 0},
                {"phy_id": 2},
            ],
        }
    )
    library = any_fake.open(node)
    assert [library.outband_channel_state(card, 0) for card in (0, 1)] == [1, 0]
    assert _code(library.outband_channel_state, 2, 0) == -8255
    library.reset(0, 0, ResetChannel.OUTBAND)
    assert _code(library.reset, 1, 0, ResetChannel.OUTBAND) == -8255
    assert _code(library.reset, 2, 0, ResetChannel.OUTBAND) == -8255
    assert _code(library.reset, 2, 0, 5) == -8001
    library.reset(2, 0, INBAND)


def test_an_a3_card_has_a_brother(any_fake: ScenarioPlayer[Any]) -> None:
    a3 = FakeScenario.model_validate(
        {
            "chip_name": "Ascend910",
            "npu_name": "9391",
            "chips": [
                {"phy_id": 0, "card_id": 1},
                {"phy_id": 1, "card_id": 1},
                {"phy_id": 2, "card_id": 6},
                {"phy_id": 3, "card_id": 9},
                {"phy_id": 4, "card_id": 12, "brother_card": 13},
            ],
        }
    )
    library = any_fake.open(a3)
    assert [library.brother_card(1, device) for device in (0, 1)] == [5, 5]
    assert library.brother_card(6, 0) == 2
    assert _code(library.brother_card, 9, 0) == -8001  # outside the driver's table of 8 cards
    assert library.brother_card(12, 0) == 13
    other = any_fake.open(FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0}]}))
    assert _code(other.brother_card, 0, 0) == -8255


def test_the_process_list_tells_a_busy_chip(any_fake: ScenarioPlayer[Any]) -> None:
    node = _node(reset_seconds=0, processes=[{"pid": 31337, "memory_bytes": 1 << 30}])
    library = any_fake.open(node)
    assert [(p.pid, p.memory_bytes) for p in library.processes(0, 0)] == [(31337, 1 << 30)]
    assert library.processes(1, 0) == []
    node_without = _node(reset_seconds=0, errors={"processes": -8005})
    any_fake.update(node_without)
    assert _code(library.processes, 0, 0) == -8005
