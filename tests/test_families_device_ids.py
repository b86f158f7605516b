"""The kubelet's names for chips found through the binding: <prefix>-<physical id>, in physical-id order."""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import CFakePlayer
from node_harness import whole_chips

from backends.fake import FakeScenario
from backends.families import ASCEND_310, ASCEND_310B, ASCEND_310P, ASCEND_910, FamilyTable

NODES: list[tuple[FamilyTable, dict[str, Any], list[str]]] = [
    (ASCEND_310B, {"chip_name": "310B1", "chips": [{"phy_id": 0}]}, ["Ascend310-0"]),
    (
        ASCEND_310P,  # Atlas 300I Duo: two chips on card 0
        {"chip_name": "310P3", "chips": [{"phy_id": 1, "card_id": 0}, {"phy_id": 0, "card_id": 0}]},
        ["Ascend310P-0", "Ascend310P-1"],
    ),
    (
        ASCEND_310,  # Atlas 300I: four chips on one card in slot 2
        {"chip_name": "310", "chips": [{"phy_id": p, "card_id": 2, "logic_id": 3 - p} for p in range(4)]},
        ["Ascend310-0", "Ascend310-1", "Ascend310-2", "Ascend310-3"],
    ),
    (
        ASCEND_910,  # an 8-NPU 910B server: card ids are slot numbers 1..8
        {"chip_name": "910B3", "chips": [{"phy_id": 7 - n, "card_id": n + 1} for n in range(8)]},
        [f"Ascend910-{p}" for p in range(8)],
    ),
]


@pytest.mark.parametrize(
    ("family", "node", "ids"), NODES, ids=["310B", "310P-duo", "310-card", "910B-server"]
)
def test_device_ids_carry_the_physical_id(
    c_fake: CFakePlayer, family: FamilyTable, node: dict[str, Any], ids: list[str]
) -> None:
    library = c_fake.open(FakeScenario.model_validate(node))
    assert [device.id for device in whole_chips(library, family)] == ids


def test_the_prefix_follows_the_overrides(c_fake: CFakePlayer) -> None:
    library = c_fake.open(FakeScenario.model_validate({"chip_name": "310B4", "chips": [{"phy_id": 0}]}))
    table = ASCEND_310B.with_overrides(device_id_prefix="Ascend310B")
    assert [device.id for device in whole_chips(library, table)] == ["Ascend310B-0"]
