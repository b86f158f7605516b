"""Device nodes for the fake chips, so the containers the kubelet starts really get them.

The C fake libdcmi.so answers for chips whose ``/dev/davinciN`` do not exist, and the container
runtime refuses a container whose devices are missing on the host. As Intel's DRA drivers do in
their end-to-end suite, each node is made as a character device with the numbers of ``/dev/null``
(1, 3): a container sees it under its name and can open it, and nothing real is behind it. Only
nodes this module made are removed again; a node that exists already (real hardware) is refused.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

NULL = os.makedev(1, 3)


def _is_fake(path: Path) -> bool:
    with contextlib.suppress(FileNotFoundError):
        info = path.lstat()
        return stat.S_ISCHR(info.st_mode) and info.st_rdev == NULL
    return False


@contextlib.contextmanager
def device_nodes(paths: Iterable[str]) -> Iterator[list[Path]]:
    """Make each of ``paths`` (absolute, under /dev) for the duration of the block."""
    made: list[Path] = []
    folders: list[Path] = []
    try:
        for text in paths:
            path = Path(text)
            if path.exists() or path.is_symlink():
                if not _is_fake(path):
                    raise RuntimeError(f"{path} exists and is not a fake node: this machine has real devices")
                made.append(path)  # left by a run that was killed: reused, removed at the end
                continue
            if not path.parent.exists():
                path.parent.mkdir(parents=True)
                folders.append(path.parent)
            os.mknod(path, 0o666 | stat.S_IFCHR, NULL)
            made.append(path)
        yield made
    finally:
        for path in made:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        for folder in reversed(folders):
            with contextlib.suppress(OSError):
                folder.rmdir()


def chip_nodes(logic_ids: Iterable[int], shared: Iterable[str] = ()) -> list[str]:
    """``/dev/davinci<id>`` of each chip, then the family's shared nodes."""
    return [*(f"/dev/davinci{logic}" for logic in logic_ids), *shared]
