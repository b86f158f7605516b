"""What the plugin makes is its own, whatever the umask: no other user reads or writes it.

Started under umask 000, the plugin's sockets, CDI specs, DRA checkpoint,
hot-reset budget and lock note are readable and writable by their owner only,
and the directories it creates are not writable by others. A local user
cannot connect to the device-plugin socket at all; a process that could open
any file (root in another container) is refused by the socket's check of its
peer, as the DRA sockets refuse it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from dra_harness import DraNode, prepare, put_claim, result
from fake_apiserver import FakeApiServer
from peer_client import call_as
from plugin_harness import FakeNode, registered
from plugin_process import PluginProcess, plugin_process
from waiting import eventually

from ascend_plugin.app import PluginApp
from ascend_plugin.hot_reset.budget import ResetBudget
from ascend_plugin.testing.dra_standin import DraKubeletStandIn
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

NOBODY = 65534
OPTIONS = "/v1beta1.DevicePlugin/GetDevicePluginOptions"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a client of another uid needs root to start it")


def open_to_others(*roots: Path, skip: tuple[Path, ...] = ()) -> dict[str, str]:
    """Every path under ``roots`` another user could read or write (a directory: write), with its mode."""
    found = {}
    for root in roots:
        for path in (root, *root.rglob("*")):
            if path in skip:
                continue
            mode = stat.S_IMODE(path.lstat().st_mode)
            loose = 0o002 if path.is_dir() else 0o006
            if mode & loose:
                found[str(path)] = oct(mode)
    return found


@pytest.fixture
def careless_umask() -> Iterator[None]:
    previous = os.umask(0)
    yield
    os.umask(previous)


@pytest.fixture
def plugin(
    node: FakeNode, plugin_dir: Path, short_tmp: Path, kubelet: KubeletStandIn
) -> Iterator[tuple[PluginProcess, Path]]:
    """The plugin in cdi mode, started under umask 000 with a CDI directory it has to create."""
    cdi = short_tmp / "run" / "cdi"
    umask_000 = ["sh", "-c", 'umask 000 && exec "$@"', "sh"]
    extra = ("--allocate-mode", "cdi", "--cdi-spec-dir", str(cdi))
    with plugin_process(node, plugin_dir, short_tmp / "plugin.log", *extra, wrapper=umask_000) as running:
        kubelet.wait_until(registered("huawei.com/Ascend310"), 30, "registration")
        eventually(lambda: list(cdi.glob("*.json")), "the CDI spec written", unless=running.exited)
        yield running, cdi


def test_a_plugin_started_under_umask_000_makes_nothing_others_can_read_or_write(
    plugin: tuple[PluginProcess, Path], plugin_dir: Path
) -> None:
    _, cdi = plugin
    assert (plugin_dir / "Ascend310.sock").is_socket()
    assert (plugin_dir / "ascend-device-plugin.pid").is_file()  # the lock's holder note
    assert open_to_others(plugin_dir, cdi.parent, skip=(plugin_dir / "kubelet.sock",)) == {}


@needs_root
def test_a_local_user_cannot_connect_to_the_device_plugin_socket(
    plugin: tuple[PluginProcess, Path], plugin_dir: Path
) -> None:
    answer = call_as(NOBODY, plugin_dir / "Ascend310.sock", OPTIONS, b"", open_any_file=False)
    assert answer["code"] == "UNAVAILABLE", answer  # the socket's mode: no connection at all


@needs_root
def test_a_process_that_can_open_any_file_is_refused_by_the_peer_check(
    plugin: tuple[PluginProcess, Path], plugin_dir: Path
) -> None:
    answer = call_as(NOBODY, plugin_dir / "Ascend310.sock", OPTIONS, b"", open_any_file=True)
    assert answer["code"] == "PERMISSION_DENIED", answer
    assert answer["details"].startswith(
        f"this socket answers only the kubelet, uid 0 (the owner of {plugin_dir}); pid "
    )
    root = call_as(0, plugin_dir / "Ascend310.sock", OPTIONS, b"", open_any_file=False)
    assert root["code"] == "OK", root


async def test_the_dra_driver_s_sockets_checkpoint_and_specs_are_its_own(
    careless_umask: None,
    dra_driver: PluginApp,
    dra_node: DraNode,
    apiserver: FakeApiServer,
    dra_kubelet: DraKubeletStandIn,
) -> None:
    claim = put_claim(apiserver, "train", [result("npu-0")])
    assert (await prepare(dra_kubelet, claim)).claims[claim[2]].devices
    assert dra_node.checkpoint.is_file()
    assert dra_node.spec_files()
    assert any(
        path.is_socket() for path in (*dra_node.plugin_dir.iterdir(), *dra_node.registry_dir.iterdir())
    )
    # The registry directory is the kubelet's (its stand-in made it under this umask); what is in it, ours.
    made = (dra_node.plugin_dir, dra_node.registry_dir, dra_node.cdi_dir)
    assert open_to_others(*made, skip=(dra_node.registry_dir,)) == {}


def test_the_hot_reset_budget_file_is_its_own(careless_umask: None, short_tmp: Path) -> None:
    path = short_tmp / "served" / "ascend-hot-reset-budget.json"
    budget = ResetBudget(lambda: 100.0, path=path)
    anyio.run(budget.spend, 0)
    assert path.is_file()
    assert open_to_others(path.parent) == {}


@needs_root
async def test_the_mode_holds_for_a_socket_made_again(
    careless_umask: None, kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path
) -> None:
    """A kubelet restart wipes the sockets; the one made again is no looser."""
    from plugin_harness import running_plugin
    from waiting import wait_for

    async with running_plugin(node.settings(plugin_dir)):
        await wait_for(kubelet, registered("huawei.com/Ascend310"), "registration")
        kubelet.restart()
        await wait_for(kubelet, registered("huawei.com/Ascend310", 2), "registration again")
        # The directory and kubelet.sock are the kubelet's (made under this umask); the rest, ours.
        assert open_to_others(plugin_dir, skip=(plugin_dir, plugin_dir / "kubelet.sock")) == {}
        answer = await anyio.to_thread.run_sync(
            partial(call_as, NOBODY, plugin_dir / "Ascend310.sock", OPTIONS, b"", open_any_file=False)
        )
        assert answer["code"] == "UNAVAILABLE", answer
