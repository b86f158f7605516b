"""What is wrong with a path the plugin serves or connects on, in words an operator can act on.

The kernel's errors are true but say little ("connection refused" from a ``kubelet.sock`` that is a
regular file): these add the kind of file there, and the directory's mode and owner against our uid.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)
_NOT_ALLOWED = (errno.EACCES, errno.EPERM)


class PathUnusable(Exception):
    """Root of the path errors: a file, directory or socket the plugin needs cannot be used.

    The message names the path and the cause in this module's words; a part that meets one says so and
    retries with backoff (the operator's fix needs no restart).
    """


def file_kind(mode: int) -> str:
    """``a regular file``, ``a directory``, ... for a file's ``st_mode``."""
    return next((kind for test, kind in _KINDS if test(mode)), "not a file the plugin knows")


def not_a_socket(path: Path) -> str | None:
    """Why ``path`` cannot be the kubelet's socket; None when it is a socket or does not exist."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"{path} cannot be examined: {error.strerror}"
    if stat.S_ISSOCK(mode):
        return None
    return (
        f"{path} is {file_kind(mode)}, not a socket: is the kubelet running, "
        "and is the right host directory mounted?"
    )


def ownership(path: Path) -> str:
    """``mode 0555, owned by uid 0, and this process runs as uid 1000`` for ``path``."""
    try:
        st = os.stat(path)
    except OSError as error:
        return f"it cannot be examined ({error.strerror})"
    return (
        f"mode {stat.S_IMODE(st.st_mode):04o}, owned by uid {st.st_uid}, "
        f"and this process runs as uid {os.geteuid()}"
    )


def create_failure(path: Path, error: OSError) -> str:
    """Why ``path`` (a socket, a directory) could not be created, with the facts of where it goes."""
    if error.errno in _NOT_ALLOWED:
        return f"cannot create {path}: directory is {ownership(path.parent)}"
    if error.errno == errno.EROFS:
        return f"cannot create {path}: {path.parent} is on a read-only file system (mounted read-only?)"
    if error.errno == errno.EADDRINUSE and path.exists() and not path.is_socket():
        kind = file_kind(path.stat().st_mode)
        return f"cannot create {path}: {kind} is in its place (the plugin replaces only a stale socket)"
    if (blocker := _not_a_directory(path, error)) is not None:
        kind = file_kind(blocker.stat().st_mode)
        return f"cannot create {path}: {blocker} is {kind} where a directory belongs"
    return f"cannot create {path}: {error.strerror or error}"


def _not_a_directory(path: Path, error: OSError) -> Path | None:
    """What stands where a directory ``path`` needs belongs: itself (EEXIST) or a parent (ENOTDIR)."""
    if error.errno == errno.EEXIST:
        candidates: tuple[Path, ...] = (path, *path.parents)
    elif error.errno == errno.ENOTDIR:
        candidates = tuple(path.parents)
    else:
        return None
    return next((found for found in candidates if found.exists() and not found.is_dir()), None)


def connect_failure(path: Path, error: OSError) -> str:
    """Why connecting to the socket at ``path`` failed, naming the cause where the facts show it."""
    if (problem := not_a_socket(path)) is not None:
        return problem
    if isinstance(error, FileNotFoundError):
        return f"{path} disappeared"
    if isinstance(error, ConnectionRefusedError):
        return f"{path} refuses connections (no kubelet is listening on it)"
    if error.errno in _NOT_ALLOWED:
        return f"cannot connect to {path}: the socket is {ownership(path)}"
    return f"cannot connect to {path}: {error.strerror or error}"
