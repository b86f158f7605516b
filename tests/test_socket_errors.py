"""Errors on the kubelet path name their cause, are logged once, and are retried with backoff until fixed.

Two mistakes a node makes: a ``kubelet.sock`` that is a regular file or a
directory (a hostPath mounted wrong, or created by the runtime before the
kubelet ran), and a device-plugin directory this process cannot write. The
kernel calls them "connection refused" and "permission denied"; the plugin
says what is there, and the directory's mode and owner next to its own uid.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
from log_records import lines, records
from plugin_harness import FakeNode, registered, running_plugin
from plugin_process import plugin_process
from waiting import WAIT, until, wait_for

from ascend_plugin.path_facts import create_failure
from ascend_plugin.testing.kubelet_standin import KubeletStandIn

RESOURCE = "huawei.com/Ascend310"
REGISTRAR = "ascend_plugin.faces.deviceplugin.registrar"
UNPRIVILEGED = 65534  # nobody


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What each failed registration logged at ERROR said was wrong."""
    return [record.error for record in records(caplog, REGISTRAR, level=logging.ERROR)]  # type: ignore[attr-defined]


def repeats(caplog: pytest.LogCaptureFixture) -> int:
    """The failed attempts logged again at DEBUG (the same failure as the last one)."""
    return sum(1 for record in records(caplog, REGISTRAR, level=logging.DEBUG) if hasattr(record, "attempt"))


@pytest.mark.anyio
@pytest.mark.parametrize(("make", "kind"), [(Path.touch, "a regular file"), (Path.mkdir, "a directory")])
async def test_a_kubelet_sock_that_is_no_socket_is_named_for_what_it_is(
    node: FakeNode, plugin_dir: Path, caplog: pytest.LogCaptureFixture, make: object, kind: str
) -> None:
    caplog.set_level(logging.DEBUG, REGISTRAR)
    kubelet_sock = plugin_dir / "kubelet.sock"
    make(kubelet_sock)  # type: ignore[operator]
    advice = "is the kubelet running, and is the right host directory mounted?"
    expected = f"{kubelet_sock} is {kind}, not a socket: {advice}"
    async with running_plugin(node.settings(plugin_dir)) as app:
        await until(lambda: repeats(caplog) >= 2, "two more attempts")
        assert errors(caplog) == [expected]
        assert (
            app.readiness().detail == f"device plugin: {RESOURCE} not registered with the kubelet: {expected}"
        )

        # The node is fixed: the kubelet comes up on a real socket, and the plugin registers.
        if kubelet_sock.is_dir():
            kubelet_sock.rmdir()
        else:
            kubelet_sock.unlink()
        kubelet = KubeletStandIn(plugin_dir)
        kubelet.start()
        try:
            await wait_for(kubelet, registered(RESOURCE), "registration once kubelet.sock is a socket")
            await until(lambda: app.ready, "ready")
        finally:
            kubelet.stop()
    assert len(errors(caplog)) == 1


def test_the_create_failure_names_the_directory_s_mode_owner_and_our_uid(tmp_path: Path) -> None:
    directory = tmp_path / "device-plugins"
    directory.mkdir(mode=0o555)
    directory.chmod(0o555)
    error = PermissionError(13, "Permission denied")
    assert create_failure(directory / "Ascend910.sock", error) == (
        f"cannot create {directory}/Ascend910.sock: directory is mode 0555, owned by uid {os.getuid()}, "
        f"and this process runs as uid {os.geteuid()}"
    )
    assert create_failure(directory / "x.sock", OSError(30, "Read-only file system")) == (
        f"cannot create {directory}/x.sock: {directory} is on a read-only file system (mounted read-only?)"
    )
    blocker = tmp_path / "registry"
    blocker.write_text("")
    assert create_failure(blocker, FileExistsError(17, "File exists")) == (
        f"cannot create {blocker}: {blocker} is a regular file where a directory belongs"
    )
    assert create_failure(blocker / "x.sock", NotADirectoryError(20, "Not a directory")) == (
        f"cannot create {blocker}/x.sock: {blocker} is a regular file where a directory belongs"
    )


@pytest.mark.slow
def test_an_unwritable_device_plugin_directory_is_named_with_its_mode_owner_and_our_uid(
    kubelet: KubeletStandIn, node: FakeNode, plugin_dir: Path, short_tmp: Path
) -> None:
    """The plugin runs as an unprivileged user (root writes anywhere) on a directory of mode 0555."""
    as_root = os.geteuid() == 0
    uid = UNPRIVILEGED if as_root else os.geteuid()
    setpriv = shutil.which("setpriv")
    if as_root and setpriv is None:
        pytest.skip("running as root without setpriv (util-linux): no way to run the plugin unprivileged")
    drop = (
        [setpriv, f"--reuid={UNPRIVILEGED}", f"--regid={UNPRIVILEGED}", "--clear-groups"] if as_root else []
    )
    short_tmp.chmod(0o755)
    plugin_dir.chmod(0o555)
    owner = plugin_dir.stat().st_uid
    expected = (
        f"cannot create {plugin_dir}/Ascend310.sock: directory is mode 0555, owned by uid {owner}, "
        f"and this process runs as uid {uid}"
    )
    try:
        log = short_tmp / "plugin.log"
        with plugin_process(node, plugin_dir, log, "--log-level", "DEBUG", wrapper=drop) as plugin:
            failure = plugin.wait_for_line(
                lambda line: bool(lines([line], REGISTRAR, level="ERROR")), "the create failure"
            )
            assert expected in failure["error"]
            plugin.wait_for_line(
                lambda line: bool(lines([line], REGISTRAR, level="DEBUG", error=failure["error"])),
                "a retry, at DEBUG",
                after=plugin.lines().index(failure),
            )
            assert not [entry for entry in plugin.lines() if "Traceback" in str(entry)]

            # Fixed: the directory writable (and kubelet.sock connectable) for the plugin's user.
            plugin_dir.chmod(0o777)
            (plugin_dir / "kubelet.sock").chmod(0o777)
            kubelet.wait_until(registered(RESOURCE), WAIT, "registration once the directory is writable")
            assert len(lines(plugin.lines(), REGISTRAR, level="ERROR")) == 1, (
                "said once, however often retried"
            )
    finally:
        plugin_dir.chmod(0o755)
