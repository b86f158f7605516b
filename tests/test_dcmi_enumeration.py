"""Enumeration (cards -> NPUs per card -> logic id -> physical id) on real DCMI id semantics, on both fakes.

Card ids are whatever the driver says (slot numbers, BDF hashes), the MCU sits
one past the last NPU of a card and has no logic id, and logic ids need not
follow physical ids.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer

from backends.chips import address_chips
from backends.errors import DcmiError
from backends.fake import FakeScenario
from backends.session import LibrarySession


def _addresses(player: ScenarioPlayer[Any], node: dict[str, Any]) -> list[tuple[int, int, int, int]]:
    chips, unnamed = address_chips(player.open(FakeScenario.model_validate(node)))
    assert unnamed == []
    return [(chip.card_id, chip.device_id, chip.logic_id, chip.phy_id) for chip in chips]


def test_slot_numbered_cards_in_ascending_order(any_fake: ScenarioPlayer[Any]) -> None:
    node = {
        "chip_name": "910B3",
        "chips": [{"phy_id": n, "card_id": card} for n, card in enumerate([8, 1, 5, 3])],
    }
    assert _addresses(any_fake, node) == [(1, 0, 1, 1), (3, 0, 3, 3), (5, 0, 2, 2), (8, 0, 0, 0)]


def test_bdf_hash_card_ids(any_fake: ScenarioPlayer[Any]) -> None:
    cards = [(0x0000 << 16) + (0x3B << 8), (0x0000 << 16) + (0x86 << 8) + 1]
    node = {"chip_name": "310P3", "chips": [{"phy_id": n, "card_id": card} for n, card in enumerate(cards)]}
    assert [card for card, _, _, _ in _addresses(any_fake, node)] == cards


def test_two_chips_of_a_300i_duo_share_one_card(any_fake: ScenarioPlayer[Any]) -> None:
    node = {"chip_name": "310P3", "chips": [{"phy_id": 0, "card_id": 0}, {"phy_id": 1, "card_id": 0}]}
    assert _addresses(any_fake, node) == [(0, 0, 0, 0), (0, 1, 1, 1)]


def test_four_chips_of_a_300i_card_with_logic_ids_unlike_physical_ids(any_fake: ScenarioPlayer[Any]) -> None:
    chips = [
        {"phy_id": phy, "card_id": 4, "logic_id": logic} for phy, logic in [(2, 0), (3, 1), (0, 2), (1, 3)]
    ]
    assert _addresses(any_fake, {"chip_name": "310", "chips": chips}) == [
        (4, 0, 0, 2),
        (4, 1, 1, 3),
        (4, 2, 2, 0),
        (4, 3, 3, 1),
    ]


@pytest.mark.parametrize("chip_name", ["310B1", "910B3"])
def test_the_mcu_is_never_asked_for(any_fake: ScenarioPlayer[Any], chip_name: str) -> None:
    # The driver answers -8255 for the MCU's logic id; enumeration would fail if it asked.
    library = any_fake.open(FakeScenario.model_validate({"chip_name": chip_name, "chips": [{"phy_id": 0}]}))
    assert library.device_count(0) == 1
    with pytest.raises(DcmiError) as mcu:
        library.logic_id(0, 1)
    assert mcu.value.code == -8255
    assert len(LibrarySession(library).discover()) == 1


def test_discover_orders_by_physical_id(any_fake: ScenarioPlayer[Any]) -> None:
    node = {"chip_name": "310B1", "chips": [{"phy_id": 3, "card_id": 0}, {"phy_id": 1, "card_id": 1}]}
    session = LibrarySession(any_fake.open(FakeScenario.model_validate(node)))
    assert [chip.phy_id for chip in session.discover()] == [1, 3]
