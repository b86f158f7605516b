"""Another plugin serving our socket name (Huawei's holds Ascend910.sock): named, and not fought.

The other plugin runs in a process of its own, as Huawei's does. While it serves
the socket, this plugin leaves it in place, does not register, and says who
serves it and what to do (the log, /readyz); once it is gone (its socket file
left behind, nobody listening), this plugin takes the name over and registers.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from log_records import records
from plugin_harness import FakeNode, registered, running_plugin
from waiting import until, wait_for

from ascend_plugin.other_plugins import socket_server
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

pytestmark = pytest.mark.anyio

RESOURCE = "huawei.com/Ascend310"
REGISTRAR = "ascend_plugin.faces.deviceplugin.registrar"
LISTEN = """
import socket, sys, time
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1])
server.listen(16)
print("listening", flush=True)
time.sleep(600)
"""


def other_plugin(path: Path) -> subprocess.Popen[str]:
    """A process of its own listening on ``path``, as another device plugin would."""
    process = subprocess.Popen([sys.executable, "-c", LISTEN, str(path)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "listening"
    return process


async def test_a_socket_another_process_serves_is_named_and_left_alone(
    node: FakeNode, plugin_dir: Path, kubelet: KubeletStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    socket_path = plugin_dir / "Ascend310.sock"
    other = other_plugin(socket_path)
    try:
        inode = socket_path.stat().st_ino
        async with running_plugin(node.settings(plugin_dir)) as app:
            await until(lambda: records(caplog, REGISTRAR, level=logging.ERROR), "the refusal said")
            (said,) = records(caplog, REGISTRAR, level=logging.ERROR)
            message = said.getMessage()
            assert f"another process serves {socket_path} (pid {other.pid}, uid " in message
            assert "most likely Huawei's ascend-device-plugin" in message
            assert "kubectl -n kube-system delete daemonset <name>" in message
            assert "docs/migration.md" in message
            assert "another process serves" in app.readiness().detail
            assert socket_path.stat().st_ino == inode, "the other plugin's socket is left in place"
            assert not kubelet.registrations
            other.kill()
            other.wait()
            # Its socket file stays behind, with nobody listening: this plugin takes the name over.
            await wait_for(
                kubelet, registered(RESOURCE), "registered once the other plugin is gone", within=60
            )
            now = socket_server(socket_path)
            assert now is not None
            assert now.ours, "this plugin serves the name now"
    finally:
        other.kill()
        other.wait()
        if other.stdout is not None:
            other.stdout.close()


def test_who_serves_a_socket(short_tmp: Path) -> None:
    path = short_tmp / "Ascend910.sock"
    assert socket_server(path) is None, "absent"
    other = other_plugin(path)
    try:
        found = socket_server(path)
        assert found is not None
        assert (found.pid, found.ours) == (other.pid, False)
        assert LISTEN.strip().splitlines()[0] in found.command
        assert found.describe().startswith(f"pid {other.pid}, uid ")
    finally:
        other.kill()
        other.wait()
        if other.stdout is not None:
            other.stdout.close()
    assert socket_server(path) is None, "left behind: nobody listens"
