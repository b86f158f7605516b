"""Each family claims its chip names as DCMI reports them through the binding (Huawei's detection order)."""

from __future__ import annotations

import pytest
from fake_dcmi.players import CFakePlayer

from backends.backend import ChipBackend
from backends.errors import UnknownChipFamily
from backends.fake import FakeScenario
from backends.families import (
    Ascend310,
    Ascend310B,
    Ascend310P,
    Ascend910,
    Ascend910A1,
    Ascend910A3,
    Ascend910B,
    family_for,
    family_named,
)
from backends.library import ChipInfo
from backends.session import LibrarySession

# chip name, npu name, the family, the implementation serving it
CHIP_NAMES: list[tuple[str, str, type[ChipBackend], type[ChipBackend]]] = [
    ("310", "", Ascend310, Ascend310),  # Atlas 300I (model 3000/3010)
    ("310B1", "", Ascend310B, Ascend310B),  # Atlas 200I A2: contains "310", must not be taken for a 310
    ("310B4", "", Ascend310B, Ascend310B),
    ("310P3", "", Ascend310P, Ascend310P),  # Atlas 300I Pro / Duo
    ("310P1", "", Ascend310P, Ascend310P),
    ("I2", "", Ascend310P, Ascend310P),  # 310P under a China-edition driver
    ("910B3", "910B3", Ascend910, Ascend910B),  # Atlas A2: npu_name repeats the chip name
    ("A2G3", "A2G3", Ascend910, Ascend910B),  # 910B3 under a China-edition driver
    ("910A", "", Ascend910, Ascend910A1),  # Atlas A1
    ("910ProB", "", Ascend910, Ascend910A1),
    ("910B", "", Ascend910, Ascend910A1),  # a first-generation name, though it starts like an A2 one
    ("Ascend910", "9391", Ascend910, Ascend910A3),  # Atlas A3: the model is in npu_name
]


@pytest.mark.parametrize(
    ("chip_name", "npu_name", "family", "implementation"), CHIP_NAMES, ids=[row[0] for row in CHIP_NAMES]
)
def test_the_chip_name_picks_the_family_and_its_implementation(
    c_fake: CFakePlayer,
    chip_name: str,
    npu_name: str,
    family: type[ChipBackend],
    implementation: type[ChipBackend],
) -> None:
    library = c_fake.open(
        FakeScenario.model_validate({"chip_name": chip_name, "npu_name": npu_name, "chips": [{"phy_id": 0}]})
    )
    (chip,) = LibrarySession(library).discover()
    assert (chip.info.chip_name, chip.info.npu_name) == (chip_name, npu_name)
    assert family_for(chip.info) is family
    assert family.for_chip(chip.info) is implementation


@pytest.mark.parametrize("chip_name", ["Ascend960", "710", "P910"])
def test_an_unsupported_chip_name_is_a_clear_error(c_fake: CFakePlayer, chip_name: str) -> None:
    library = c_fake.open(FakeScenario.model_validate({"chip_name": chip_name, "chips": [{"phy_id": 0}]}))
    (chip,) = LibrarySession(library).discover()
    with pytest.raises(UnknownChipFamily, match=f"chip name '{chip_name}' matches no supported family"):
        family_for(chip.info)


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("310", Ascend310),
        ("310b", Ascend310B),
        ("310P", Ascend310P),
        ("910", Ascend910),
    ],
)
def test_a_family_can_be_forced_by_name(name: str, family: type[ChipBackend]) -> None:
    assert family_named(name) is family


def test_a_forced_910_serves_a_chip_name_no_generation_claims_as_a3() -> None:
    assert family_named("910").for_chip(ChipInfo("Ascend", "Z42", "V1", 0)) is Ascend910A3


def test_an_unknown_family_name_says_which_are_allowed() -> None:
    with pytest.raises(ValueError, match="unknown chip family '710'; allowed: 310P, 310B, 310, 910"):
        family_named("710")
