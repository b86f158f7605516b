"""A driver call that hangs marks only its chip unhealthy, whoever waited for it; the kubelet path answers."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from fake_dcmi.players import ScenarioPlayer
from health_harness import monitored, watching
from library_threads import inside_the_library
from plugin_harness import health_of, player_settings, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.inventory.monitor import HealthPolicy
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310P"


def _pair(hang_chip_0: bool) -> FakeScenario:
    return FakeScenario.model_validate(
        {
            "chip_name": "310P3",
            "chips": [
                {"phy_id": 0, "card_id": 4, "hang": ["health"] if hang_chip_0 else []},
                {"phy_id": 1, "card_id": 4},
            ],
        }
    )


async def test_a_hung_health_call_marks_only_that_chip_and_recovers(
    kubelet: KubeletStandIn, any_fake: ScenarioPlayer[Any], plugin_dir: Path, short_tmp: Path
) -> None:
    node = any_fake
    node.update(_pair(hang_chip_0=False))
    settings = player_settings(node, plugin_dir, short_tmp, dcmi_call_timeout=0.3)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        node.update(_pair(hang_chip_0=True))
        await wait_for(
            kubelet, lambda k: health_of(RESOURCE, "Ascend310P-0")(k) == "Unhealthy", "hung chip out"
        )
        assert app.inventory is not None
        assert app.inventory.chips()[0].health.reason == "driver call read_health did not return within 0.3 s"
        # The other chip keeps its state and the kubelet path keeps answering while the call hangs.
        assert kubelet.health(RESOURCE)["Ascend310P-1"] == "Healthy"
        response = await anyio.to_thread.run_sync(kubelet.allocate, RESOURCE, ["Ascend310P-1"])
        assert response.container_responses[0].devices[0].host_path == "/dev/davinci1"
        assert app.calls.stuck(0) is not None
        # A chip's stuck call takes that chip away, not the plugin: still ready, and saying why.
        assert app.ready
        assert "driver call read_health on chip 0 stuck for" in app.readiness().detail
        # The call returns once the scenario stops hanging it; everything recovers by itself.
        node.update(_pair(hang_chip_0=False))
        await wait_for(kubelet, lambda k: health_of(RESOURCE, "Ascend310P-0")(k) == "Healthy", "recovered")
        await until(lambda: app.ready, "ready again")


async def test_a_chip_held_back_by_its_thread_cap_is_not_asked_again_and_again(
    kubelet: KubeletStandIn, any_fake: ScenarioPlayer[Any], plugin_dir: Path, short_tmp: Path
) -> None:
    """Two calls hung on chip 0: its lane may start no thread until one returns, and waits for that.

    Its retry fell due long ago; asking at once and being refused, over and
    over, would spin the event loop and delay every other chip's poll.
    """
    node = any_fake
    node.update(_pair(hang_chip_0=True))
    settings = player_settings(node, plugin_dir, short_tmp, dcmi_call_timeout=0.2, health_interval=0.1)
    async with running_plugin(settings) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: app.calls.abandoned_threads == 2, "two hung calls on chip 0: its cap", within=30)
        stuck = app.calls.stuck(0)
        assert stuck is not None
        await until(lambda: app.calls.clock() > stuck.retry_at, "its next retry due", within=30)
        outcomes: list[tuple[str, str]] = []
        app.calls.on_call_done(lambda name, _seconds, outcome: outcomes.append((name, outcome)))
        await until(lambda: outcomes.count(("read_health", "ok")) >= 10, "ten polls of chip 1")
        refused = outcomes.count(("read_health", "stuck"))
        assert refused <= outcomes.count(("read_health", "ok")) + 2, f"chip 0 asked {refused} times"
        assert app.calls.next_try(0) is None  # until a hung call returns
        node.update(_pair(hang_chip_0=False))
        await wait_for(kubelet, lambda k: health_of(RESOURCE, "Ascend310P-0")(k) == "Healthy", "recovered")


async def test_a_call_hung_when_the_monitor_restarts_still_takes_its_chip_out(
    any_fake: ScenarioPlayer[Any],
) -> None:
    """A supervised restart cancels the poll waiting for the hung call; the call's deadline still holds."""
    with monitored(
        any_fake.open(_pair(hang_chip_0=False)), policy=HealthPolicy(interval=0.05), timeout=0.3
    ) as watched:
        async with watching(watched):
            await until(lambda: watched.device("Ascend310P-0").healthy, "chip 0 healthy")
            any_fake.update(_pair(hang_chip_0=True))
            await until(_chip_0_call_hangs, "chip 0's health call inside the library")
        # The monitor is gone (cancelled before the call's timeout) and comes back: a restart.
        assert watched.device("Ascend310P-0").healthy
        async with watching(watched):
            await until(lambda: not watched.device("Ascend310P-0").healthy, "chip 0 out")
            assert (
                watched.device("Ascend310P-0").reason == "driver call read_health did not return within 0.3 s"
            )
            assert watched.device("Ascend310P-1").healthy
            any_fake.update(_pair(hang_chip_0=False))
            await until(lambda: watched.device("Ascend310P-0").healthy, "chip 0 back once the call returned")


def _chip_0_call_hangs() -> bool:
    return any(
        inside_the_library(thread)
        for thread in threading.enumerate()
        if thread.name.startswith("dcmi-chip0-")
    )
