"""What the other layers ask a family instead of reading its flags: sharing, vNPUs, the rank table."""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import PythonFakePlayer
from node_harness import backend_of

from backends.backend import VNPU_MAKING, ChipBackend
from backends.chips import Chip
from backends.errors import ChipError
from backends.fake import FakeScenario
from backends.families import sharing_families, vnpu_families


def _node(
    player: PythonFakePlayer, chip_name: str, cards: list[int], **scenario: Any
) -> tuple[ChipBackend, list[Chip]]:
    chips = [{"phy_id": phy, "card_id": card} for phy, card in enumerate(cards)]
    document = {"chip_name": chip_name, "chips": chips, **scenario}
    backend = backend_of(player.open(FakeScenario.model_validate(document)))
    return backend, backend.session.discover()


@pytest.mark.parametrize(
    ("chip_name", "cards", "wanted"),
    [
        ("910B3", [0, 1, 2, 3], True),  # every 910 generation
        ("910ProB", [0, 1, 2, 3], True),
        ("Ascend910", [0, 0, 1, 1], True),
        ("310P3", [0, 0, 1, 1], True),  # Atlas 300I Duo: two chips to a card
        ("310P3", [0, 1], False),  # Atlas 300I Pro: one chip to a card
        ("310P3", [0, 0, 1], False),  # a Duo beside a Pro
        ("310", [0, 0, 0, 0], False),
        ("310B1", [0], False),
    ],
)
def test_a_rank_table_is_written_on_910_and_atlas_300i_duo_nodes(
    python_fake: PythonFakePlayer, chip_name: str, cards: list[int], wanted: bool
) -> None:
    backend, chips = _node(python_fake, chip_name, cards)
    assert backend.has_rank_table(chips) is wanted


def test_an_empty_duo_node_has_no_rank_table(python_fake: PythonFakePlayer) -> None:
    backend, _ = _node(python_fake, "310P3", [0, 0])
    assert not backend.has_rank_table([])


@pytest.mark.parametrize(
    ("chip_name", "shares"), [("310P3", True), ("310B1", True), ("310", False), ("910B3", False)]
)
def test_share_count_applies_only_where_the_driver_shares_chips(
    python_fake: PythonFakePlayer, chip_name: str, shares: bool
) -> None:
    backend, _ = _node(python_fake, chip_name, [0])
    assert backend.share_count(4) == (4 if shares else 1)
    assert backend.share_count(1) == 1
    assert sharing_families() == "310P, 310B"


@pytest.mark.parametrize(
    ("chip_name", "splits"), [("310P3", True), ("910B3", True), ("310", False), ("310B1", False)]
)
def test_only_families_whose_chips_split_answer_for_vnpus(
    python_fake: PythonFakePlayer, chip_name: str, splits: bool
) -> None:
    backend, chips = _node(python_fake, chip_name, [0])
    assert (backend.vnpu_absence() == "") is splits
    assert backend.lists_vnpus() is splits
    assert vnpu_families() == "310P, 910"
    if not splits:
        assert "family have no vNPUs" in backend.vnpu_absence()
        with pytest.raises(ChipError, match=r"cannot make a vNPU on chip 0 .*have no vNPUs"):
            backend.create_vnpu(chips[0], "vir02")
        with pytest.raises(ChipError, match="cannot destroy vNPU 100 on chip 0"):
            backend.destroy_vnpu(chips[0], 100)


def test_a_driver_without_vdev_mng_lists_no_vnpus_and_says_what_it_lacks(
    python_fake: PythonFakePlayer,
) -> None:
    backend, _ = _node(python_fake, "310P3", [0], missing=["vdev_info", "create_vdev"])
    assert not backend.lists_vnpus()
    assert backend.lacking(*VNPU_MAKING) == ["dcmi_create_vdevice"]
    assert backend.lacking("dcmi_get_device_info", "dcmi_get_device_ip") == ["dcmi_get_device_info"]
