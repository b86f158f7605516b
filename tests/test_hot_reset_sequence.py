"""A hot reset, step by step, through the running plugin on both fakes.

Chip 0 of a four-chip 910B3 node (one reset group) reports a RestartNPU fault
while nothing uses the node: the whole group goes Unhealthy at the kubelet
before the driver is asked anything, the driver is asked for one reset, of
chip 0 alone, and once chip 0 has booted (boot status 16) the group comes back
Healthy through the normal health path.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from hot_reset_harness import CHIPS, RESOURCE, RESTART_NPU, RigParts, device, node_scenario, reset_rig
from waiting import until

from ascend_plugin.hot_reset.notices import ResetStage
from ascend_plugin.hot_reset.stats import Result

pytestmark = pytest.mark.anyio

GROUP = tuple(range(CHIPS))


async def test_the_group_goes_out_one_reset_of_the_faulty_chip_and_the_group_comes_back(
    any_fake: ScenarioPlayer[Any], reset_parts: RigParts, caplog: pytest.LogCaptureFixture
) -> None:
    async with reset_rig(any_fake, reset_parts, node_scenario()) as rig:
        await rig.healthy(*GROUP)
        rig.write(node_scenario({0: RESTART_NPU}))
        await rig.reset_done(0)
        await rig.healthy(*GROUP)

        # One reset, of the faulty chip only: the driver took no other chip down.
        resets = rig.resets()
        assert set(resets) == {0}
        assert resets[0].count == 1

        # Before the driver was asked, the whole group Unhealthy was on its way to the kubelet: the reset
        # waited for the ListAndWatch stream to send it (it did not give up waiting), and the kubelet
        # heard it before the group came back. (When the stand-in's thread records it depends on the
        # machine's load: its receive times say nothing of the order.)
        assert not [r for r in caplog.records if "resetting anyway" in r.getMessage()]
        history = [devices for _, devices in rig.kubelet.resources[RESOURCE].history]
        out = [i for i, devices in enumerate(history) if {devices[device(p)] for p in GROUP} == {"Unhealthy"}]
        assert out, "the kubelet never had the whole group out"
        assert {history[-1][device(phy)] for phy in GROUP} == {"Healthy"}
        assert out[0] < len(history) - 1

        # Told and counted.
        assert [notice.stage for notice in rig.manager.notices.since(0)] == [
            ResetStage.START,
            ResetStage.COMPLETE,
        ]
        assert rig.manager.stats.results == {Result.COMPLETE: 1}
        assert rig.manager.manual.entries() == ()
        inventory = rig.app.inventory
        assert inventory is not None
        assert not any(state.resetting for state in inventory.chips())


async def test_a_chip_the_reset_does_not_mend_stays_out_and_waits_for_its_next_reset(
    any_fake: ScenarioPlayer[Any], reset_parts: RigParts
) -> None:
    stubborn = node_scenario({0: RESTART_NPU}, chip={0: {"reset_clears_faults": False}})
    idle = 3600.0  # the next reset is an hour of idle time away
    async with reset_rig(
        any_fake,
        reset_parts,
        node_scenario(),
        hot_reset_idle=idle,
    ) as rig:
        rig.write(stubborn)
        await until(lambda: 0 in rig.manager.waiting, "chip 0 waiting for its idle time")
        rig.advance(idle)
        await rig.reset_done(0)
        await rig.healthy(1, 2, 3)
        assert rig.health(0) == "Unhealthy"
        await until(lambda: 0 in rig.manager.waiting, "chip 0 waiting again")
        assert rig.reset_count(0) == 1
        assert rig.manager.budget.left(0) == 2


async def test_each_stage_is_an_event_on_the_node_and_the_metrics_count_it(
    python_fake: ScenarioPlayer[Any], reset_parts: RigParts
) -> None:
    async with reset_rig(
        python_fake,
        reset_parts,
        node_scenario(),
        node_events=True,
    ) as rig:
        rig.write(node_scenario({2: RESTART_NPU}))
        await rig.reset_done(2)

        await until(lambda: len(rig.events()) == 2, "the start and complete Events")
        (start, start_type, started), (complete, complete_type, message) = rig.events()
        assert (start, start_type, complete, complete_type) == (
            "HotResetStart",
            "Warning",
            "HotResetComplete",
            "Normal",
        )
        assert started == (
            "hot reset of Ascend910-2 started, with its reset group Ascend910-0, Ascend910-1, Ascend910-2, "
            "Ascend910-3 (fault 80C98009:RestartNPU); 2 of 3 resets left in the next 6 hours"
        )
        assert message.startswith("hot reset of Ascend910-2 complete in ")
        assert message.endswith(
            " s: Ascend910-0, Ascend910-1, Ascend910-2, Ascend910-3 answered again; Ascend910-2 is healthy"
        )

        text = rig.app.metrics.render().decode()
        assert 'ascend_hot_resets_total{result="complete"} 1.0' in text
        assert 'ascend_hot_resets_total{result="failed"} 0.0' in text
        assert "ascend_hot_reset_seconds_count 1.0" in text
