"""Each family names the chips a hot reset takes down together, from the node's chips as DCMI lists them."""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import PythonFakePlayer, ScenarioPlayer
from node_harness import backend_of

from backends.backend import ChipBackend
from backends.chips import Chip
from backends.errors import ChipError, DcmiError
from backends.fake import FakeScenario
from backends.families import Ascend310, Ascend310B, Ascend310P, Ascend910A1, Ascend910A3, Ascend910B


def _node(
    player: PythonFakePlayer, chip_name: str, chips: list[dict[str, Any]]
) -> tuple[ChipBackend, list[Chip]]:
    backend = backend_of(player.open(FakeScenario.model_validate({"chip_name": chip_name, "chips": chips})))
    return backend, backend.session.discover()


def _groups(backend: ChipBackend, chips: list[Chip]) -> set[tuple[int, ...]]:
    """Every chip's group, as physical ids."""
    return {tuple(member.phy_id for member in backend.reset_group(chip, chips)) for chip in chips}


def test_first_generation_910_resets_rings_of_four_logic_ids(python_fake: PythonFakePlayer) -> None:
    # Logic ids two ahead of the physical ids: the group follows the logic ids, as Huawei's does.
    chips = [{"phy_id": phy, "card_id": phy, "logic_id": (phy + 2) % 8} for phy in range(8)]
    backend, found = _node(python_fake, "910ProB", chips)
    assert type(backend) is Ascend910A1
    assert _groups(backend, found) == {(0, 1, 6, 7), (2, 3, 4, 5)}


@pytest.mark.parametrize(
    ("count", "groups"), [(8, {tuple(range(8))}), (16, {tuple(range(16))}), (4, {(0, 1, 2, 3)})]
)
def test_910b_resets_its_mesh_of_eight_or_a_whole_box_of_sixteen(
    python_fake: PythonFakePlayer, count: int, groups: set[tuple[int, ...]]
) -> None:
    backend, found = _node(python_fake, "910B3", [{"phy_id": phy, "card_id": phy} for phy in range(count)])
    assert type(backend) is Ascend910B
    assert _groups(backend, found) == groups


def test_an_a3_reset_takes_its_card_and_the_brother_card(python_fake: PythonFakePlayer) -> None:
    # Eight cards of two dies: the driver pairs cards 0-3 with 4-7.
    chips = [{"phy_id": phy, "card_id": phy // 2} for phy in range(16)]
    backend, found = _node(python_fake, "Ascend910", chips)
    assert type(backend) is Ascend910A3
    assert _groups(backend, found) == {(0, 1, 8, 9), (2, 3, 10, 11), (4, 5, 12, 13), (6, 7, 14, 15)}
    assert [backend.associated_card(chip) for chip in found[:4]] == [4, 4, 5, 5]


def test_an_a3_driver_that_names_no_brother_resets_the_whole_node(python_fake: PythonFakePlayer) -> None:
    chips = [{"phy_id": phy, "card_id": phy // 2} for phy in range(8)]
    scenario = {"chip_name": "Ascend910", "chips": chips, "missing": ["brother_card"]}
    backend = backend_of(python_fake.open(FakeScenario.model_validate(scenario)))
    found = backend.session.discover()
    assert _groups(backend, found) == {tuple(range(8))}
    assert backend.associated_card(found[0]) == -1


def test_only_a3_names_an_associated_card(python_fake: PythonFakePlayer) -> None:
    backend, found = _node(python_fake, "910B3", [{"phy_id": phy, "card_id": phy} for phy in range(8)])
    assert {backend.associated_card(chip) for chip in found} == {-1}


def test_a_300i_duo_resets_both_chips_of_its_card_a_300i_pro_its_one(python_fake: PythonFakePlayer) -> None:
    # Card 4: a Duo (two chips); card 9: a Pro (one).
    chips = [{"phy_id": 0, "card_id": 4}, {"phy_id": 1, "card_id": 4}, {"phy_id": 2, "card_id": 9}]
    backend, found = _node(python_fake, "310P3", chips)
    assert type(backend) is Ascend310P
    assert _groups(backend, found) == {(0, 1), (2,)}


@pytest.mark.parametrize(("chip_name", "family"), [("310", Ascend310), ("310B1", Ascend310B)])
def test_310_and_310b_chips_reset_alone(
    python_fake: PythonFakePlayer, chip_name: str, family: type[ChipBackend]
) -> None:
    count = 4 if family is Ascend310 else 1  # four 310 share an Atlas 300I card; a 310B board has one
    backend, found = _node(python_fake, chip_name, [{"phy_id": phy, "card_id": 0} for phy in range(count)])
    assert type(backend) is family
    assert _groups(backend, found) == {(phy,) for phy in range(count)}


def test_a_chip_outside_the_node_is_refused_by_name(python_fake: PythonFakePlayer) -> None:
    backend, found = _node(python_fake, "310P3", [{"phy_id": 0}, {"phy_id": 1}])
    with pytest.raises(
        ChipError,
        match=r"chip 1 \(card 1, device 0, 310P3\) is not among the node's chips \(physical ids 0\)",
    ):
        backend.reset_group(found[1], found[:1])


def test_a_300i_duo_is_reset_through_device_0_of_its_card(any_fake: ScenarioPlayer[Any]) -> None:
    """Its driver takes a card's reset on device 0 only: the reset of chip 1 asks device 0, and both go."""
    chips = [{"phy_id": 0, "card_id": 0}, {"phy_id": 1, "card_id": 0}]
    duo = {"chip_name": "310P3", "reset_seconds": 3600, "chips": chips}
    library = any_fake.open(FakeScenario.model_validate(duo))
    backend = backend_of(library)
    found = backend.session.discover()
    second = found[1]
    assert (second.card_id, second.device_id) == (0, 1)
    backend.hot_reset(second)
    assert all(backend.boot_status(chip) != 16 for chip in found)
    with pytest.raises(DcmiError) as raised:
        library.health(0, 1)
    assert raised.value.code == -8012


def test_the_calls_of_a_reset_on_another_family(any_fake: ScenarioPlayer[Any]) -> None:
    node = {"chip_name": "910B3", "reset_seconds": 0, "chips": [{"phy_id": 0, "processes": [{"pid": 9}]}]}
    backend = backend_of(any_fake.open(FakeScenario.model_validate(node)))
    (chip,) = backend.session.discover()
    assert [process.pid for process in backend.processes(chip)] == [9]
    backend.hot_reset(chip)
    assert backend.boot_status(chip) == 16
