"""GetPreferredAllocation answers a kubelet whose view lags ours, never with an error.

The kubelet lists the devices it was told of in the last ListAndWatch update
it took in; while a vNPU resource shrinks, that is more than the resource has
now, and any error fails the pod's admission. The plugin answers the best
choice among the IDs it knows (ignoring the others), or no preference.
Through the real binding on the C fake libdcmi.so: an Atlas 300I Duo whose
first chip loses one of its two 2-core vNPUs.
"""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import pytest
from fake_dcmi.players import CFakePlayer
from plugin_harness import player_settings, registered, running_plugin
from split_nodes import DUO_SPLIT, duo, make_host
from waiting import wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

TWO_CORES = "huawei.com/Ascend310P-2c"
KEPT, GONE = "Ascend310P-2c-100-0", "Ascend310P-2c-101-0"
WHOLE = "huawei.com/Ascend310P"


@pytest.fixture
def host(short_tmp: Path) -> Path:
    return make_host(
        short_tmp / "host", "/dev/davinci0", "/dev/davinci1", "/dev/vdavinci100", "/dev/vdavinci101"
    )


async def preferred(
    kubelet: KubeletStandIn, resource: str, available: list[str], must: list[str], size: int
) -> list[str]:
    return await anyio.to_thread.run_sync(kubelet.preferred_allocation, resource, available, must, size)


async def test_a_view_one_update_behind_gets_the_best_choice_among_the_ids_the_plugin_knows(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    c_fake.update(duo())
    async with running_plugin(player_settings(c_fake, plugin_dir, host)):
        await wait_for(kubelet, registered(TWO_CORES), "registration")
        await wait_for(kubelet, lambda k: set(k.health(TWO_CORES)) == {KEPT, GONE}, "both 2c vNPUs")
        view = [KEPT, GONE]  # what the kubelet was told

        c_fake.update(duo({0: DUO_SPLIT[:1]}))  # vNPU 101 destroyed
        await wait_for(kubelet, lambda k: set(k.health(TWO_CORES)) == {KEPT}, "101 gone")

        assert await preferred(kubelet, TWO_CORES, view, [], 1) == [KEPT]
        assert await preferred(kubelet, TWO_CORES, view, [], 2) == [KEPT]
        assert await preferred(kubelet, TWO_CORES, view, [GONE], 2) == [KEPT]
        assert await preferred(kubelet, TWO_CORES, [GONE], [GONE], 1) == []  # no preference


async def test_a_view_larger_than_the_resource_is_answered_on_a_whole_chip_resource_too(
    c_fake: CFakePlayer, kubelet: KubeletStandIn, plugin_dir: Path, host: Path
) -> None:
    """Chip 1 stays whole; a kubelet listing IDs of chips the resource no longer has still gets one."""
    c_fake.update(duo())
    async with running_plugin(player_settings(c_fake, plugin_dir, host)):
        await wait_for(kubelet, registered(WHOLE), "registration")
        stale = ["Ascend310P-0", "Ascend310P-1", "Ascend310P-2", "Ascend310P-3"]
        assert await preferred(kubelet, WHOLE, stale, ["Ascend310P-0"], 1) == ["Ascend310P-1"]
