"""DirectoryChanges: a wait ends at the directory's next change, not at its timeout."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from waiting import WAIT

from ascend_plugin.faces.deviceplugin.dir_watch import DirectoryChanges

pytestmark = pytest.mark.anyio

FOREVER = 3600.0  # a wait that only a change can end within the test's time


def _bind(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))


async def test_each_change_a_kubelet_restart_makes_ends_a_wait(short_tmp: Path) -> None:
    directory = short_tmp / "dp"
    path = directory / "kubelet.sock"
    steps: list[tuple[str, Callable[[], object]]] = [
        ("a file created", lambda: path.write_text("")),
        ("a file deleted", path.unlink),
        ("a socket bound", lambda: _bind(path)),
        ("the same inode changed (chmod)", lambda: os.chmod(path, 0o600)),
    ]
    changes = DirectoryChanges(directory, 0.1)
    changes.start()  # creates the directory it watches
    try:
        assert changes.watching
        for what, change in steps:
            ended = anyio.Event()

            async def waiter(done: anyio.Event = ended) -> None:
                await changes.wait(FOREVER)
                done.set()

            async with anyio.create_task_group() as group:
                group.start_soon(waiter)
                await anyio.wait_all_tasks_blocked()
                change()
                with anyio.fail_after(WAIT):
                    await ended.wait()
                assert ended.is_set(), what
    finally:
        changes.close()
    assert not changes.watching


async def test_without_a_watch_a_wait_is_its_timeout(short_tmp: Path) -> None:
    changes = DirectoryChanges(short_tmp / "dp", 0.1)  # never started: plain sleeping
    with anyio.fail_after(WAIT):
        await changes.wait(0.01)
    assert not changes.watching
