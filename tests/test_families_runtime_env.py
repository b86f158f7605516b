"""Ascend Docker Runtime mode: the visible physical ids, and ASCEND_ALLOW_LINK on 310B only."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_dcmi.players import CFakePlayer
from node_harness import handover, whole_chips

from ascend_plugin.handover.modes import HandoverMode
from backends.fake import FakeScenario
from backends.families import ASCEND_310, ASCEND_310B, ASCEND_310P, ASCEND_910, FamilyTable


def _env(c_fake: CFakePlayer, family: FamilyTable, chip_name: str, phy_ids: list[int]) -> dict[str, str]:
    chips = [{"phy_id": phy, "card_id": 0} for phy in phy_ids]
    library = c_fake.open(FakeScenario.model_validate({"chip_name": chip_name, "chips": chips}))
    devices = whole_chips(library, family)
    return dict(handover(HandoverMode.RUNTIME, family, Path("/nonexistent")).grant(devices).envs)


@pytest.mark.parametrize("chip_name", ["310B1", "310B4"])
def test_310b_allows_links(c_fake: CFakePlayer, chip_name: str) -> None:
    assert _env(c_fake, ASCEND_310B, chip_name, [0]) == {
        "ASCEND_VISIBLE_DEVICES": "0",
        "ASCEND_RUNTIME_OPTIONS": "",
        "ASCEND_ALLOW_LINK": "True",
    }


@pytest.mark.parametrize(
    ("family", "chip_name"),
    [(ASCEND_310, "310"), (ASCEND_310P, "310P3"), (ASCEND_910, "910B3")],
)
def test_other_families_list_the_physical_ids_only(
    c_fake: CFakePlayer, family: FamilyTable, chip_name: str
) -> None:
    assert _env(c_fake, family, chip_name, [3, 1]) == {
        "ASCEND_VISIBLE_DEVICES": "1,3",
        "ASCEND_RUNTIME_OPTIONS": "",
    }
