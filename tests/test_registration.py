"""Registration: only once serving, with the kubelet's checks, retried until it works."""

from __future__ import annotations

from pathlib import Path

import pytest
from plugin_harness import FakeNode, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"


async def test_registers_its_resource_and_lists_the_devices(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration")
        view = kubelet.resources[RESOURCE]
        assert view.endpoint == "Ascend310.sock"
        assert (plugin_dir / "Ascend310.sock").is_socket()
        assert view.devices == {"Ascend310-0": "Healthy"}
        assert view.options.get_preferred_allocation_available
        assert not view.options.pre_start_required
        # The kubelet records a registration before its answer reaches the plugin.
        await until(lambda: app.ready, "the plugin sees its registration answered")


async def test_waits_for_a_kubelet_that_is_not_there_yet(node: FakeNode, plugin_dir: Path) -> None:
    async with running_plugin(node.settings(plugin_dir)) as app:
        # Our own socket comes up (the kubelet must be able to dial back) ...
        await until((plugin_dir / "Ascend310.sock").is_socket, "our socket")
        assert not app.ready
        # ... and registration follows as soon as the kubelet starts.
        kubelet = KubeletStandIn(plugin_dir)
        kubelet.start()
        try:
            await wait_for(kubelet, registered(RESOURCE), "registration with a late kubelet")
        finally:
            kubelet.stop()


async def test_retries_when_the_kubelet_refuses(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    kubelet.refuse_registrations(2, "the kubelet is not ready")
    async with running_plugin(node.settings(plugin_dir)) as app:
        await wait_for(kubelet, registered(RESOURCE), "registration after two refusals")
        assert kubelet.refusals == ["the kubelet is not ready"] * 2
        registrar = app.face
        assert registrar is not None
        await until(lambda: registrar.registered, "the plugin sees its registration answered")
        assert registrar.registrations == 1
        assert registrar.last_error == ""


async def test_resource_name_override_is_registered(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    settings = node.settings(plugin_dir, resource_name="example.com/npu", socket_name="npu.sock")
    async with running_plugin(settings):
        await wait_for(kubelet, registered("example.com/npu"), "registration under the overridden name")
        assert kubelet.resources["example.com/npu"].endpoint == "npu.sock"
