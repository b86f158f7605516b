"""The fake backend's scenario file: minimal format, clear errors, live reload, injected failures."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, get_args

import pytest
from plugin_harness import FakeNode

from backends.errors import DcmiError
from backends.fake import FakeLibrary
from backends.fake.scenario import (
    FakeChip,
    FakeEvent,
    FakeScenario,
    FakeVdev,
    Operation,
    ScenarioError,
    load_scenario,
    parse_scenario,
)
from backends.fake.telemetry import (
    FakeEcc,
    FakeFrequencies,
    FakeProcess,
    FakeSuperPod,
    FakeTelemetry,
    FakeUtilization,
    FakeVdevUsage,
)
from backends.library import PcieAddress
from backends.session import LibrarySession

TELEMETRY_MODELS = (
    FakeTelemetry,
    FakeFrequencies,
    FakeUtilization,
    FakeEcc,
    FakeProcess,
    FakeSuperPod,
    FakeVdevUsage,
)


def _chips(*chips: dict[str, Any], name: str = "310P3") -> str:
    """A scenario file's text: ``chips`` of chip ``name``, 24 GiB each."""
    return json.dumps({"chip_name": name, "memory_mb": 24576, "chips": list(chips)})


def _parsed(data: dict[str, Any]) -> FakeScenario:
    return parse_scenario(json.dumps(data), "test")


def _vdev(vdev_id: int, **fields: Any) -> dict[str, Any]:
    return {"vdev_id": vdev_id, "template": "vir02", "memory_mb": 4096} | fields


def _library(node: FakeNode, scenario: dict[str, object]) -> FakeLibrary:
    node.write(scenario)
    library = FakeLibrary(node.scenario)
    library.init()
    return library


def test_the_minimal_scenario_works_as_is(node: FakeNode) -> None:
    library = _library(node, {"chip_name": "310B1", "chips": [{"phy_id": 0, "health": 0, "fault_codes": []}]})
    (chip,) = LibrarySession(library).discover()
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
    assert [chip.phy_id for chip in LibrarySession(library).discover()] == [0, 1, 2]
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
        (
            json.dumps({"chip_name": "310", "chips": [], "missing": ["dcmi_init"]}),
            "missing.0: Input should be",
        ),
        (_chips({"phy_id": 0, "pcie": "00:3b:00.0"}), r"'00:3b:00\.0' is not of the form DDDD:BB:DD\.F"),
        (
            _chips({"phy_id": 0, "pcie": "0000:3b:00.0"}, {"phy_id": 1, "pcie": "0000:3B:00.0"}),
            "pcie must be unique",
        ),
        (_chips({"phy_id": 0, "device_ip": "10.0.0.256"}), "device_ip: value is not a valid IPv4 or IPv6"),
        (
            _chips({"phy_id": 0, "device_ip": "10.0.0.1"}, {"phy_id": 1, "device_ip": "10.0.0.1"}),
            "device_ip must be",
        ),
        (_chips({"phy_id": 0, "device_ip": "10.0.0.1"}, name="310B1"), "SoC boards have no RoCE port"),
        (
            _chips({"phy_id": 0, "events": [{"serial": 1, "code": "80E01801"}] * 2}),
            "serial numbers must be unique",
        ),
        (_chips({"phy_id": 0, "events": [{"serial": 1, "code": "80E01801", "assertion": 3}]}), "assertion"),
        (
            _chips({"phy_id": 0, "vdevs": [_vdev(99)]}),
            "vdev_id: Input should be greater than or equal to 100",
        ),
        (
            _chips({"phy_id": 0, "vdevs": [_vdev(1124)]}),
            "vdev_id: Input should be less than or equal to 1123",
        ),
        (
            _chips({"phy_id": 0, "vdevs": [_vdev(100)]}, {"phy_id": 1, "vdevs": [_vdev(100)]}),
            "vdev_id .node-wide.",
        ),
        (
            _chips({"phy_id": 0, "vdevs": [{"vdev_id": 100, "template": "vir02"}]}),
            "names no memory .*memory_mb",
        ),
        (
            _chips({"phy_id": 0, "vdevs": [{"vdev_id": 100, "template": "half", "memory_mb": 1}]}),
            "give the vNPU's aicore",
        ),
        (
            _chips({"phy_id": 0, "vdevs": [_vdev(100 + n) for n in range(5)]}),
            "take 10 AI cores, the chip has 8",
        ),
        (
            _chips({"phy_id": 0, "vdevs": [_vdev(100, memory_mb=30000)]}),
            "take 30000 MB, the chip has 24576 MB",
        ),
        (_chips({"phy_id": 0, "vdevs": [_vdev(100)]}, name="310"), r"chip 0 \(310\) has no vNPU support"),
        (_chips({"phy_id": 0, "vdevs": [_vdev(100, aicore=1)]}, name="310B1"), "has no vNPU support"),
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


