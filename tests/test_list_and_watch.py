"""ListAndWatch: the full list at once, again on every visible change, a clean end on shutdown."""

from __future__ import annotations

from pathlib import Path

import pytest
from plugin_harness import FakeNode, health_of, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"
HEALTH = health_of(RESOURCE, "Ascend310-0")


def scenario(*codes: str, health: int = 0) -> dict[str, object]:
    return {"chip_name": "310B1", "chips": [{"phy_id": 0, "health": health, "fault_codes": list(codes)}]}


async def test_editing_the_scenario_flips_health_both_ways(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir)):
        await wait_for(kubelet, registered(RESOURCE), "registration")
        node.write(scenario("80E01801"))
        await wait_for(kubelet, lambda k: HEALTH(k) == "Unhealthy", "unhealthy after a SeparateNPU fault")
        assert kubelet.resources[RESOURCE].allocatable == 0
        assert kubelet.resources[RESOURCE].capacity == 1
        node.write(scenario())
        await wait_for(kubelet, lambda k: HEALTH(k) == "Healthy", "healthy after the fault cleared")


async def test_changes_the_kubelet_cannot_see_send_no_update(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        assert app.inventory is not None
        sent = kubelet.resources[RESOURCE].updates
        # A SubHealth fault changes the registry (fault list) but not the health the kubelet sees.
        node.write(scenario("81A3880C"))
        await until(lambda: bool(app.inventory and app.inventory.chips()[0].health.faults), "fault recorded")
        # One more visible change proves the stream is live; it must be the only update sent.
        node.write(scenario("80E01801"))
        await wait_for(kubelet, lambda k: HEALTH(k) == "Unhealthy", "unhealthy")
        assert kubelet.resources[RESOURCE].updates == sent + 1


async def test_shutdown_ends_the_stream_cleanly_and_removes_the_socket(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir)):
        await wait_for(kubelet, registered(RESOURCE), "registration")
    await wait_for(kubelet, lambda k: not k.resources[RESOURCE].stream_open, "stream closed")
    assert kubelet.resources[RESOURCE].stream_end == "OK"
    assert not (plugin_dir / "Ascend310.sock").exists()
    assert (plugin_dir / "kubelet.sock").is_socket()


async def test_a_chip_that_drops_off_the_bus_goes_unhealthy(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        node.write(scenario(health=0xFFFFFFFF))
        await wait_for(kubelet, lambda k: HEALTH(k) == "Unhealthy", "unhealthy after the card dropped")
        assert app.inventory is not None
        assert "dropped" in app.inventory.chips()[0].health.reason
