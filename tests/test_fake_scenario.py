"""The fake backend's scenario file: minimal format, clear errors, live reload, injected failures."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from plugin_harness import FakeNode

from backends.chips import enumerate_chips
from backends.errors import DcmiError
from backends.fake import FakeLibrary
from backends.fake.scenario import ScenarioError, load_scenario


def _library(node: FakeNode, scenario: dict[str, object]) -> FakeLibrary:
    node.write(scenario)
    library = FakeLibrary(node.scenario)
    library.init()
    return library


def test_the_minimal_scenario_works_as_is(node: FakeNode) -> None:
    library = _library(node, {"chip_name": "310B1", "chips": [{"phy_id": 0, "health": 0, "fault_codes": []}]})
    (chip,) = enumerate_chips(library)
    assert (chip.card_id, chip.device_id, chip.logic_id, chip.phy_id) == (0, 0, 0, 0)
    assert chip.info.chip_name == "310B1"
    assert library.total_aicore(0, 0) == 1.0
    assert library.health(0, 0) == 0
    assert library.error_codes(0, 0) == []


def test_cards_need_not_be_numbered_from_zero(node: FakeNode) -> None:
    library = _library(
        node, {"chip_name": "910B3", "chips": [{"phy_id": n, "card_id": 10 + 7 * n} for n in range(3)]}
    )
    assert library.card_list() == [10, 17, 24]
    assert [chip.phy_id for chip in enumerate_chips(library)] == [0, 1, 2]
    # The index after the last NPU of a card is its MCU: "not supported", not "invalid".
    with pytest.raises(DcmiError) as mcu:
        library.logic_id(10, 1)
    assert mcu.value.code == -8255


def test_calls_before_init_fail_like_dcmi(node: FakeNode) -> None:
    library = FakeLibrary(node.scenario)
    with pytest.raises(DcmiError, match=r"dcmi_get_card_list returned -8005"):
        library.card_list()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        (json.dumps({"chips": []}), "chip_name: Field required"),
        (json.dumps({"chip_name": "310", "chips": [{"phy_id": 0, "fault_codes": ["nothex"]}]}), "'nothex'"),
        (json.dumps({"chip_name": "310", "chips": [{"phy_id": 0, "health": 7}]}), "health 7 is not a DCMI"),
        (json.dumps({"chip_name": "310", "chips": [{"phy_id": 0}, {"phy_id": 0}]}), "phy_id must be unique"),
        (json.dumps({"chip_name": "310", "chips": [], "colour": "red"}), "colour: Extra inputs"),
        (json.dumps({"chip_name": "310", "chips": [], "errors": {"health": 5}}), "errors.health"),
    ],
)
def test_invalid_scenarios_name_the_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ScenarioError, match=message) as error:
        load_scenario(path)
    assert str(path) in str(error.value)


def test_edits_are_picked_up_and_bad_edits_keep_the_last_good_scenario(node: FakeNode) -> None:
    library = _library(node, {"chip_name": "310B1", "chips": [{"phy_id": 0}]})
    node.write({"chip_name": "310B1", "chips": [{"phy_id": 0, "fault_codes": ["80E01801"]}]})
    assert library.error_codes(0, 0) == [0x80E01801]
    node.scenario.write_text("{ not json")
    assert library.error_codes(0, 0) == [0x80E01801]


def test_injected_errors_are_typed_by_retryability(node: FakeNode) -> None:
    library = _library(
        node,
        {
            "chip_name": "310P3",
            "errors": {"health": -8006},
            "chips": [{"phy_id": 0, "errors": {"error_codes": -8001}}],
        },
    )
    with pytest.raises(DcmiError, match="timed out"):
        library.health(0, 0)
    with pytest.raises(DcmiError, match="invalid parameter"):
        library.error_codes(0, 0)


def test_a_hang_lasts_until_the_scenario_releases_it(node: FakeNode) -> None:
    library = _library(node, {"chip_name": "310P3", "chips": [{"phy_id": 0, "hang": ["health"]}]})
    answered = threading.Event()
    worker = threading.Thread(target=lambda: (library.health(0, 0), answered.set()), daemon=True)
    worker.start()
    assert not answered.wait(0.1)
    node.write({"chip_name": "310P3", "chips": [{"phy_id": 0}]})
    assert answered.wait(10)
