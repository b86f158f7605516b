"""A reset group is free only when every chip of it is: a process or a pod on any chip holds the reset back.

Chip 0 needs a reset; the process, the pod or the unreadable process list is on
another chip of its group. Nothing is reset while it lasts (the manager has
looked at the group again and again meanwhile), and the reset follows once it
goes. With an idle time, the group must stay free that long in a row: a chip
busy again starts it over.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from hot_reset_harness import RESTART_NPU, ResetRig, RigParts, levels_file, node_scenario, reset_rig
from log_records import records
from plugin_harness import player_settings, registered, running_plugin
from volcano_harness import volcano_pod
from waiting import until, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake.driver_state import DriverStateFile

pytestmark = pytest.mark.anyio


def process_lists_asked(rig: ResetRig) -> int:
    latency = rig.app.metrics.calls.latency.get("processes")
    return latency.calls if latency is not None else 0


async def held_back(rig: ResetRig, busy: str) -> None:
    """Chip 0 waits, naming ``busy``, through several looks at its group, and no reset happens."""
    waiting = await until(lambda: rig.manager.waiting.get(0), "chip 0 waiting for its group")
    assert busy in waiting.busy
    await until(lambda: rig.manager.waiting.get(0) is not None and busy in rig.manager.waiting[0].busy, busy)
    looks = len(rig.kubelet.resources["huawei.com/Ascend910"].history)
    asked = process_lists_asked(rig)
    await until(lambda: process_lists_asked(rig) >= asked + 3, "three more looks at the group")
    assert rig.reset_count(0) == 0
    assert rig.health(1) == "Healthy"  # the group was never taken out meanwhile
    assert len(rig.kubelet.resources["huawei.com/Ascend910"].history) == looks


async def test_a_process_on_another_chip_of_the_group_holds_the_reset_back_until_it_ends(
    any_fake: ScenarioPlayer[Any], reset_parts: RigParts, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "ascend_plugin.hot_reset")
    async with reset_rig(any_fake, reset_parts, node_scenario()) as rig:
        rig.write(node_scenario({0: RESTART_NPU}, processes={2: [4242]}))
        busy = "Ascend910-2 1 process(es) run on it (PID 4242)"
        await held_back(rig, busy)
        waiting = records(caplog, "ascend_plugin.hot_reset.manager", device="Ascend910-0", busy=busy)
        assert len(waiting) == 1  # said once, however often the group was looked at
        rig.write(node_scenario({0: RESTART_NPU}))
        await rig.reset_done(0)
        await rig.healthy(0, 1, 2, 3)


async def test_a_process_list_the_driver_cannot_give_counts_as_busy(
    any_fake: ScenarioPlayer[Any], reset_parts: RigParts
) -> None:
    async with reset_rig(any_fake, reset_parts, node_scenario()) as rig:
        rig.write(node_scenario({0: RESTART_NPU}, chip={3: {"errors": {"processes": -8005}}}))
        await held_back(rig, "Ascend910-3 its process list cannot be read")
        rig.write(node_scenario({0: RESTART_NPU}))
        await rig.reset_done(0)


async def test_a_pod_on_a_chip_of_the_group_holds_the_reset_back_until_it_goes(
    python_fake: ScenarioPlayer[Any], reset_parts: RigParts
) -> None:
    apiserver = reset_parts.apiserver
    async with reset_rig(python_fake, reset_parts, node_scenario()) as rig:
        pod = volcano_pod(
            "trainer", [1], 100, phase="Running", extra_annotations={"huawei.com/AscendReal": "Ascend910-1"}
        )
        apiserver.put("pods", pod)
        held = rig.manager.held
        assert held is not None
        await until(lambda: 1 in held.chips, "chip 1 held by the pod")
        rig.write(node_scenario({0: RESTART_NPU}))
        await until(lambda: rig.manager.waiting.get(0), "chip 0 waiting for its group")
        assert rig.manager.waiting[0].busy == "Ascend910-1 a pod holds it"
        await until(lambda: rig.app.monitor is not None and rig.health(0) == "Unhealthy", "chip 0 out")
        assert rig.reset_count(0) == 0
        apiserver.delete("pods", "trainer", "default")
        await rig.reset_done(0)
        await rig.healthy(0, 1, 2, 3)


async def test_the_group_must_stay_free_for_the_idle_time_in_a_row(
    python_fake: ScenarioPlayer[Any], reset_parts: RigParts
) -> None:
    idle = 600.0
    async with reset_rig(python_fake, reset_parts, node_scenario(), hot_reset_idle=idle) as rig:
        rig.write(node_scenario({0: RESTART_NPU}))
        first = await until(lambda: rig.manager.waiting.get(0), "chip 0 waiting for its idle time")
        assert first.free_since is not None
        rig.advance(idle - 60)
        rig.write(node_scenario({0: RESTART_NPU}, processes={3: [77]}))  # busy again, for a moment
        await until(lambda: rig.manager.waiting[0].free_since is None, "the group busy again")
        rig.write(node_scenario({0: RESTART_NPU}))
        again = await until(
            lambda: rig.manager.waiting.get(0) and rig.manager.waiting[0].free_since, "free again"
        )
        assert again > first.free_since
        asked = process_lists_asked(rig)
        rig.advance(60)  # the first idle time would be over now, the second is not
        await until(lambda: process_lists_asked(rig) >= asked + 4, "looks after the clock moved")
        assert rig.reset_count(0) == 0
        rig.advance(idle)
        await rig.reset_done(0)


async def test_where_no_one_can_say_which_chips_pods_hold_nothing_is_reset(
    python_fake: ScenarioPlayer[Any], kubelet: KubeletStandIn, plugin_dir: Path, short_tmp: Path
) -> None:
    """Outside Volcano mode this plugin does not learn which chips pods hold: every group counts as busy."""
    levels = levels_file(short_tmp)
    python_fake.update(node_scenario())
    settings = player_settings(
        python_fake, plugin_dir, short_tmp, fault_levels_file=levels, hot_reset=True, hot_reset_idle=0
    )
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered("huawei.com/Ascend910"), "registration")
        python_fake.update(node_scenario({0: RESTART_NPU}))
        manager = app.hot_reset
        assert manager is not None
        waiting = await until(lambda: manager.waiting.get(0), "chip 0 waiting")
        assert waiting.busy.startswith("Ascend910-0 which chips pods hold is not known on this node")
        assert DriverStateFile.beside(python_fake.scenario_path).read().resets == ()
