"""Each family claims its chip names as DCMI reports them through the binding (Huawei's detection order)."""

from __future__ import annotations

import pytest
from fake_dcmi.players import CFakePlayer

from backends.base import ChipBackend, enumerate_chips
from backends.errors import UnknownChipFamily
from backends.fake import FakeScenario
from backends.families import (
    Ascend310Backend,
    Ascend310BBackend,
    Ascend310PBackend,
    Ascend910Backend,
    family_for,
    family_named,
)

CHIP_NAMES: list[tuple[str, str, type[ChipBackend]]] = [
    ("310", "", Ascend310Backend),  # Atlas 300I (model 3000/3010)
    ("310B1", "", Ascend310BBackend),  # Atlas 200I A2: contains "310", must not be taken for a 310
    ("310B4", "", Ascend310BBackend),
    ("310P3", "", Ascend310PBackend),  # Atlas 300I Pro / Duo
    ("310P1", "", Ascend310PBackend),
    ("I2", "", Ascend310PBackend),  # 310P under a China-edition driver
    ("910B3", "910B3", Ascend910Backend),  # Atlas A2: npu_name repeats the chip name
    ("A2G3", "A2G3", Ascend910Backend),  # 910B3 under a China-edition driver
    ("910A", "", Ascend910Backend),  # Atlas A1
    ("910ProB", "", Ascend910Backend),
    ("Ascend910", "9391", Ascend910Backend),  # Atlas A3: the model is in npu_name
]


@pytest.mark.parametrize(
    ("chip_name", "npu_name", "family"), CHIP_NAMES, ids=[name for name, _, _ in CHIP_NAMES]
)
def test_the_chip_name_picks_the_family(
    c_fake: CFakePlayer, chip_name: str, npu_name: str, family: type[ChipBackend]
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
        ("310", Ascend310Backend),
        ("310b", Ascend310BBackend),
        ("310P", Ascend310PBackend),
        ("910", Ascend910Backend),
    ],
)
def test_a_family_can_be_forced_by_name(name: str, family: type[ChipBackend]) -> None:
    assert family_named(name) is family
