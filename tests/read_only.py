"""A directory this process cannot write for a while, as a hostPath not yet writable is.

Run as an ordinary user, taking the write bits away is enough. Root writes
whatever the mode says, so as root the directory is bind-mounted on itself and
the mount flipped read-only and back (``mount -o remount,bind,ro``): the kernel
then refuses every write with EROFS, root's too. Root without the right to
mount (a container without CAP_SYS_ADMIN) has no way to make it so, and the
test is skipped with that reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


class ReadOnly:
    """Turns the writability of ``directory`` off and on for this process."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._mode = directory.stat().st_mode
        self._mounted = False

    def on(self) -> None:
        """From now on, nothing can be created in the directory."""
        if os.geteuid() != 0:
            self.directory.chmod(0o555)
            return
        if not self._mounted:
            self._mount("--bind", str(self.directory), str(self.directory))
            self._mounted = True
        self._mount("-o", "remount,bind,ro", str(self.directory))

    def off(self) -> None:
        """Writable again."""
        if os.geteuid() != 0:
            self.directory.chmod(self._mode)
        elif self._mounted:
            self._mount("-o", "remount,bind,rw", str(self.directory))

    def close(self) -> None:
        """Undo everything; the mount goes lazily (the plugin may still hold the directory open)."""
        if self._mounted:
            subprocess.run(["umount", "-l", str(self.directory)], check=True, capture_output=True)
            self._mounted = False
        elif os.geteuid() != 0:
            self.directory.chmod(self._mode)

    @staticmethod
    def _mount(*arguments: str) -> None:
        mount = shutil.which("mount")
        if mount is None:
            pytest.skip("running as root without mount(8): no way to make a directory read-only for root")
        done = subprocess.run([mount, *arguments], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.skip(f"running as root without the right to mount ({done.stderr.strip()})")


@contextmanager
def read_only(directory: Path) -> Iterator[ReadOnly]:
    """``directory`` unwritable for this process until the block calls ``off()`` (or ends)."""
    directory.mkdir(parents=True, exist_ok=True)
    switch = ReadOnly(directory)
    try:
        switch.on()
        yield switch
    finally:
        switch.close()
