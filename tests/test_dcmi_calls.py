"""DcmiLibrary through the real cffi binding: values decoded from DCMI's structs, codes turned into errors."""

from __future__ import annotations

import pytest
from fake_dcmi.players import CFakePlayer

from backends.errors import DcmiError
from backends.fake import FakeScenario
from backends.library import HEALTH_ABSENT, ChipInfo, HbmInfo

A3_NODE = FakeScenario.model_validate(
    {
        "chip_name": "Ascend910",
        "npu_name": "9391",
        "chip_ver": "V2",
        "driver_version": "25.0.rc1.b010",
        "aicore": 24.0,
        "aicore_cnt": 24,
        "memory_mb": 65536,
        "chips": [
            {
                "phy_id": 4,
                "card_id": 176,
                "logic_id": 0,
                "health": 2,
                "fault_codes": ["80E01801", "0x8C084E00"],
            },
            {"phy_id": 5, "card_id": 176, "logic_id": 1, "health": HEALTH_ABSENT},
        ],
    }
)


def test_every_value_is_decoded(c_fake: CFakePlayer) -> None:
    library = c_fake.open(A3_NODE)
    assert library.driver_version() == "25.0.rc1.b010"
    assert library.card_list() == [176]
    assert library.device_count(176) == 2
    assert [library.logic_id(176, device) for device in (0, 1)] == [0, 1]
    assert [library.phy_id(logic) for logic in (0, 1)] == [4, 5]
    assert library.chip_info(176, 1) == ChipInfo("Ascend", "Ascend910", "V2", 24, "9391")
    assert library.total_aicore(176, 0) == 24.0
    assert library.health(176, 0) == 2
    assert library.health(176, 1) == HEALTH_ABSENT
    assert library.error_codes(176, 0) == [0x80E01801, 0x8C084E00]
    assert library.error_codes(176, 1) == []
    assert library.hbm_info(176, 0) == HbmInfo(
        total_mb=65536, used_mb=0, freq_mhz=1600, temperature_c=40, bandwidth_utilization=0
    )


def test_memory_info_v3_reads_the_ddr_figure(c_fake: CFakePlayer) -> None:
    library = c_fake.open(
        FakeScenario.model_validate({"chip_name": "310P3", "chips": [{"phy_id": 0, "memory_mb": 24576}]})
    )
    info = library.memory_info(0, 0)
    assert (info.total_mb, info.used_mb, info.available_mb) == (24576, 0, 24576)


def test_the_310b1_ai_core_figure_is_the_float_one(c_fake: CFakePlayer) -> None:
    library = c_fake.open(FakeScenario.model_validate({"chip_name": "310B1", "chips": [{"phy_id": 0}]}))
    aic = library.total_aicore(0, 0)
    assert isinstance(aic, float)
    assert aic == 1.0


def test_a_fractional_ai_core_figure_survives_the_float(c_fake: CFakePlayer) -> None:
    library = c_fake.open(
        FakeScenario.model_validate({"chip_name": "910B3", "aicore": 2.5, "chips": [{"phy_id": 0}]})
    )
    assert library.total_aicore(0, 0) == 2.5


@pytest.mark.parametrize("code", [-8012, -8006, -8001, -8255])
def test_a_failing_call_raises_the_error_for_its_code(c_fake: CFakePlayer, code: int) -> None:
    library = c_fake.open(
        FakeScenario.model_validate(
            {"chip_name": "310P3", "chips": [{"phy_id": 0, "errors": {"health": code}}]}
        )
    )
    with pytest.raises(DcmiError) as raised:
        library.health(0, 0)
    assert (raised.value.function, raised.value.code) == ("dcmi_get_device_health", code)


def test_an_error_on_one_chip_leaves_the_others_answering(c_fake: CFakePlayer) -> None:
    library = c_fake.open(
        FakeScenario.model_validate(
            {
                "chip_name": "310",
                "chips": [
                    {"phy_id": 0, "card_id": 0, "errors": {"chip_info": -8008}},
                    {"phy_id": 1, "card_id": 0},
                ],
            }
        )
    )
    with pytest.raises(
        DcmiError, match=r"dcmi_get_device_chip_info_v2 returned -8008 \(device does not exist\)"
    ):
        library.chip_info(0, 0)
    assert library.chip_info(0, 1).chip_name == "310"


def test_calls_before_init_are_refused_as_not_initialised(c_fake: CFakePlayer) -> None:
    library = c_fake.open(
        FakeScenario.model_validate({"chip_name": "310B1", "chips": [{"phy_id": 0}]}), init=False
    )
    with pytest.raises(DcmiError) as raised:
        library.card_list()
    assert raised.value.code == -8005


def test_a_failing_init_raises_and_leaves_the_driver_uninitialised(c_fake: CFakePlayer) -> None:
    library = c_fake.open(
        FakeScenario.model_validate(
            {"chip_name": "310B1", "errors": {"init": -8005}, "chips": [{"phy_id": 0}]}
        ),
        init=False,
    )
    with pytest.raises(DcmiError, match="dcmi_init returned -8005"):
        library.init()
    with pytest.raises(DcmiError, match="dcmi_get_card_list returned -8005"):
        library.card_list()  # the library is loaded: this answer comes from the driver itself
