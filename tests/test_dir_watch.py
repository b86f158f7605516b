"""DirectoryChanges: a wait ends at the directory's next change, not at its timeout."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from log_records import fields, records
from waiting import WAIT

from ascend_plugin.dir_watch import SAFETY_CHECK, DirectoryChanges

LOGGER = "ascend_plugin.dir_watch"

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
    changes = DirectoryChanges([directory], 0.1)
    changes.start()  # creates the directory it watches
    try:
        assert changes.watching
        for what, change in steps:
            await _ends(changes, change, what)
    finally:
        changes.close()
    assert not changes.watching


async def test_without_a_watch_a_wait_is_its_timeout(short_tmp: Path) -> None:
    changes = DirectoryChanges([short_tmp / "dp"], 0.1)  # never started: plain sleeping
    with anyio.fail_after(WAIT):
        await changes.wait(0.01)
    assert not changes.watching


async def _ends(changes: DirectoryChanges, change: Callable[[], object], what: str = "the change") -> None:
    """A wait on ``changes`` ends when ``change`` is made (and not by its timeout)."""
    ended = anyio.Event()

    async def waiter() -> None:
        await changes.wait(FOREVER)
        ended.set()

    async with anyio.create_task_group() as group:
        group.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        change()
        with anyio.move_on_after(WAIT):
            await ended.wait()
        group.cancel_scope.cancel()  # a waiter left hanging fails the test below, not by its own timeout
    assert ended.is_set(), f"{what} did not end the wait"


@asynccontextmanager
async def watching(directories: list[Path], interval: float) -> AsyncIterator[DirectoryChanges]:
    changes = DirectoryChanges(directories, interval)
    changes.start()
    try:
        yield changes
    finally:
        changes.close()


async def test_one_watch_covers_several_directories_and_looks_rarely(short_tmp: Path) -> None:
    plugins, registry = short_tmp / "plugins", short_tmp / "registry"
    async with watching([plugins, registry], 0.1) as changes:
        assert changes.watching
        assert changes.look_every == SAFETY_CHECK
        await _ends(changes, lambda: (registry / "driver-reg.sock").write_text(""))
        await _ends(changes, lambda: (plugins / "dra.sock").write_text(""))
        await _ends(changes, changes.look_again)  # something else the waiters check has changed


async def test_a_directory_moved_away_is_polled_until_it_can_be_watched_again(
    short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    directory = short_tmp / "dp"
    async with watching([directory], 0.1) as changes:
        await _ends(changes, lambda: directory.rename(short_tmp / "old"))
        assert not changes.watching
        assert changes.look_every == 0.1  # the directory is not there: the look tries and polls
        lost = records(caplog, LOGGER, level=logging.WARNING, watch="lost")
        assert [fields(record, "directories", "interval") for record in lost] == [
            {"directories": [str(directory)], "interval": 0.1}
        ]
        directory.mkdir()
        assert changes.look_every == SAFETY_CHECK  # the next look watches the new directory
        assert changes.watching
        assert len(records(caplog, LOGGER, level=logging.INFO, watch="back")) == 1
        await _ends(changes, lambda: (directory / "kubelet.sock").write_text(""))


async def test_where_inotify_cannot_watch_a_warning_names_the_look_interval(
    short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = short_tmp / "file"
    blocker.write_text("")
    async with watching([blocker / "dp"], 0.25) as changes:  # a directory inside a file: no watch, ever
        assert not changes.watching
        assert changes.look_every == 0.25
        warnings = records(caplog, LOGGER, level=logging.WARNING)
        assert [fields(record, "directories", "watch", "interval") for record in warnings] == [
            {"directories": [str(blocker / "dp")], "watch": "unavailable", "interval": 0.25}
        ]
        assert "kubelet_watch_interval" in warnings[0].getMessage()  # the setting an operator changes
        with anyio.fail_after(WAIT):
            await changes.wait(0.01)  # plain sleeping
