"""Telemetry calls: the scenario's readings come back in DCMI's units, per chip, changeable at run time.

Both fakes answer from the scenario's ``telemetry`` (node-wide, laid over by a
chip's own), with the driver's habits: a figure the chip's driver does not
report is -8255, a type no DCMI enum has is -8001, any call can fail or hang
per chip. The C fake answers through the real binding, so the units and
struct layouts are the ones a real ``libdcmi.so`` hands over.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from library_threads import inside_the_library
from waiting import eventually

from backends.errors import DcmiError
from backends.fake import FakeScenario
from backends.fake.scenario import ScenarioError, parse_scenario
from backends.library import (
    DdrInfo,
    DieId,
    DieType,
    EccDeviceType,
    FrequencyType,
    HbmInfo,
    MultiUtilization,
    NetworkHealth,
    Power,
    ProcessMemory,
    UtilizationType,
    Voltage,
)

WAIT = 15.0

TRAINING = {
    "chip_name": "910B3",
    "memory_mb": 65536,
    "telemetry": {
        "temperature_c": 51,
        "power_w": 312.7,
        "voltage_v": 0.87,
        "frequency_mhz": {"aicore_current": 1650, "hbm": 1800},
        "utilization_pct": {"aicore": 71, "vectorcore": 33, "aicube": 64, "npu": 70, "hbm": 41},
        "memory_used_mb": 30000,
        "hbm_temperature_c": 47,
        "hbm_bandwidth_pct": 12,
    },
    "chips": [
        {"phy_id": 0, "card_id": 1},
        {"phy_id": 1, "card_id": 2, "telemetry": {"temperature_c": 88, "utilization_pct": {"aicore": 5}}},
    ],
}


def _scenario(node: dict[str, Any]) -> FakeScenario:
    return FakeScenario.model_validate(node)


def _code(call: Any, *args: Any) -> int:
    with pytest.raises(DcmiError) as raised:
        call(*args)
    return raised.value.code


def test_readings_come_back_in_dcmi_units(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_scenario(TRAINING))
    assert library.temperature(1, 0) == 51
    assert library.power(1, 0) == Power(3127)
    assert library.power(1, 0).watts == pytest.approx(312.7)
    assert library.voltage(1, 0) == Voltage(87)
    assert library.voltage(1, 0).volts == pytest.approx(0.87)
    assert library.frequency(1, 0, FrequencyType.AICORE_CURRENT) == 1650
    assert library.frequency(1, 0, FrequencyType.AICORE_MAX) == 1000  # a default
    assert library.utilization(1, 0, UtilizationType.AICORE) == 71
    assert library.utilization(1, 0, UtilizationType.HBM) == 41
    assert library.multi_utilization(1, 0) == MultiUtilization(aic=64, aiv=33, aicore=71, npu=70)
    assert library.multi_utilization_period(1, 0, 1) == MultiUtilization(aic=64, aiv=33, aicore=71, npu=70)
    assert library.hbm_info(1, 0) == HbmInfo(
        total_mb=65536, used_mb=30000, freq_mhz=1800, temperature_c=47, bandwidth_utilization=12
    )


def test_a_chip_s_readings_lie_over_the_node_s_key_by_key(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_scenario(TRAINING))
    assert library.temperature(2, 0) == 88
    assert library.utilization(2, 0, UtilizationType.AICORE) == 5
    assert library.utilization(2, 0, UtilizationType.VECTORCORE) == 33  # the node's, beside the chip's aicore
    assert library.power(2, 0) == Power(3127)


def test_a_changed_reading_is_answered_on_the_next_call(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_scenario(TRAINING))
    assert library.temperature(1, 0) == 51
    hotter = TRAINING | {"telemetry": TRAINING["telemetry"] | {"temperature_c": 93, "power_w": 400}}
    any_fake.update(_scenario(hotter))
    assert (library.temperature(1, 0), library.power(1, 0)) == (93, Power(4000))


def test_the_ddr_chips_report_ddr_and_no_hbm(any_fake: ScenarioPlayer[Any]) -> None:
    node = {
        "chip_name": "310P3",
        "memory_mb": 24576,
        "chips": [{"phy_id": 0, "telemetry": {"memory_used_mb": 6144}}],
    }
    library = any_fake.open(_scenario(node))
    assert library.memory_info(0, 0) == DdrInfo(
        total_mb=24576,
        used_mb=6144,
        available_mb=18432,
        freq_mhz=2133,
        hugepage_size_kb=0,
        hugepages_total=0,
        hugepages_free=0,
        utilization=25,
    )
    for call in (library.hbm_info, library.multi_utilization, library.network_health):
        assert _code(call, 0, 0) == -8255
    assert _code(library.utilization, 0, 0, UtilizationType.HBM) == -8255
    assert _code(library.frequency, 0, 0, FrequencyType.HBM) == -8255
    assert library.utilization(0, 0, UtilizationType.DDR) == 0


def test_910b_and_a3_have_no_ddr(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_scenario(TRAINING))
    assert _code(library.memory_info, 1, 0) == -8255
    assert _code(library.frequency, 1, 0, FrequencyType.DDR) == -8255
    assert _code(library.utilization, 1, 0, UtilizationType.DDR_BANDWIDTH) == -8255


def test_a_310b_answers_the_utilization_types_of_its_reference_only(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_scenario({"chip_name": "310B1", "memory_mb": 4096, "chips": [{"phy_id": 0}]}))
    answered = {kind for kind in UtilizationType if _refusal(library.utilization, 0, 0, kind) is None}
    assert answered == {
        UtilizationType.DDR,
        UtilizationType.AICORE,
        UtilizationType.AICPU,
        UtilizationType.CTRLCPU,
        UtilizationType.DDR_BANDWIDTH,
        UtilizationType.VECTORCORE,
    }


def _refusal(call: Any, *args: Any) -> int | None:
    """The code ``call`` fails with; None when it answers."""
    try:
        call(*args)
    except DcmiError as error:
        return error.code
    return None


def test_what_a_310b_does_not_report_is_not_supported(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_scenario({"chip_name": "310B1", "chips": [{"phy_id": 0}]}))
    refusals = {_refusal(library.utilization, 0, 0, kind) for kind in UtilizationType}
    assert refusals == {None, -8255}


def test_an_unknown_type_or_period_is_an_invalid_parameter(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(_scenario(TRAINING))
    assert _code(library.frequency, 1, 0, 3) == -8001
    assert _code(library.utilization, 1, 0, 7) == -8001
    assert _code(library.ecc_info, 1, 0, 9) == -8001
    assert _code(library.die_id, 1, 0, 2) == -8001
    for period in (0, 5):
        assert _code(library.multi_utilization_period, 1, 0, period) == -8001
    assert library.multi_utilization_period(1, 0, 4).aicore == 71


def test_the_card_power_is_its_chips_summed_unless_the_scenario_says(any_fake: ScenarioPlayer[Any]) -> None:
    node = {
        "chip_name": "310P3",
        "telemetry": {"power_w": 20.5},
        "chips": [
            {"phy_id": 0, "card_id": 3},
            {"phy_id": 1, "card_id": 3},
            {"phy_id": 2, "card_id": 4, "telemetry": {"board_power_w": 77.7}},
        ],
    }
    library = any_fake.open(_scenario(node))
    assert library.board_power(3) == Power(410)
    assert library.board_power(4) == Power(777)
    assert _code(library.board_power, 5) == -8001


def test_ecc_counters_of_the_chip_s_own_memory(any_fake: ScenarioPlayer[Any]) -> None:
    node = TRAINING | {
        "chips": [
            {"phy_id": 0, "card_id": 1},
            {
                "phy_id": 1,
                "card_id": 2,
                "telemetry": {
                    "ecc": {"hbm": {"single_bit_error_cnt": 3, "double_bit_isolated_pages_cnt": 1}}
                },
            },
        ]
    }
    library = any_fake.open(_scenario(node))
    clean = library.ecc_info(1, 0, EccDeviceType.HBM)
    assert (clean.enable_flag, clean.single_bit_error_cnt) == (1, 0)
    worn = library.ecc_info(2, 0, EccDeviceType.HBM)
    assert (worn.single_bit_error_cnt, worn.double_bit_isolated_pages_cnt) == (3, 1)
    assert _code(library.ecc_info, 1, 0, EccDeviceType.DDR) == -8255


def test_network_health_on_training_chips(any_fake: ScenarioPlayer[Any]) -> None:
    node = TRAINING | {
        "chips": [
            {"phy_id": 0, "card_id": 1},
            {"phy_id": 1, "card_id": 2, "telemetry": {"network_health": NetworkHealth.UNREACH}},
        ]
    }
    library = any_fake.open(_scenario(node))
    assert library.network_health(1, 0) == NetworkHealth.OK
    assert library.network_health(2, 0) == NetworkHealth.UNREACH


def test_network_health_hangs_on_one_chip_while_the_others_answer(any_fake: ScenarioPlayer[Any]) -> None:
    dropped = TRAINING | {
        "chips": [{"phy_id": 0, "card_id": 1, "hang": ["network_health"]}, {"phy_id": 1, "card_id": 2}]
    }
    library = any_fake.open(_scenario(dropped))
    answers: list[int] = []
    blocked = threading.Thread(target=lambda: answers.append(library.network_health(1, 0)), daemon=True)
    blocked.start()
    try:
        eventually(lambda: inside_the_library(blocked), "the network health call under way", every=0.001)
        assert library.network_health(2, 0) == 0
        assert library.temperature(1, 0) == 51  # only that call of that chip hangs
        assert answers == []
    finally:
        any_fake.update(_scenario(TRAINING))
        blocked.join(WAIT)
    assert answers == [0]


def test_injected_errors_per_call_and_chip(any_fake: ScenarioPlayer[Any]) -> None:
    node = TRAINING | {
        "errors": {"voltage": -8255},
        "chips": [
            {"phy_id": 0, "card_id": 1, "errors": {"temperature": -8012, "hbm_info": -8006}},
            {"phy_id": 1, "card_id": 2},
        ],
    }
    library = any_fake.open(_scenario(node))
    assert _code(library.temperature, 1, 0) == -8012
    assert _code(library.hbm_info, 1, 0) == -8006
    assert library.temperature(2, 0) == 51
    assert _code(library.voltage, 2, 0) == -8255


def test_die_ids_and_processes(any_fake: ScenarioPlayer[Any]) -> None:
    node = {
        "chip_name": "910B3",
        "chips": [
            {
                "phy_id": 6,
                "vdie_id": "00000A01-DEADBEEF-0-0-6",
                "processes": [{"pid": 4242, "memory_bytes": 3 << 30}, {"pid": 99}],
            },
            {"phy_id": 7},
        ],
    }
    library = any_fake.open(_scenario(node))
    die = library.die_id(0, 0, DieType.VDIE)
    assert die == DieId((0xA01, 0xDEADBEEF, 0, 0, 6))
    assert die.text == "00000A01-DEADBEEF-00000000-00000000-00000006"
    others = {library.die_id(card, 0, kind).text for card in (0, 1) for kind in DieType}
    assert len(others) == 4  # every chip and kind has an id of its own by default
    assert library.processes(0, 0) == [ProcessMemory(4242, 3 << 30), ProcessMemory(99, 0)]
    assert library.processes(1, 0) == []


def test_a_bad_reading_is_refused_naming_the_chip() -> None:
    text = (
        '{"chip_name": "910B3", "chips": [{"phy_id": 3, "telemetry": {"utilization_pct": {"aicore": 140}}}]}'
    )
    with pytest.raises(ScenarioError, match=r"chip 3: telemetry: utilization_pct\.aicore"):
        parse_scenario(text, "node.json")


def test_a_scenario_written_back_out_means_the_same() -> None:
    scenario = _scenario(TRAINING)
    again = parse_scenario(scenario.model_dump_json(), "round trip")
    assert [again.telemetry_of(chip) for chip in again.chips] == [
        scenario.telemetry_of(c) for c in scenario.chips
    ]
