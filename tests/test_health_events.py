"""910 fault events reach the kubelet without waiting for the next poll."""

from __future__ import annotations

from pathlib import Path

import pytest
from plugin_harness import FakeNode, health_of, registered, running_plugin, until, wait_for

from ascend_plugin.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend910"
HEALTH = health_of(RESOURCE, "Ascend910-3")


def _server(codes: list[str], severity: int = 2) -> dict[str, object]:
    return {
        "chip_name": "910B3",
        "chips": [
            {
                "phy_id": n,
                "card_id": 2 * n + 1,
                "fault_codes": codes if n == 3 else [],
                "fault_severity": severity,
            }
            for n in range(4)
        ],
    }


async def test_an_event_flips_health_between_polls(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    node.write(_server([]))
    # Polls are an hour apart: only the event can bring the news in time.
    async with running_plugin(node.settings(plugin_dir, health_interval=3600)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: app.monitor is not None and app.monitor.subscribed, "subscription")
        node.write(_server(["80E01801"]))
        await wait_for(kubelet, lambda k: HEALTH(k) == "Unhealthy", "unhealthy from the event")
        node.write(_server([]))
        await wait_for(kubelet, lambda k: HEALTH(k) == "Healthy", "healthy from the recovery event")


async def test_the_event_severity_classifies_an_unknown_code(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    node.write(_server([]))
    async with running_plugin(node.settings(plugin_dir, health_interval=3600)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        await until(lambda: app.monitor is not None and app.monitor.subscribed, "subscription")
        # The chip's health value stays 0 (it alone would say "minor at most"); the
        # event says critical, so the unknown code counts as SeparateNPU.
        node.write(_server(["12345678"], severity=3))
        await wait_for(kubelet, lambda k: HEALTH(k) == "Unhealthy", "unhealthy by the event's severity")
        assert app.registry is not None
        assert app.registry.devices()[3].reason == "fault 12345678:SeparateNPU"


async def test_families_without_subscription_fall_back_to_polling(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir)) as app:
        await wait_for(kubelet, registered("huawei.com/Ascend310"), "registration")
        assert app.monitor is not None
        assert not app.monitor.subscribed
