"""plan_offers: which offers a node's settings and chips make, what the operator is told, what is refused."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest
from fake_dcmi.players import PythonFakePlayer
from log_records import records
from node_harness import backend_of, inventory_of
from split_nodes import atlas_200i_a2, atlas_300i, box_910b3, duo

from ascend_plugin.inventory.inventory import Inventory
from ascend_plugin.offers.book import OfferBook
from ascend_plugin.offers.node_offers import (
    OfferPlan,
    OfferSettings,
    SharingRefused,
    StaticVnpus,
    WholeChips,
    plan_offers,
)
from ascend_plugin.settings import SettingsError
from backends.backend import ChipBackend
from backends.fake import FakeScenario


@dataclass
class _Node:
    inventory: Inventory
    backend: ChipBackend

    def plan(self, settings: OfferSettings) -> OfferPlan:
        return plan_offers(settings, self.inventory, self.backend)


def _node(player: PythonFakePlayer, scenario: FakeScenario) -> _Node:
    """The node's chips, healthy, with the vNPUs the library lists, and its family's backend."""
    library = player.open(scenario)
    inventory = inventory_of(library)
    backend = backend_of(library)
    for state in inventory.chips():
        inventory.set_vnpus(state.phy_id, tuple(backend.vnpus(state.chip)))
    return _Node(inventory, backend)


def _kinds(offers: Any) -> list[type]:
    return [type(offer) for offer in offers]


def test_a_310p_node_offers_whole_chips_and_vnpus(python_fake: PythonFakePlayer) -> None:
    plan = _node(python_fake, duo()).plan(OfferSettings())
    assert (_kinds(plan.offers), plan.notices, plan.sharing) == ([WholeChips, StaticVnpus], (), False)


def test_vnpu_off_and_families_without_vnpus_offer_whole_chips_only(python_fake: PythonFakePlayer) -> None:
    off = _node(python_fake, duo()).plan(OfferSettings(vnpu="off"))
    assert _kinds(off.offers) == [WholeChips]
    soc = _node(python_fake, atlas_200i_a2()).plan(OfferSettings())
    assert _kinds(soc.offers) == [WholeChips]


def test_sharing_a_310b_says_how_to_turn_device_share_on(python_fake: PythonFakePlayer) -> None:
    plan = _node(python_fake, atlas_200i_a2()).plan(OfferSettings(share_count=4))
    assert (_kinds(plan.offers), plan.sharing, plan.warnings) == ([WholeChips], True, ())
    assert [offer.shares for offer in plan.offers] == [4]  # type: ignore[attr-defined]
    (notice,) = plan.notices
    assert (notice.reason, notice.level) == ("DeviceShareNeeded", logging.INFO)
    assert notice.message.startswith("share_count=4: each chip is offered 4 times")
    assert notice.message.endswith("npu-smi set -t device-share -i 0 -c 0 -d 1")  # the command, per chip


def test_share_count_on_910_is_a_warning_and_the_chips_stay_whole(python_fake: PythonFakePlayer) -> None:
    plan = _node(python_fake, box_910b3({})).plan(OfferSettings(share_count=8))
    assert (_kinds(plan.offers), plan.sharing) == ([WholeChips, StaticVnpus], False)
    (notice,) = plan.warnings
    assert notice.reason == "ShareCountIgnored"
    # What is ignored and everywhere it can be set; the chips, their family, the families that share.
    for fact in ("--share-count 8", "ASCEND_DP_SHARE_COUNT=8", "Helm settings.shareCount: 8"):
        assert fact in notice.message
    assert "Ascend910-0, Ascend910-1 (910B3) are of family 910" in notice.message
    assert "only 310P, 310B do" in notice.message
    assert notice.message.endswith("offered whole, as huawei.com/Ascend910")


def test_a_large_node_is_named_briefly(python_fake: PythonFakePlayer) -> None:
    chips = [{"phy_id": phy, "card_id": phy // 4} for phy in range(16)]
    scenario = FakeScenario.model_validate({"chip_name": "310", "chips": chips})
    (notice,) = _node(python_fake, scenario).plan(OfferSettings(share_count=2)).warnings
    named = ", ".join(f"Ascend310-{phy}" for phy in range(8))
    assert f"{named} and 8 more (310)" in notice.message
    assert len(_node(python_fake, atlas_300i()).plan(OfferSettings(share_count=2)).warnings) == 1


def test_sharing_chips_that_carry_vnpus_is_refused_naming_both_settings(
    python_fake: PythonFakePlayer,
) -> None:
    with pytest.raises(SharingRefused) as refused:
        _node(python_fake, duo()).plan(OfferSettings(share_count=2))
    assert isinstance(refused.value, SettingsError)  # so the plugin stops as for invalid settings
    said = str(refused.value)
    # Both settings and where each is set, the chip and its vNPUs, and the two ways out.
    assert said.startswith("share_count=2 (--share-count, ASCEND_DP_SHARE_COUNT, Helm settings.shareCount)")
    assert "vnpu=static: vNPUs 100 (vir02), 101 (vir02), 102 (vir04) on Ascend310P-0 (310P3)" in said
    assert "share_count=1 (--share-count 1, ASCEND_DP_SHARE_COUNT=1, Helm settings.shareCount: 1)" in said
    assert "npu-smi set -t destroy-vnpu" in said
    # With vnpu=off the plugin reads no vNPUs (the operator vouches there are none): nothing to refuse.
    library = python_fake.open(duo())
    assert plan_offers(
        OfferSettings(share_count=2, vnpu="off"), inventory_of(library), backend_of(library)
    ).sharing


def test_a_chip_split_while_shared_loses_its_shares_with_one_warning(
    python_fake: PythonFakePlayer, caplog: pytest.LogCaptureFixture
) -> None:
    node = _node(python_fake, duo({}))
    inventory = node.inventory
    book = OfferBook(inventory, node.plan(OfferSettings(share_count=2)).offers)
    assert [device.id for device in book.devices("huawei.com/Ascend310P")] == [
        "Ascend310P-0-0",
        "Ascend310P-0-1",
        "Ascend310P-1-0",
        "Ascend310P-1-1",
    ]
    vnpus = _node(python_fake, duo()).inventory.chips()[0].vnpus
    assert vnpus
    inventory.set_vnpus(0, vnpus)
    assert [device.id for device in book.devices("huawei.com/Ascend310P")] == [
        "Ascend310P-1-0",
        "Ascend310P-1-1",
    ]
    assert [device.id for device in book.devices("huawei.com/Ascend310P-4c")] == ["Ascend310P-4c-102-0"]
    inventory.set_vnpus(0, vnpus[:1])  # another change: no second warning for the same chip
    book.resources()
    withdrawn = records(caplog, "ascend_plugin.offers.node_offers", level=logging.WARNING)
    assert [record.__dict__["chip"] for record in withdrawn] == [0], "one warning, for chip 0"
