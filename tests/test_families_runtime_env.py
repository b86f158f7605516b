"""Ascend Docker Runtime mode: the visible physical ids, and ASCEND_ALLOW_LINK on 310B only."""

from __future__ import annotations

import pytest
from fake_dcmi.players import CFakePlayer

from backends.base import ChipBackend
from backends.fake import FakeScenario
from backends.families import Ascend310Backend, Ascend310BBackend, Ascend310PBackend, Ascend910Backend


def _env(
    c_fake: CFakePlayer, family: type[ChipBackend], chip_name: str, phy_ids: list[int]
) -> dict[str, str]:
    chips = [{"phy_id": phy, "card_id": 0} for phy in phy_ids]
    backend = family(c_fake.open(FakeScenario.model_validate({"chip_name": chip_name, "chips": chips})))
    return backend.runtime_env(chip.phy_id for chip in backend.discover())


@pytest.mark.parametrize("chip_name", ["310B1", "310B4"])
def test_310b_allows_links(c_fake: CFakePlayer, chip_name: str) -> None:
    assert _env(c_fake, Ascend310BBackend, chip_name, [0]) == {
        "ASCEND_VISIBLE_DEVICES": "0",
        "ASCEND_RUNTIME_OPTIONS": "",
        "ASCEND_ALLOW_LINK": "True",
    }


@pytest.mark.parametrize(
    ("family", "chip_name"),
    [(Ascend310Backend, "310"), (Ascend310PBackend, "310P3"), (Ascend910Backend, "910B3")],
)
def test_other_families_list_the_physical_ids_only(
    c_fake: CFakePlayer, family: type[ChipBackend], chip_name: str
) -> None:
    assert _env(c_fake, family, chip_name, [3, 1]) == {
        "ASCEND_VISIBLE_DEVICES": "1,3",
        "ASCEND_RUNTIME_OPTIONS": "",
    }
