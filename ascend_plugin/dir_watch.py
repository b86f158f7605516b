"""DirectoryChanges: wake up when anything in the kubelet's socket directories is created, deleted or moved.

A kubelet restart shows only in the file system; polling finds it late and costs wake-ups on every node.
Linux's inotify (through libc) wakes the socket keepers within a millisecond, with a look every
:data:`SAFETY_CHECK` seconds besides; where it cannot watch, they poll every ``poll_interval`` (a warning
says so). A wake-up only says "look again": the keepers compare the files' stamps themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import logging
import os
import struct
from collections.abc import Sequence
from pathlib import Path

import anyio

from ascend_plugin.changes import Changes
from ascend_plugin.files import make_directory

log = logging.getLogger(__name__)

SAFETY_CHECK = 10.0  # seconds between looks at a watched directory when nothing changes

_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
# IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
_CHANGES = 0x004 | 0x040 | 0x080 | 0x100 | 0x200 | 0x400 | 0x800
_IN_IGNORED = 0x8000  # the watch is gone: the directory was deleted, or its file system unmounted
_IN_MOVE_SELF = 0x800  # the directory was moved away: what is at its path now is not watched
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then len bytes of name


class DirectoryChanges:
    """Lets tasks sleep until one of ``directories`` changes, or at the latest until it is time to look."""

    def __init__(self, directories: Sequence[Path], poll_interval: float) -> None:
        self.directories = tuple(directories)
        self.poll_interval = poll_interval
        self._fd: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changes = Changes()
        self._lost = False  # watched once, then the directory went: try again at every look

    @property
    def watching(self) -> bool:
        """True while inotify reports changes; otherwise waiting is plain sleeping."""
        return self._fd is not None

    @property
    def look_every(self) -> float:
        """Seconds a registrar may sleep without a change: long while watched, the poll interval if not."""
        if self._lost and self._fd is None:
            self._watch(quiet=True)
        return SAFETY_CHECK if self.watching else self.poll_interval

    @property
    def named(self) -> str:
        """The directories, as the log names them."""
        return ", ".join(str(directory) for directory in self.directories)

    def start(self) -> None:
        """Watch the directories (creating them if needed); poll instead, and say so, if inotify cannot."""
        self._loop = asyncio.get_running_loop()
        for directory in self.directories:
            with contextlib.suppress(OSError):  # then the watch fails too, and says why
                make_directory(directory)
        self._watch(quiet=False)

    async def wait(self, longest: float) -> None:
        """Return at the next change of the directory (or :meth:`look_again`), or after ``longest`` s."""
        with anyio.move_on_after(longest):
            await self._changes.next_change().wait()

    def look_again(self) -> None:
        """Wake every waiter as a change would: something else they check has changed."""
        self._changes.bump()

    def close(self) -> None:
        """Stop watching."""
        self._lost = False
        self._unwatch()

    def _watch(self, *, quiet: bool) -> None:
        try:
            fd = _inotify_watch(self.directories)
        except OSError as error:
            # A directory that is not there yet may come: every look tries again. Any other failure stays.
            self._lost = error.errno == errno.ENOENT
            if not quiet:
                log.warning(
                    "inotify cannot watch %s (%s): a kubelet restart is found by looking every %g s "
                    "instead (kubelet_watch_interval)",
                    self.named,
                    error,
                    self.poll_interval,
                    extra={
                        **self._fields("unavailable"),
                        "interval": self.poll_interval,
                        "error": str(error),
                    },
                )
            return
        if self._lost:
            log.info("watching %s for changes again", self.named, extra=self._fields("back"))
            self._lost = False
        self._fd = fd
        assert self._loop is not None
        self._loop.add_reader(fd, self._readable)

    def _fields(self, watch: str) -> dict[str, object]:
        """A log line's fields: the directories, and what became of their watch."""
        return {"directories": [str(directory) for directory in self.directories], "watch": watch}

    def _unwatch(self) -> None:
        if self._fd is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        os.close(self._fd)
        self._fd = None

    def _readable(self) -> None:
        assert self._fd is not None
        gone = False
        try:
            while data := os.read(self._fd, 4096):
                gone = gone or _watch_ended(data)
        except BlockingIOError:
            pass
        if gone:
            log.warning(
                "a directory of %s was deleted or moved: looking for a kubelet restart every %g s until "
                "it can be watched again",
                self.named,
                self.poll_interval,
                extra={**self._fields("lost"), "interval": self.poll_interval},
            )
            self._unwatch()
            self._lost = True
        self._changes.bump()


def _watch_ended(data: bytes) -> bool:
    """Whether these inotify events say the watch on the directory is over."""
    offset = 0
    while offset + _EVENT.size <= len(data):
        _, mask, _, length = _EVENT.unpack_from(data, offset)
        if mask & (_IN_IGNORED | _IN_MOVE_SELF):
            return True
        offset += _EVENT.size + length
    return False


def _inotify_watch(directories: Sequence[Path]) -> int:
    """An inotify descriptor watching each of ``directories``; OSError when the kernel or libc will not."""
    libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols: libc is among them
    if not hasattr(libc, "inotify_init1"):
        raise OSError("this C library has no inotify")
    fd = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
    if fd < 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))
    for directory in directories:
        if libc.inotify_add_watch(fd, os.fsencode(directory), ctypes.c_uint32(_CHANGES)) < 0:
            number = ctypes.get_errno()
            os.close(fd)
            raise OSError(number, f"{directory}: {os.strerror(number)}")
    return fd
