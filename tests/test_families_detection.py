"""Each family claims its chip names as DCMI reports them through the binding (Huawei's detection order)."""

from __future__ import annotations

import pytest
from fake_dcmi.players import CFakePlayer

from backends.chips import enumerate_chips
from backends.errors import UnknownChipFamily
from backends.fake import FakeScenario
from backends.families import (
    ASCEND_310,
    ASCEND_310B,
    ASCEND_310P,
    ASCEND_910,
    FamilyTable,
    family_for,
    family_named,
)

CHIP_NAMES: list[tuple[str, str, FamilyTable]] = [
    ("310", "", ASCEND_310),  # Atlas 300I (model 3000/3010)
    ("310B1", "", ASCEND_310B),  # Atlas 200I A2: contains "310", must not be taken for a 310
    ("310B4", "", ASCEND_310B),
    ("310P3", "", ASCEND_310P),  # Atlas 300I Pro / Duo
    ("310P1", "", ASCEND_310P),
    ("I2", "", ASCEND_310P),  # 310P under a China-edition driver
    ("910B3", "910B3", ASCEND_910),  # Atlas A2: npu_name repeats the chip name
    ("A2G3", "A2G3", ASCEND_910),  # 910B3 under a China-edition driver
    ("910A", "", ASCEND_910),  # Atlas A1
    ("910ProB", "", ASCEND_910),
    ("Ascend910", "9391", ASCEND_910),  # Atlas A3: the model is in npu_name
]


@pytest.mark.parametrize(
    ("chip_name", "npu_name", "family"), CHIP_NAMES, ids=[name for name, _, _ in CHIP_NAMES]
)
def test_the_chip_name_picks_the_family(
    c_fake: CFakePlayer, chip_name: str, npu_name: str, family: FamilyTable
) -> None:
    library = c_fake.open(
        FakeScenario.model_validate({"chip_name": chip_name, "npu_name": npu_name, "chips": [{"phy_id": 0}]})
    )
    (chip,) = enumerate_chips(library)
    assert (chip.info.chip_name, chip.info.npu_name) == (chip_name, npu_name)
    assert family_for(chip.info) is family


@pytest.mark.parametrize("chip_name", ["Ascend950", "710", "P910"])
def test_an_unsupported_chip_name_is_a_clear_error(c_fake: CFakePlayer, chip_name: str) -> None:
    library = c_fake.open(FakeScenario.model_validate({"chip_name": chip_name, "chips": [{"phy_id": 0}]}))
    (chip,) = enumerate_chips(library)
    with pytest.raises(UnknownChipFamily, match=f"chip name '{chip_name}' matches no supported family"):
        family_for(chip.info)


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("310", ASCEND_310),
        ("310b", ASCEND_310B),
        ("310P", ASCEND_310P),
        ("910", ASCEND_910),
    ],
)
def test_a_family_can_be_forced_by_name(name: str, family: FamilyTable) -> None:
    assert family_named(name) is family
