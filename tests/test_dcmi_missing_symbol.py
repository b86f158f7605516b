"""A driver that lacks a function fails only the calls that need it, with SymbolMissing naming it."""

from __future__ import annotations

import pytest
from fake_dcmi.players import CFakePlayer

from backends.errors import SymbolMissing
from backends.fake import FakeScenario
from backends.session import LibrarySession

NODE = FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0}, {"phy_id": 1}]})


@pytest.mark.parametrize("c_fake", [("dcmi_get_device_hbm_info",)], indirect=True)
def test_only_the_call_needing_the_missing_function_fails(c_fake: CFakePlayer) -> None:
    library = c_fake.open(NODE)
    assert [chip.phy_id for chip in LibrarySession(library).discover()] == [0, 1]
    with pytest.raises(SymbolMissing) as raised:
        library.hbm_info(0, 0)
    assert raised.value.function == "dcmi_get_device_hbm_info"
    assert str(c_fake.library_path) in str(raised.value)
    assert library.health(1, 0) == 0  # and the library keeps answering


@pytest.mark.parametrize("c_fake", [("dcmi_get_device_chip_info_v2",)], indirect=True)
def test_enumeration_names_the_missing_function(c_fake: CFakePlayer) -> None:
    library = c_fake.open(NODE)
    with pytest.raises(SymbolMissing, match="has no symbol dcmi_get_device_chip_info_v2"):
        LibrarySession(library).discover()
