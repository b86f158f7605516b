"""A device plugin kept from its socket (a directory not writable yet, a file in the socket's place) says so
on /readyz, naming the part, the resource and the cause, and registers by itself once the node lets it."""

from __future__ import annotations

from pathlib import Path

import pytest
from plugin_harness import FakeNode, not_ready_with, registered, running_plugin
from read_only import read_only
from waiting import until, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"


async def test_a_device_plugin_directory_not_writable_at_start_is_named_and_registered_once_it_is(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    socket = plugin_dir / "Ascend310.sock"
    with read_only(plugin_dir) as directory:
        async with running_plugin(node.settings(plugin_dir)) as app:
            await until(
                lambda: not_ready_with(
                    app, f"device plugin: {RESOURCE} not registered with the kubelet: cannot create {socket}"
                ),
                "/readyz names the part, the resource and the socket it cannot create",
            )
            assert kubelet.registrations == []
            assert app.liveness().ok, "a registrar that keeps trying by itself is not dead"
            directory.off()
            await wait_for(kubelet, registered(RESOURCE), "registered once the directory is writable")
            await until(lambda: app.ready, f"ready (last: {app.readiness().detail})")


async def test_a_file_in_place_of_the_socket_is_named_and_the_socket_served_once_it_goes(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    socket = plugin_dir / "Ascend310.sock"
    socket.write_text("not a socket")
    async with running_plugin(node.settings(plugin_dir)) as app:
        await until(
            lambda: not_ready_with(
                app, f"device plugin: {RESOURCE} not registered", "a regular file is in its place"
            ),
            "/readyz names the file in the socket's place",
        )
        socket.unlink()
        await wait_for(kubelet, registered(RESOURCE), "registered once the file is gone")
        await until(lambda: app.ready, f"ready (last: {app.readiness().detail})")
