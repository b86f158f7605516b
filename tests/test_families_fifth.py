"""A fifth chip family is one row and one small class: discovery, IDs, health, Allocate, placement follow."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from fake_dcmi.players import CFakePlayer
from node_harness import handover

from ascend_plugin.chip_calls import NODE, ChipCalls
from ascend_plugin.fault_policy.config import base_config
from ascend_plugin.fault_policy.policy import FaultSources
from ascend_plugin.handover.modes import HandoverMode
from ascend_plugin.inventory.discovery import Discovery, DiscoverySettings
from ascend_plugin.inventory.monitor import HealthMonitor, HealthPolicy
from ascend_plugin.offers.book import OfferBook
from ascend_plugin.offers.node_offers import WholeChips
from backends.backend import ChipBackend
from backends.chips import Chip
from backends.dcmi import DcmiLibrary
from backends.fake import FakeScenario
from backends.families import FAMILIES, FamilyTable
from backends.topology import same_card

pytestmark = pytest.mark.anyio

# The row: an imagined "710" chip, four to a card.
ASCEND_710 = FamilyTable(
    family="710",
    chip_names=re.compile(r"^710"),
    resource_name="huawei.com/Ascend710",
    device_id_prefix="Ascend710",
    accelerator_label="huawei-Ascend710",
    ai_core_min=4,
    ai_core_max=4,
    ai_core_nominal=4,
)


class Ascend710(ChipBackend):
    """The class: its row, and the one fact no default can guess, what a reset takes down (here: the card)."""

    TABLE = ASCEND_710

    def reset_group(self, chip: Chip, chips: Sequence[Chip]) -> tuple[Chip, ...]:
        return same_card(chip, chips)


async def test_a_fifth_family_needs_one_table_entry(c_fake: CFakePlayer, tmp_path: Path) -> None:
    chips = [{"phy_id": p, "card_id": 2, "fault_codes": ["80E01801"] if p == 3 else []} for p in range(4)]
    c_fake.update(FakeScenario.model_validate({"chip_name": "710A", "aicore": 4.0, "chips": chips}))
    calls = ChipCalls(5.0)
    library = DcmiLibrary(c_fake.current_library(), allow_untrusted=True)
    settings = DiscoverySettings(lambda: library, None, {}, tmp_path, families=(*FAMILIES, Ascend710))
    try:
        node = await Discovery(settings, calls).run()
        inventory = node.inventory
        assert type(node.backend) is Ascend710
        assert inventory.table == ASCEND_710  # with_overrides() of no override: an equal copy
        policy = HealthPolicy()
        faults = FaultSources(base_config(None)).policy
        monitor = HealthMonitor(node.backend, calls, inventory, policy=lambda: policy, faults=faults)
        await monitor.poll_all()
        book = OfferBook(inventory, [WholeChips()])
        devices = book.devices("huawei.com/Ascend710")
        assert [(device.id, device.healthy) for device in devices] == [
            ("Ascend710-0", True),
            ("Ascend710-1", True),
            ("Ascend710-2", True),
            ("Ascend710-3", False),
        ]
        assert {device.unit.label for device in devices if device.unit} == {"card 2"}
        # What every family gets without a word: DDR memory, polling alone, no vNPUs.
        assert [state.memory_mb for state in inventory.chips()] == [8192] * 4
        await monitor.subscribe()
        assert not monitor.subscribed
        assert not inventory.facts.reads_vnpus
        chips = [state.chip for state in inventory.chips()]
        assert [chip.phy_id for chip in node.backend.reset_group(chips[1], chips)] == [0, 1, 2, 3]
        grant = handover(HandoverMode.RUNTIME, ASCEND_710, tmp_path).grant(devices[:2])
        assert grant.envs["ASCEND_VISIBLE_DEVICES"] == "0,1"
        await calls.call(NODE, "close", node.backend.close)
    finally:
        calls.shutdown()
