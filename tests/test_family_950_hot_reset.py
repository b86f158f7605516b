"""A hot reset on a 950 node resets the faulty chip alone, in-band, and waits for boot status 16.

Huawei resets a 950 chip by itself (a group of one) through
``dcmiv2_reset_device(dev_id, INBAND)``; the C fake's Atlas 850 numbers its
logical ids four off the physical ones, so a reset sent to the wrong id would
restart another chip. The chip comes back once the driver says 16
(``DCMI_SYSTEM_START_FINISH``).
"""

from __future__ import annotations

import pytest
from fake_dcmi.players import CFakePlayer
from hot_reset_harness import RESTART_NPU, RigParts, reset_rig
from node_950 import CHIPS, RESOURCE, node_950
from waiting import wait_for

from ascend_plugin.hot_reset.stats import Result
from backends.library import BootStatus

pytestmark = pytest.mark.anyio


async def test_the_faulty_chip_alone_is_reset_and_comes_back(
    c_fake: CFakePlayer, reset_parts: RigParts
) -> None:
    quick = {"reset_seconds": 0.3}
    async with reset_rig(c_fake, reset_parts, node_950(**quick), resource=RESOURCE) as rig:
        every = {f"npu-{phy}": "Healthy" for phy in range(CHIPS)}
        await wait_for(rig.kubelet, lambda k: k.health(RESOURCE) == every, "every chip healthy")
        rig.write(node_950({5: {"health": 2, "fault_codes": [RESTART_NPU]}}, **quick))
        await rig.reset_done(5)
        await wait_for(rig.kubelet, lambda k: k.health(RESOURCE) == every, "npu-5 back")
        resets = rig.resets()
        assert set(resets) == {5}, "only the faulty chip was restarted"
        assert resets[5].count == 1
        assert rig.manager.stats.results == {Result.COMPLETE: 1}
        inventory = rig.app.inventory
        assert inventory is not None
        state = inventory.get(5)
        assert state is not None
        assert rig.app.node is not None
        assert rig.app.node.backend.boot_status(state.chip) == BootStatus.SYSTEM_START_FINISH
