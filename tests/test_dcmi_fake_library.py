"""The C fake itself: driver habits the binding never provokes, and how it follows its scenario file.

Raw cffi calls stand in where the binding would never make such a call.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer
from fake_dcmi.scenario_file import SCENARIO_ENV
from waiting import eventually

from backends.dcmi._dcmi_cffi import ffi
from backends.errors import DcmiError
from backends.fake import FakeScenario

WAIT = 10.0
TWO_CARDS = FakeScenario.model_validate({"chip_name": "310P3", "chips": [{"phy_id": 0}, {"phy_id": 1}]})


@pytest.fixture
def raw(c_fake: CFakePlayer) -> Iterator[Any]:
    """The fake opened directly, initialised, on a node of two cards."""
    c_fake.update(TWO_CARDS)
    lib = ffi.dlopen(str(c_fake.library_path))
    assert lib.dcmi_init() == 0
    yield lib
    ffi.dlclose(lib)


def test_a_card_list_too_short_is_invalid(raw: Any) -> None:
    count, cards = ffi.new("int *"), ffi.new("int[1]")
    assert raw.dcmi_get_card_list(count, cards, 1) == -8001
    assert raw.dcmi_get_card_list(count, ffi.new("int[2]"), 2) == 0
    assert count[0] == 2


def test_the_total_resource_query_checks_the_buffer_size(raw: Any) -> None:
    total = ffi.new("struct dcmi_soc_total_resource *")
    size = ffi.new("unsigned int *", ffi.sizeof(total[0]) - 1)
    vdev_mng, total_resource = ffi.integer_const("DCMI_MAIN_CMD_VDEV_MNG"), 1
    assert raw.dcmi_get_device_info(0, 0, vdev_mng, total_resource, total, size) == -8001
    size[0] = ffi.sizeof(total[0])
    assert raw.dcmi_get_device_info(0, 0, vdev_mng, total_resource, total, size) == 0
    assert total.computing.aic == 8.0
    assert raw.dcmi_get_device_info(0, 0, ffi.integer_const("DCMI_MAIN_CMD_TEMP"), 0, total, size) == -8255


def test_a_subscription_without_a_handler_is_invalid(c_fake: CFakePlayer) -> None:
    c_fake.update(FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0}]}))
    lib = ffi.dlopen(str(c_fake.library_path))
    try:
        assert lib.dcmi_init() == 0
        no_filter = ffi.new("struct dcmi_event_filter *")
        assert lib.dcmi_subscribe_fault_event(-1, -1, no_filter[0], ffi.NULL) == -8001
    finally:
        ffi.dlclose(lib)


def test_init_fails_without_a_scenario(c_fake: CFakePlayer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SCENARIO_ENV)
    with pytest.raises(DcmiError, match="dcmi_init returned -8005"):
        c_fake.open()


def test_a_change_of_the_file_in_place_is_noticed(c_fake: CFakePlayer) -> None:
    library = c_fake.open(TWO_CARDS)
    text = c_fake.scenario_path.read_text(encoding="utf-8")
    before = os.stat(c_fake.scenario_path)
    # Same size, same inode, mtime put back: only the ctime tells.
    c_fake.scenario_path.write_text(text.replace("health=0", "health=3", 1), encoding="utf-8")
    os.utime(c_fake.scenario_path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert library.health(0, 0) == 3


@pytest.mark.parametrize(
    "line",
    [
        "chip card=0 device=0 colour=blue",
        "chip card=0 events=1:80E01801:2",  # serial:code:severity:assertion
        "chip card=0 vdevs=100:vir02:2.0:6144",  # id:template:aicore:memory_mb:vfg_id:status:in_use
        "chip card=0 pcie=3b:00.0",
        "chip card=0 ip=10.0.0.300",
    ],
)
def test_a_malformed_file_keeps_the_previous_scenario(
    c_fake: CFakePlayer, capfd: pytest.CaptureFixture[str], line: str
) -> None:
    library = c_fake.open(TWO_CARDS)
    # Replaced whole, as the players write: written in place, the file is empty for a moment.
    temporary = c_fake.scenario_path.with_name("malformed.tmp")
    temporary.write_text(line + "\n", encoding="utf-8")
    temporary.replace(c_fake.scenario_path)
    assert library.card_list() == [0, 1]
    # The library's own thread may be the one that reads the new file first; either says so once.
    said = [""]

    def told() -> bool:
        said[0] += capfd.readouterr().err
        return "line 1 is malformed; keeping the previous scenario" in said[0]

    eventually(told, "word of the malformed line on stderr", within=WAIT, every=0.01, explain=lambda: said[0])
    assert library.card_list() == [0, 1]


def test_a_hung_call_returns_once_the_scenario_lets_it(c_fake: CFakePlayer) -> None:
    library = c_fake.open(TWO_CARDS)
    c_fake.update(TWO_CARDS.model_copy(update={"hang": ("health",)}))
    answered = threading.Event()

    def ask() -> None:
        library.health(1, 0)
        answered.set()

    caller = threading.Thread(target=ask, daemon=True)
    caller.start()
    assert not answered.wait(0.2)  # still blocked (a fake that did not hang would have answered)
    c_fake.update(TWO_CARDS)
    assert answered.wait(WAIT)
    caller.join(WAIT)


def test_a_hang_on_one_chip_leaves_the_others_answering(c_fake: CFakePlayer) -> None:
    chips = ({"phy_id": 0, "hang": ["health"]}, {"phy_id": 1})
    library = c_fake.open(FakeScenario.model_validate({"chip_name": "310P3", "chips": chips}))
    assert library.health(1, 0) == 0
