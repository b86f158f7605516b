"""Finding, trusting and opening libdcmi.so (docs/dcmi.md).

Like Huawei's, it refuses a library anyone but root could have replaced, unless allowed by a setting.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from backends.dcmi._dcmi_cffi import ffi
from backends.errors import LibraryUnavailable

LIBRARY_NAME: Final = "libdcmi.so"

# Where Huawei's installers put the library: servers and PCIe cards; the
# separate DCMI package; Atlas 200I A2 / 500 A2 boards (310B SoC).
KNOWN_PATHS: Final = (
    Path("/usr/local/Ascend/driver/lib64/driver/libdcmi.so"),
    Path("/usr/local/dcmi/libdcmi.so"),
    Path("/usr/lib64/libdcmi.so"),
)

_SETTING: Final = "dcmi_library (--dcmi-library, ASCEND_DP_DCMI_LIBRARY)"
_RELAX: Final = "dcmi_allow_untrusted_library (--dcmi-allow-untrusted-library)"


class LibraryNotFound(LibraryUnavailable):
    """No libdcmi.so where the settings, LD_LIBRARY_PATH or the install paths say."""


class UntrustedLibrary(LibraryUnavailable):
    """The library, or a directory above it, could have been replaced by someone other than root."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(
            f"refusing to load {path}: {problem}; a library that a non-root user can replace would run "
            f"with this plugin's privileges. Make it root-owned and writable only by root, or set {_RELAX} "
            "for development only"
        )


def candidates(environ: Mapping[str, str], known: Sequence[Path] = KNOWN_PATHS) -> list[Path]:
    """Where to look, in order: each LD_LIBRARY_PATH entry, then the known install paths."""
    # An empty entry means "the current directory" to the dynamic loader; never look there.
    entries = [entry for entry in environ.get("LD_LIBRARY_PATH", "").split(":") if entry]
    return [Path(entry) / LIBRARY_NAME for entry in entries] + list(known)


def locate(
    configured: Path | None, environ: Mapping[str, str] = os.environ, known: Sequence[Path] = KNOWN_PATHS
) -> Path:
    """The library to open, absolute: the configured path, else the first candidate that exists."""
    if configured is not None:
        if not configured.is_file():
            raise LibraryNotFound(f"the configured DCMI library {configured} does not exist ({_SETTING})")
        return configured.absolute()
    searched = candidates(environ, known)
    found = next((path for path in searched if path.is_file()), None)
    if found is None:
        raise LibraryNotFound(
            f"{LIBRARY_NAME} not found; looked in {', '.join(str(path) for path in searched)}. "
            f"Is the Ascend driver installed and mounted into this container? Or set {_SETTING}"
        )
    return found.absolute()


def check_trusted(path: Path) -> None:
    """Raise UntrustedLibrary (the problem nearest the file) unless ``path`` and every directory above it
    are root's alone, through a symbolic link too."""
    for item in _chain(path):
        try:
            info = item.stat()
        except OSError as error:
            raise UntrustedLibrary(path, f"cannot check {item}: {error.strerror}") from error
        kind = "directory" if stat.S_ISDIR(info.st_mode) else "file"
        if info.st_uid != 0:
            raise UntrustedLibrary(path, f"{kind} {item} is owned by uid {info.st_uid}, not root")
        writers = [
            who for who, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if info.st_mode & bit
        ]
        if writers:
            mode = stat.S_IMODE(info.st_mode)
            raise UntrustedLibrary(
                path, f"{kind} {item} is writable by {' and '.join(writers)} (mode {mode:04o})"
            )


def _chain(path: Path) -> Iterator[Path]:
    """The resolved file and the directories above it, nearest first; then the same for the path as given."""
    seen: set[Path] = set()
    for start in (Path(os.path.realpath(path)), path.absolute()):
        for item in (start, *start.parents):
            if item not in seen:
                seen.add(item)
                yield item


# dlerror()'s wording when a needed library is not on the loader's search path.
_MISSING = re.compile(r"(?P<name>[^\s:/]+\.so[^\s:/]*): cannot open shared object file")
# Never take these from the driver's directory: they come with the container's own C library.
_C_LIBRARY = re.compile(r"^(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[-\w]*)\.so")
# Handles of dependencies loaded on the library's behalf; they must outlive it.
_DEPENDENCIES: list[Any] = []


def open_library(path: Path, *, trusted_only: bool = True) -> Any:
    """dlopen ``path`` (RTLD_NOW: a broken install fails now, not mid-call). Its missing dependencies come
    from its own directory (an Atlas 200I A2's /usr/lib64, where the image's loader does not look and
    LD_LIBRARY_PATH would bring the host's libc), loaded first with RTLD_GLOBAL, never the C library."""
    return _open(path, path.parent, trusted_only, ffi.RTLD_NOW)


def _open(path: Path, directory: Path, trusted_only: bool, flags: int) -> Any:
    tried: set[str] = set()
    while True:
        try:
            return ffi.dlopen(str(path), flags)
        except OSError as error:
            found = _MISSING.search(str(error))
            name = found.group("name") if found else None
            dependency = directory / name if name else None
            if (
                name is None
                or dependency is None
                or name in tried
                or _C_LIBRARY.match(name)
                or not dependency.is_file()
            ):
                raise LibraryUnavailable(f"cannot load {path}: {error}") from error
            tried.add(name)
            if trusted_only:
                check_trusted(dependency)
            _DEPENDENCIES.append(_open(dependency, directory, trusted_only, ffi.RTLD_NOW | ffi.RTLD_GLOBAL))
