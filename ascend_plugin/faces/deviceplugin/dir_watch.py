"""DirectoryChanges: wake up when anything in the device-plugin directory is created, deleted or moved.

A kubelet restart is visible only in the file system: our socket deleted, a
new ``kubelet.sock``. Polling a stat() every 100 ms finds it up to 100 ms
late, which with the registration after it is more than the plugin may be
unregistered; polling faster costs wake-ups on every node for an event of a
few times a year. So the registrars sleep on this instead: Linux's inotify
(through libc, no dependency) wakes them within a millisecond of a change,
and they still wake after their own interval, which keeps them correct where
inotify is unavailable or misses a change (a directory replaced wholesale,
a file system without inotify).

A wake-up only says "look again": the registrars compare the files' stamps
themselves, so a change that concerns no one (another plugin's socket, our
own note) costs one look.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
from pathlib import Path

import anyio

from ascend_plugin.changes import Changes

log = logging.getLogger(__name__)

_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
# IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
_CHANGES = 0x004 | 0x040 | 0x080 | 0x100 | 0x200 | 0x400 | 0x800


class DirectoryChanges:
    """Lets tasks sleep until ``directory`` changes (or their timeout passes)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changes = Changes()

    @property
    def watching(self) -> bool:
        """True while inotify reports changes; otherwise waiting is plain sleeping."""
        return self._fd is not None

    def start(self) -> None:
        """Watch the directory (creating it if needed); stay a plain timer if inotify is unavailable."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = _inotify_watch(self.directory)
        except OSError as error:
            log.info("not watching %s for changes (%s): checking on a timer only", self.directory, error)
            return
        self._fd = fd
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(fd, self._readable)

    async def wait(self, longest: float) -> None:
        """Return at the next change of the directory, or after ``longest`` seconds."""
        with anyio.move_on_after(longest):
            await self._changes.next_change().wait()

    def close(self) -> None:
        """Stop watching."""
        if self._fd is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        os.close(self._fd)
        self._fd = None

    def _readable(self) -> None:
        assert self._fd is not None
        try:
            while os.read(self._fd, 4096):  # the events themselves do not matter, only that there were some
                pass
        except BlockingIOError:
            pass
        self._changes.bump()


def _inotify_watch(directory: Path) -> int:
    """An inotify descriptor watching ``directory``; OSError when the kernel or libc will not."""
    libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols: libc is among them
    if not hasattr(libc, "inotify_init1"):
        raise OSError("this C library has no inotify")
    fd = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
    if fd < 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))
    if libc.inotify_add_watch(fd, os.fsencode(directory), ctypes.c_uint32(_CHANGES)) < 0:
        number = ctypes.get_errno()
        os.close(fd)
        raise OSError(number, os.strerror(number))
    return fd
