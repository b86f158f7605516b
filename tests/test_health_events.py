"""910 fault events reach the kubelet without waiting for the next poll."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fake_dcmi.players import ScenarioPlayer
from plugin_harness import health_of, player_settings, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.app import PluginApp
from ascend_plugin.testing.kubelet_standin import KubeletStandIn
from backends.fake import FakeScenario

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend910"
HEALTH = health_of(RESOURCE, "Ascend910-3")


def _server(codes: list[str], severity: int = 2) -> FakeScenario:
    chips = [
        {
            "phy_id": n,
            "card_id": 2 * n + 1,
            "fault_codes": codes if n == 3 else [],
            "fault_severity": severity,
        }
        for n in range(4)
    ]
    return FakeScenario.model_validate({"chip_name": "910B3", "chips": chips})


@asynccontextmanager
async def subscribed_plugin(
    kubelet: KubeletStandIn, node: ScenarioPlayer[Any], plugin_dir: Path, host_root: Path
) -> AsyncIterator[PluginApp]:
    """A plugin on a healthy 910B3 server, subscribed, with polls an hour apart.

    Only an event can bring news within the test's patience.
    """
    node.update(_server([]))
    async with running_plugin(player_settings(node, plugin_dir, host_root, health_interval=3600)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: app.monitor is not None and app.monitor.subscribed, "subscription")
        yield app


async def test_an_event_flips_health_between_polls(
    kubelet: KubeletStandIn, any_fake: ScenarioPlayer[Any], plugin_dir: Path, short_tmp: Path
) -> None:
    async with subscribed_plugin(kubelet, any_fake, plugin_dir, short_tmp):
        any_fake.update(_server(["80E01801"]))
        await wait_for(kubelet, lambda k: HEALTH(k) == "Unhealthy", "unhealthy from the event")
        any_fake.update(_server([]))
        await wait_for(kubelet, lambda k: HEALTH(k) == "Healthy", "healthy from the recovery event")


async def test_the_event_severity_classifies_an_unknown_code(
    kubelet: KubeletStandIn, any_fake: ScenarioPlayer[Any], plugin_dir: Path, short_tmp: Path
) -> None:
    async with subscribed_plugin(kubelet, any_fake, plugin_dir, short_tmp) as app:
        # The chip's health value stays 0 (it alone would say "minor at most"); the
        # event says critical, so the unknown code counts as SeparateNPU.
        any_fake.update(_server(["12345678"], severity=3))
        await wait_for(kubelet, lambda k: HEALTH(k) == "Unhealthy", "unhealthy by the event's severity")
        assert app.inventory is not None
        inventory = app.inventory
        # The event decides at once; the poll it sets off then finds the code listed too.
        await until(
            lambda: inventory.chips()[3].health.reason == "fault 12345678:SeparateNPU", "polled as well"
        )


async def test_families_without_subscription_fall_back_to_polling(
    kubelet: KubeletStandIn, any_fake: ScenarioPlayer[Any], plugin_dir: Path, short_tmp: Path
) -> None:
    any_fake.update(FakeScenario.model_validate({"chip_name": "310B1", "chips": [{"phy_id": 0}]}))
    async with running_plugin(player_settings(any_fake, plugin_dir, short_tmp)) as app:
        await wait_for(kubelet, registered("huawei.com/Ascend310"), "registration")
        assert app.monitor is not None
        assert not app.monitor.subscribed
