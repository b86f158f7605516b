"""A pod on a chip of the group when its reset would start holds the reset back, however recently it came.

The plugin reads which container holds which chip from the kubelet every 5 s;
a pod placed in between is not in that reading. So at the moment of the reset
the kubelet is asked afresh, and a chip the plugin's own Allocate handed over
counts as held before the kubelet lists it. Each test places its pod right
after a regular reading, the next one 5 s away, and then lets the group's idle
time run out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from fake_dcmi.players import ScenarioPlayer
from hot_reset_harness import RESOURCE, RESTART_NPU, MovingClock, levels_file, node_scenario
from plugin_harness import player_settings, registered
from pod_resources_standin import PodResourcesStandIn
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.hot_reset.manager import HotResetManager
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake.driver_state import DriverStateFile

pytestmark = pytest.mark.anyio

IDLE = 600.0
LIST = "/v1.PodResourcesLister/List"


@asynccontextmanager
async def plugin(
    player: ScenarioPlayer[Any], kubelet: KubeletStandIn, pod_resources: PodResourcesStandIn, root: Path
) -> AsyncIterator[tuple[HotResetManager, MovingClock]]:
    """The plugin with hot reset on (idle time IDLE) outside Volcano mode: the kubelet says who holds what."""
    player.update(node_scenario())
    settings = player_settings(
        player,
        root / "dp",
        root,
        fault_levels_file=levels_file(root),
        hot_reset=True,
        hot_reset_idle=IDLE,
        pod_resources_socket=pod_resources.socket,
    )
    clock = MovingClock()
    app = PluginApp(settings, clock=clock)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(app.run)
        try:
            await wait_for(kubelet, registered(RESOURCE), "registration")
            manager = await until(lambda: app.hot_reset, "the hot-reset manager")
            yield manager, clock
        finally:
            app.stop()


async def group_free_then_a_listing(
    player: ScenarioPlayer[Any], manager: HotResetManager, pod_resources: PodResourcesStandIn
) -> None:
    """Chip 0 needs a reset and its group is free, waiting out its idle time; a regular listing just ended."""
    player.update(node_scenario({0: RESTART_NPU}))
    await until(
        lambda: (waiting := manager.waiting.get(0)) is not None and waiting.free_since is not None,
        "chip 0 waiting for its idle time, its group free",
    )
    asked = pod_resources.calls.count(LIST)
    await until(lambda: pod_resources.calls.count(LIST) > asked, "a regular listing")


async def reset_once_free_again(
    player: ScenarioPlayer[Any], manager: HotResetManager, clock: MovingClock
) -> None:
    """Once the group is seen free again, its idle time runs out and chip 0 is reset."""
    await until(
        lambda: (waiting := manager.waiting.get(0)) is not None and waiting.free_since is not None,
        "the group free again",
    )
    clock.advance(IDLE)
    manager.wake()
    await until(lambda: reset_count(player) == 1, "chip 0 reset")


def reset_count(player: ScenarioPlayer[Any]) -> int:
    reset = DriverStateFile.beside(player.scenario_path).read().reset_of(0)
    return reset.count if reset is not None else 0


async def held_back_by(manager: HotResetManager, clock: MovingClock, why: str) -> None:
    clock.advance(IDLE)
    manager.wake()
    await until(
        lambda: (waiting := manager.waiting.get(0)) is not None and why in waiting.busy,
        f"the reset held back: {why}",
    )


async def test_a_pod_admitted_since_the_last_listing_holds_the_reset_back(
    python_fake: ScenarioPlayer[Any],
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
) -> None:
    async with plugin(python_fake, kubelet, pod_resources, short_tmp) as (manager, clock):
        await group_free_then_a_listing(python_fake, manager, pod_resources)
        await anyio.to_thread.run_sync(pod_resources.admit, "ml", "job", RESOURCE, ["Ascend910-1"])
        await held_back_by(manager, clock, "Ascend910-1")
        assert reset_count(python_fake) == 0
        pod_resources.remove("ml", "job")
        await reset_once_free_again(python_fake, manager, clock)


async def test_a_chip_allocate_just_handed_over_holds_the_reset_back_before_the_kubelet_lists_it(
    python_fake: ScenarioPlayer[Any],
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
) -> None:
    async with plugin(python_fake, kubelet, pod_resources, short_tmp) as (manager, clock):
        await group_free_then_a_listing(python_fake, manager, pod_resources)
        await anyio.to_thread.run_sync(kubelet.allocate, RESOURCE, ["Ascend910-2"])  # not listed yet
        await held_back_by(manager, clock, "Ascend910-2 was just handed to a container")
        assert reset_count(python_fake) == 0
        # The kubelet never lists it (the pod failed its admission): a listing a second later frees it.
        await reset_once_free_again(python_fake, manager, clock)


async def test_a_pod_the_last_listing_missed_is_seen_by_the_listing_at_the_moment_of_the_reset(
    python_fake: ScenarioPlayer[Any],
    kubelet: KubeletStandIn,
    pod_resources: PodResourcesStandIn,
    short_tmp: Path,
) -> None:
    """A container listed now that no Allocate of this process handed over (admitted before a restart)."""
    async with plugin(python_fake, kubelet, pod_resources, short_tmp) as (manager, clock):
        await group_free_then_a_listing(python_fake, manager, pod_resources)
        pod_resources.record("ml", "job", RESOURCE, ["Ascend910-3"])
        await held_back_by(manager, clock, "Ascend910-3 a pod holds it")
        assert reset_count(python_fake) == 0
