"""Re-registration: after a kubelet restart, a deleted socket, or a dropped stream."""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import pytest
from plugin_harness import FakeNode, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"


async def test_survives_several_kubelet_restarts_in_a_row(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir)) as app:
        for round_ in range(1, 6):
            if round_ > 1:
                restart = await anyio.to_thread.run_sync(kubelet.restart)
                # The new kubelet wiped every socket, ours included ...
                assert "Ascend310.sock" in restart.deleted_sockets
            await wait_for(kubelet, registered(RESOURCE, times=round_), f"registration {round_}")
            # ... and the plugin came back on a fresh one, with its devices. Both
            # sides agree on the count: no registration was lost or repeated.
            await until(
                lambda n=round_: app.face is not None and app.face.registrations == n,
                f"the plugin sees registration {round_} answered",
            )
            assert (plugin_dir / "Ascend310.sock").is_socket()
            assert kubelet.resources[RESOURCE].devices == {"Ascend310-0": "Healthy"}
            assert len(kubelet.registrations) == round_


async def test_a_kubelet_sock_with_the_same_inode_but_a_new_ctime_is_a_restart(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    """A re-created kubelet.sock may reuse the old inode number (ext4 often does; tmpfs never).

    Whether the file system reuses it here is luck, so this test makes the
    same-inode case certain: the file stays, only its ctime moves (chmod), and
    the plugin must still take it for a new kubelet. Our own socket is left
    alone, so nothing else can give the change away.
    """
    async with running_plugin(node.settings(plugin_dir)):
        await wait_for(kubelet, registered(RESOURCE), "first registration")
        socket = plugin_dir / "kubelet.sock"
        before = socket.stat()
        socket.chmod(before.st_mode & 0o7777)
        assert socket.stat().st_ino == before.st_ino
        assert socket.stat().st_ctime_ns != before.st_ctime_ns
        await wait_for(kubelet, registered(RESOURCE, times=2), "re-registration on the changed kubelet.sock")


async def test_our_socket_deleted_alone_brings_a_new_socket_and_registration(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir)):
        await wait_for(kubelet, registered(RESOURCE), "first registration")
        (plugin_dir / "Ascend310.sock").unlink()
        await wait_for(kubelet, registered(RESOURCE, times=2), "re-registration")
        assert (plugin_dir / "Ascend310.sock").is_socket()


async def test_a_dropped_stream_brings_a_registration(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir)):
        await wait_for(kubelet, registered(RESOURCE), "first registration")
        kubelet.drop_stream(RESOURCE)
        await wait_for(kubelet, registered(RESOURCE, times=2), "re-registration after the stream dropped")
        assert kubelet.resources[RESOURCE].devices == {"Ascend310-0": "Healthy"}


async def test_kubelet_gone_for_a_while_then_back(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    async with running_plugin(node.settings(plugin_dir)) as app:
        await wait_for(kubelet, registered(RESOURCE), "first registration")
        assert app.face is not None
        registrar = app.face
        kubelet.stop()
        await until(lambda: not registrar.registered, "the plugin notices the kubelet is gone")
        assert app.ready is False
        kubelet.start()
        await wait_for(kubelet, registered(RESOURCE, times=2), "registration with the returning kubelet")
        await until(lambda: registrar.registered, "registered again")