def test_defaults_of_the_newer_fields() -> None:
    scenario = _parsed(
        {
            "chip_name": "310P3",
            "memory_mb": 24576,
            "chips": [
                {
                    "phy_id": 4,
                    "fault_severity": 3,
                    "events": [{"serial": 0, "code": "0x80E01801"}],
                    "vdevs": [{"vdev_id": 100, "template": "vir04_3c_16g"}, _vdev(101)],
                }
            ],
        }
    )
    (chip,) = scenario.chips
    assert scenario.pcie_of(chip) == PcieAddress(domain=0, bus=5, device=0, function=0)
    (event,) = chip.events
    assert (event.code, chip.event_severity(event), event.assertion) == (0x80E01801, 3, 1)
    assert [(v.aicore, v.memory_mb, v.vfg_id, v.status, v.in_use) for v in scenario.vdevs_of(chip)] == [
        (4.0, 16384, 0, 0, False),
        (2.0, 4096, 1, 0, False),
    ]
    assert scenario.missing_functions() == frozenset()
    soc = _parsed({"chip_name": "310B1", "chips": [{"phy_id": 0}]})
    assert soc.pcie_of(soc.chips[0]) is None


def test_a_scenario_survives_its_own_json() -> None:
    # The Python player writes model_dump_json; every new field must read back the same.
    scenario = _parsed(
        {
            "chip_name": "910B3",
            "memory_mb": 65536,
            "missing": ["error_codes"],
            "chips": [
                {
                    "phy_id": 0,
                    "pcie": "0000:C1:00.0",
                    "device_ip": "2001:db8::1",
                    "events": [{"serial": 3, "code": "81078603", "severity": 1, "assertion": 2}],
                    "vdevs": [{"vdev_id": 1123, "template": "vir10_3c_32g", "in_use": True}],
                }
            ],
        }
    )
    assert parse_scenario(scenario.model_dump_json(), "round trip") == scenario


@pytest.mark.parametrize(
    "name",
    sorted(
        {*FakeScenario.model_fields, *FakeChip.model_fields, *FakeEvent.model_fields, *FakeVdev.model_fields}
        | {name for model in TELEMETRY_MODELS for name in model.model_fields}
        | set(get_args(Operation))
    ),
)
def test_every_field_and_operation_is_documented(name: str) -> None:
    # The basics are in docs/fake-backend.md; the telemetry, reset and vNPU fields are in docs/dcmi.md.
    root = Path(__file__).resolve().parent.parent
    page = (root / "docs" / "fake-backend.md").read_text(encoding="utf-8")
    dcmi = (root / "docs" / "dcmi.md").read_text(encoding="utf-8")
    fake = dcmi[dcmi.index("## What the fakes' scenarios say about telemetry, resets and vNPUs") :]
    assert any(f"`{name}`" in text or f'"{name}"' in text for text in (page, fake))
