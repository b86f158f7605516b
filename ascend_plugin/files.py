"""The files and directories the plugin makes: atomic writes, and modes that never follow the umask.

CDI specs, the DRA checkpoint and the hot-reset budget are read by a runtime or the next run: each is
written whole under its final name, its owner's alone; directories are 0755. ``durable`` survives a
power cut.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

FILE_MODE = 0o600  # a file the plugin writes: the plugin and root read it, nobody else
DIRECTORY_MODE = 0o755  # a directory the plugin creates: others may look in, never write


def make_directory(path: Path) -> None:
    """``path`` and its missing parents, each :data:`DIRECTORY_MODE`; OSError naming one not made."""
    missing: list[Path] = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    if not missing and not path.is_dir():  # as mkdir says it: a file in the way
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIRECTORY_MODE)
        except FileExistsError:
            if not directory.is_dir():  # a file in the way (else: made meanwhile)
                raise


def write_atomically(path: Path, text: str, *, durable: bool = False, mode: int = FILE_MODE) -> None:
    """Replace ``path`` with ``text`` (UTF-8, ``mode``) in one rename; OSError when it cannot be written."""
    make_directory(path.parent)
    temporary = path.with_name(f".{path.name}.tmp")
    descriptor = os.open(
        temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode
    )
    with open(descriptor, "w", encoding="utf-8") as file:
        os.fchmod(descriptor, mode)  # exactly ``mode``: not the umask's, nor an earlier temporary's
        file.write(text)
        if durable:
            file.flush()
            os.fsync(descriptor)
    os.replace(temporary, path)
    if durable:
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
