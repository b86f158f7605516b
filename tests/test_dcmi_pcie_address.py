"""dcmi_get_device_pcie_info_v2: where each chip sits on PCI, on both fakes; none on SoC boards."""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer, ScenarioPlayer

from backends.dcmi._dcmi_cffi import ffi
from backends.errors import DcmiError
from backends.fake import FakeScenario
from backends.library import PcieAddress


def test_the_address_the_scenario_gives(any_fake: ScenarioPlayer[Any]) -> None:
    library = any_fake.open(
        FakeScenario.model_validate(
            {
                "chip_name": "910B3",
                "chips": [
                    {"phy_id": 0, "card_id": 1, "pcie": "0000:C1:00.0"},
                    {"phy_id": 1, "card_id": 2, "pcie": "0002:3b:1f.7"},
                ],
            }
        )
    )
    assert library.pcie_address(1, 0) == PcieAddress(domain=0, bus=0xC1, device=0, function=0)
    second = library.pcie_address(2, 0)
    assert (second.domain, second.bus, second.device, second.function) == (2, 0x3B, 0x1F, 7)
    assert second.bdf == "0002:3b:1f.7"


def test_without_one_each_chip_gets_its_own_bus_by_physical_id(any_fake: ScenarioPlayer[Any]) -> None:
    chips = [{"phy_id": 0, "card_id": 0}, {"phy_id": 1, "card_id": 0}, {"phy_id": 255, "card_id": 9}]
    library = any_fake.open(FakeScenario.model_validate({"chip_name": "310P3", "chips": chips}))
    assert [library.pcie_address(card, device).bdf for card, device in ((0, 0), (0, 1), (9, 0))] == [
        "0000:01:00.0",
        "0000:02:00.0",
        "0001:00:00.0",
    ]


@pytest.mark.parametrize("chip_name", ["310B1", "310B4"])
def test_soc_boards_have_none(any_fake: ScenarioPlayer[Any], chip_name: str) -> None:
    library = any_fake.open(FakeScenario.model_validate({"chip_name": chip_name, "chips": [{"phy_id": 0}]}))
    with pytest.raises(DcmiError) as raised:
        library.pcie_address(0, 0)
    assert (raised.value.function, raised.value.code) == ("dcmi_get_device_pcie_info_v2", -8255)


def test_injected_errors_and_unknown_chips(any_fake: ScenarioPlayer[Any]) -> None:
    scenario = {
        "chip_name": "910B3",
        "chips": [{"phy_id": 0, "errors": {"pcie_address": -8012}}, {"phy_id": 1}],
    }
    library = any_fake.open(FakeScenario.model_validate(scenario))
    with pytest.raises(DcmiError, match="dcmi_get_device_pcie_info_v2 returned -8012"):
        library.pcie_address(0, 0)
    assert library.pcie_address(1, 0).bdf == "0000:02:00.0"
    with pytest.raises(DcmiError, match="-8001"):
        library.pcie_address(7, 0)


def test_the_c_fake_fills_the_whole_struct(c_fake: CFakePlayer) -> None:
    c_fake.update(
        FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0, "pcie": "0000:81:00.0"}]})
    )
    lib = ffi.dlopen(str(c_fake.library_path))
    try:
        info = ffi.new("struct dcmi_pcie_info_all *", {"reserve": [0xAA] * 32})
        assert lib.dcmi_get_device_pcie_info_v2(0, 0, info) == -8005  # before dcmi_init, like every call
        assert lib.dcmi_init() == 0
        assert lib.dcmi_get_device_pcie_info_v2(0, 0, ffi.NULL) == -8001
        assert lib.dcmi_get_device_pcie_info_v2(0, 0, info) == 0
        assert (info.venderid, info.domain, info.bdf_busid, info.bdf_deviceid, info.bdf_funcid) == (
            0x19E5,
            0,
            0x81,
            0,
            0,
        )
        assert bytes(info.reserve) == bytes(32)
    finally:
        ffi.dlclose(lib)
