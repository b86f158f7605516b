"""GetPreferredAllocation end to end: a plugin on the C fake (real cffi path), asked by the kubelet stand-in.

One node per row of the placement table; the chips' topology comes from what
DCMI reports (chip name, card ids, physical ids) and, for NUMA, from the
PCIe address DCMI gives and the host's sysfs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from fake_dcmi.players import CFakePlayer
from plugin_harness import player_settings, registered, running_plugin
from waiting import wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio


async def _preferred(
    kubelet: KubeletStandIn,
    c_fake: CFakePlayer,
    plugin_dir: Path,
    host_root: Path,
    scenario: dict[str, Any],
    available: Sequence[str],
    size: int,
    must_include: Sequence[str] = (),
    **settings: Any,
) -> list[str]:
    c_fake.update(FakeScenario.model_validate(scenario))
    resource = f"huawei.com/{available[0].rsplit('-', 1)[0]}"
    async with running_plugin(player_settings(c_fake, plugin_dir, host_root, **settings)):
        await wait_for(kubelet, registered(resource), "registration")
        answer: list[str] = await anyio.to_thread.run_sync(
            kubelet.preferred_allocation, resource, list(available), list(must_include), size
        )
        return answer


def _ids(prefix: str, phys: Sequence[int]) -> list[str]:
    return [f"{prefix}-{phy}" for phy in phys]


async def test_first_generation_910_keeps_a_pair_in_one_ring(
    kubelet: KubeletStandIn, c_fake: CFakePlayer, plugin_dir: Path, short_tmp: Path
) -> None:
    node = {"chip_name": "910ProB", "chips": [{"phy_id": p, "card_id": 10 + p} for p in range(8)]}
    # Ring 0 has 3 free (phy 0 taken), ring 1 has 4: a pair goes to the ring with 4 (2 then 4 then 3).
    answer = await _preferred(kubelet, c_fake, plugin_dir, short_tmp, node, _ids("Ascend910", range(1, 8)), 2)
    assert sorted(answer) == ["Ascend910-4", "Ascend910-5"]


async def test_310_cards_take_a_pair_from_the_card_with_three_free(
    kubelet: KubeletStandIn, c_fake: CFakePlayer, plugin_dir: Path, short_tmp: Path
) -> None:
    chips = [{"phy_id": p, "card_id": 5 if p < 4 else 9} for p in range(8)]
    node = {"chip_name": "310", "chips": chips}
    available = _ids("Ascend310", [1, 2, 3, 4, 5, 6, 7])  # card 5: three free, card 9: four free
    answer = await _preferred(kubelet, c_fake, plugin_dir, short_tmp, node, available, 2)
    assert sorted(answer) == ["Ascend310-1", "Ascend310-2"]


async def test_a_300i_duo_puts_one_chip_on_the_card_already_half_used(
    kubelet: KubeletStandIn, c_fake: CFakePlayer, plugin_dir: Path, short_tmp: Path
) -> None:
    chips = [{"phy_id": p, "card_id": p // 2} for p in range(4)]
    node = {"chip_name": "310P3", "chips": chips}
    answer = await _preferred(kubelet, c_fake, plugin_dir, short_tmp, node, _ids("Ascend310P", [1, 2, 3]), 1)
    assert answer == ["Ascend310P-1"]


async def test_a_16_chip_910b_box_splits_ten_evenly_over_its_two_groups(
    kubelet: KubeletStandIn, c_fake: CFakePlayer, plugin_dir: Path, short_tmp: Path
) -> None:
    node = {"chip_name": "910B3", "chips": [{"phy_id": p, "card_id": p + 1} for p in range(16)]}
    answer = await _preferred(kubelet, c_fake, plugin_dir, short_tmp, node, _ids("Ascend910", range(16)), 10)
    assert len(answer) == 10
    assert sum(int(device.rsplit("-", 1)[1]) < 8 for device in answer) == 5


async def test_numa_nodes_from_sysfs_are_listed_and_keep_a_pair_on_one_node(
    kubelet: KubeletStandIn, c_fake: CFakePlayer, plugin_dir: Path, short_tmp: Path
) -> None:
    # An 8-chip 910B3 server: the fake's default PCIe address of phy N is bus N+1; chips 0-3 on NUMA
    # node 0, 4-7 on node 1, as the host's sysfs says.
    host = short_tmp / "host"
    for phy in range(8):
        device = host / "sys/bus/pci/devices" / f"0000:{phy + 1:02x}:00.0"
        device.mkdir(parents=True)
        (device / "numa_node").write_text(f"{phy // 4}\n")
    node = {"chip_name": "910B3", "chips": [{"phy_id": p, "card_id": p + 1} for p in range(8)]}
    available = _ids("Ascend910", [0, 1, 2, 4, 5, 6, 7])  # node 0 has 3 free, node 1 has 4
    c_fake.update(FakeScenario.model_validate(node))
    async with running_plugin(player_settings(c_fake, plugin_dir, host)):
        await wait_for(kubelet, registered("huawei.com/Ascend910"), "registration")
        listed = kubelet.resources["huawei.com/Ascend910"].numa
        assert listed == {f"Ascend910-{phy}": (phy // 4,) for phy in range(8)}
        for size in (2, 3):
            answer = await anyio.to_thread.run_sync(
                kubelet.preferred_allocation, "huawei.com/Ascend910", available, [], size
            )
            assert len({int(device.rsplit("-", 1)[1]) // 4 for device in answer}) == 1, answer


async def test_placement_can_be_turned_off(
    kubelet: KubeletStandIn, c_fake: CFakePlayer, plugin_dir: Path, short_tmp: Path
) -> None:
    c_fake.update(FakeScenario.model_validate({"chip_name": "910B3", "chips": [{"phy_id": 0}]}))
    settings = player_settings(c_fake, plugin_dir, short_tmp, preferred_allocation=False)
    async with running_plugin(settings):
        await wait_for(kubelet, registered("huawei.com/Ascend910"), "registration")
        options = kubelet.resources["huawei.com/Ascend910"].options
        assert not options.get_preferred_allocation_available
