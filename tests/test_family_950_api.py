"""A 950 node is served through DCMI v2: dcmi_init answers -8255, the session falls back to dcmiv2_init.

Every v2 call names a chip by its logical id (the fakes' Atlas 850 numbers them
four off the physical ids), physical ids come from
dcmiv2_get_chip_phy_id_by_dev_id, and the other nodes stay on DCMI v1.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer, ScenarioPlayer
from log_records import records
from node_950 import CHIPS, logic_of, node_950

from backends.chips import NO_CARD
from backends.errors import DcmiError
from backends.fake import FakeScenario
from backends.families import Ascend950, family_for
from backends.session import LibrarySession

B3_NODE = FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0}, {"phy_id": 1}]})


def test_a_950_node_is_found_through_dcmi_v2_by_logical_ids(
    any_fake: ScenarioPlayer[Any], caplog: pytest.LogCaptureFixture
) -> None:
    hot = {3: {"health": 2, "telemetry": {"temperature_c": 71}}}
    session = LibrarySession(any_fake.open(node_950(hot), init=False))
    with caplog.at_level(logging.INFO, logger="backends.session"):
        missing = session.init()
    (said,) = records(caplog, "backends.session")
    assert "dcmi_init answered -8255" in said.getMessage()
    assert "DCMI v2" in said.getMessage()
    assert session.api.name == "DCMI v2"
    assert session.description.endswith("(DCMI v2)")
    # The open driver has no period utilization: said by its v1 name, named as v2 calls it.
    assert missing == {"dcmi_get_device_multi_utilization_rate_period"}
    assert session.function_name(next(iter(missing))) == "dcmiv2_get_device_multi_utilization_rate_period"
    chips = session.discover()
    assert [(chip.phy_id, chip.logic_id) for chip in chips] == [(phy, logic_of(phy)) for phy in range(CHIPS)]
    assert {(chip.card_id, chip.device_id) for chip in chips} == {(NO_CARD, NO_CARD)}
    assert chips[3].label == "chip 3 (logical id 7, Ascend950PR)"
    assert family_for(chips[0].info) is Ascend950
    # Each chip's calls reach that chip: chip 3 (logical id 7) is the hot, unhealthy one.
    assert [session.api.health(chip) for chip in chips] == [2 if phy == 3 else 0 for phy in range(CHIPS)]
    assert session.api.temperature(chips[3]) == 71
    assert session.driver_version() == "26.0.rc1"
    session.close()


def test_other_nodes_stay_on_dcmi_v1(any_fake: ScenarioPlayer[Any]) -> None:
    session = LibrarySession(any_fake.open(B3_NODE, init=False))
    assert session.init() == frozenset()
    assert session.v2 is None
    assert session.api.name == "DCMI v1"
    assert [(chip.card_id, chip.phy_id) for chip in session.discover()] == [(0, 0), (1, 1)]
    session.close()


def test_each_api_answers_not_supported_where_the_other_is_spoken(any_fake: ScenarioPlayer[Any]) -> None:
    with pytest.raises(DcmiError) as v1:
        any_fake.open(node_950())
    assert (v1.value.function, v1.value.code) == ("dcmi_init", -8255)
    library = any_fake.open(B3_NODE, init=False)
    with pytest.raises(DcmiError) as v2:
        library.v2().init()
    assert (v2.value.function, v2.value.code) == ("dcmiv2_init", -8255)


def test_a_950_whose_driver_is_not_ready_says_so_in_v2(any_fake: ScenarioPlayer[Any]) -> None:
    session = LibrarySession(any_fake.open(node_950(errors={"init": -8005}), init=False))
    with pytest.raises(DcmiError) as raised:
        session.init()
    assert (raised.value.function, raised.value.code) == ("dcmiv2_init", -8005)


def test_a_node_that_speaks_neither_keeps_the_v1_error(any_fake: ScenarioPlayer[Any]) -> None:
    broken = FakeScenario.model_validate(
        {"chip_name": "910B3", "errors": {"init": -8005}, "chips": [{"phy_id": 0}]}
    )
    session = LibrarySession(any_fake.open(broken, init=False))
    with pytest.raises(DcmiError) as raised:
        session.init()
    assert (raised.value.function, raised.value.code) == ("dcmi_init", -8005)


def test_after_dcmiv2_init_the_v1_calls_do_not_answer(c_fake: CFakePlayer) -> None:
    library = c_fake.open(node_950(), init=False)
    v2 = library.v2()
    v2.init()
    assert v2.device_list() == list(range(CHIPS))
    assert [v2.phy_id(logic) for logic in range(CHIPS)] == [(logic + 4) % CHIPS for logic in range(CHIPS)]
    with pytest.raises(DcmiError) as raised:
        library.card_list()
    assert (raised.value.function, raised.value.code) == ("dcmi_get_card_list", -8005)
    with pytest.raises(DcmiError) as unknown:
        v2.health(CHIPS)
    assert (unknown.value.function, unknown.value.code) == ("dcmiv2_get_device_health", -8001)
